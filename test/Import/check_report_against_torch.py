# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Compares a ddp-compression-report JSON with PyTorch's PowerSGD stats for the
same model (written by export_models.py --stats-json).

  check_report_against_torch.py REPORT.json STATS.json [--rank R]

Requires:
  - the same number of tensors;
  - the report's totals numel_before / numel_after equal to what
    PowerSGDState.compression_stats() gives, and the same ratio;
  - for every report row whose "loc" is a parameter name from
    named_parameters(): the same shape, decision, rank and element counts;
  - the rows whose names do not match (an exporter may rename parameters)
    must match the remaining PyTorch rows as a multiset of
    (shape, compressed, rank, numel_before, numel_after);
  - if the stats name the ONNX file's trainable initializers in
    graph.initializer order ("onnx_trainable_order", export_models.py -o),
    the report's rows in exactly that order.

Plain python3 (no torch import): the PyTorch side was computed by
export_models.py.
"""
import argparse
import collections
import json
import sys


def key(row):
    return (tuple(row["shape"]), bool(row["compressed"]), row["rank"],
            row["numel_before"], row["numel_after"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("stats")
    parser.add_argument("--rank", type=int,
                        help="which rank of the stats file (needed if it has several)")
    args = parser.parse_args()
    with open(args.report) as f:
        report = json.load(f)
    with open(args.stats) as f:
        stats = json.load(f)
    ranks = stats["ranks"]
    if args.rank is None:
        if len(ranks) != 1:
            raise SystemExit("check_report_against_torch.py: the stats file has ranks %s; "
                             "pick one with --rank" % sorted(ranks))
        rank = next(iter(ranks))
    else:
        rank = str(args.rank)
        if rank not in ranks:
            raise SystemExit("check_report_against_torch.py: no rank %s in %s"
                             % (rank, args.stats))
    torch_stats = ranks[rank]
    if torch_stats.get("skipped_0d"):
        print("note: PyTorch side skipped 0-d parameters %s" % torch_stats["skipped_0d"])

    failures = []
    rows = report["tensors"]
    theirs = torch_stats["tensors"]
    if len(rows) != len(theirs):
        failures.append("report has %d tensors, PyTorch's model %d parameters"
                        % (len(rows), len(theirs)))

    by_name = {t["name"]: t for t in theirs}
    matched = set()
    unmatched_rows = []
    for row in rows:
        t = by_name.get(row["loc"])
        if t is None or row["loc"] in matched:
            unmatched_rows.append(row)
            continue
        matched.add(row["loc"])
        if list(row["shape"]) != list(t["shape"]):
            failures.append("%s: shape %s, PyTorch %s" % (row["loc"], row["shape"], t["shape"]))
        for k in ("compressed", "rank", "numel_before", "numel_after"):
            if row[k] != t[k]:
                failures.append("%s: %s is %r, PyTorch says %r" % (row["loc"], k, row[k], t[k]))
    unmatched_theirs = [t for t in theirs if t["name"] not in matched]
    if unmatched_rows or unmatched_theirs:
        mine = collections.Counter(key(r) for r in unmatched_rows)
        other = collections.Counter(key(t) for t in unmatched_theirs)
        if mine != other:
            failures.append("tensors not matched by name differ: report only %s; PyTorch only %s"
                            % (dict(mine - other), dict(other - mine)))

    order = stats.get("onnx_trainable_order")
    if order is not None:
        locs = [row["loc"] for row in rows]
        if locs != order:
            first = next((i for i, (a, b) in enumerate(zip(locs, order)) if a != b),
                         min(len(locs), len(order)))
            failures.append("the report's tensors are not in graph.initializer order: "
                            "#%d is %r, the ONNX file has %r there (%d vs %d tensors)"
                            % (first, locs[first] if first < len(locs) else None,
                               order[first] if first < len(order) else None,
                               len(locs), len(order)))

    for k in ("numel_before", "numel_after"):
        if report[k] != torch_stats[k]:
            failures.append("total %s is %r, PyTorch's compression_stats() says %r"
                            % (k, report[k], torch_stats[k]))
    before, after = torch_stats["numel_before"], torch_stats["numel_after"]
    if after > 0:
        ratio = before / after
        if abs(report["ratio"] - ratio) > 1e-9 * ratio:
            failures.append("ratio %r, PyTorch says %r" % (report["ratio"], ratio))

    if failures:
        print("MISMATCH (%s, rank %s):" % (stats.get("model"), rank))
        print("\n".join(failures))
        return 1
    print("OK: %s rank %s: %d tensors (%d by name%s), %d compressed, %d -> %d elements (%.2fx)"
          % (stats.get("model"), rank, len(rows), len(matched),
             ", initializer order" if order is not None else "",
             sum(bool(r["compressed"]) for r in rows), before, after,
             before / after if after else 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
