# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Checks a ddp-compression-report JSON against PyTorch's own PowerSGD rule.

For every tensor of the report, runs what powerSGD_hook does with it
(PyTorch's tensor.view(shape[0], -1), r = min(n, m, rank), and PyTorch's own
_should_compress), and requires the same decision, rank and element counts,
and totals equal to what compression_stats() would sum.

  python3 compare_report_with_pytorch.py report.json --rank 2 [--rate 2]
"""
import argparse
import json
import sys

import torch
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--rate", type=float, default=2.0)
    args = parser.parse_args()
    with open(args.report) as f:
        report = json.load(f)

    failures = []
    before = after = 0
    for row in report["tensors"]:
        matrix = torch.empty(row["shape"]).view(row["shape"][0], -1)
        n, m = matrix.shape
        rank = min(n, m, args.rank)
        compress, numel_before, numel_after = powerSGD_hook._should_compress(
            n, m, rank, args.rate)
        expected = {
            "compressed": compress,
            "rank": rank if compress else 0,
            "numel_before": numel_before,
            "numel_after": numel_after if compress else numel_before,
        }
        before += expected["numel_before"]
        after += expected["numel_after"]
        for key, value in expected.items():
            if row[key] != value:
                failures.append("%s: %s is %r, PyTorch says %r" % (row["loc"], key, row[key], value))
    for key, value in [("numel_before", before), ("numel_after", after)]:
        if report[key] != value:
            failures.append("total %s is %r, PyTorch says %r" % (key, report[key], value))
    if abs(report["ratio"] - before / after) > 1e-9 * before / after:
        failures.append("ratio %r, PyTorch says %r" % (report["ratio"], before / after))
    if failures:
        print("\n".join(failures))
        return 1
    print("OK: %d tensors, %d compressed, %d -> %d elements (%.2fx), as PyTorch %s"
          % (len(report["tensors"]), sum(r["compressed"] for r in report["tensors"]),
             before, after, before / after, torch.__version__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
