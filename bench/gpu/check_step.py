# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Checks a compiled step's results on one rank (bench/gpu/check_step.sh).

    check_step.py --data D --ref R --out O --steps S --backend cpu|cuda

D holds the inputs (steps.py gen: in.r0.s{step}.a{arg}.npy), R ddp-run's
CPU results ({kind}/s{step}.o{result}.npy, {kind}/state.{name}.npy,
{kind}.json), O the runner's, in the same layout. At world size 1 a mean
over the ranks is the input itself, so:

  plain     every result is bitwise its input, and bitwise the CPU's;
  fp16      every result is bitwise float32(float16(input)) (one rounding
            to nearest even, no scaling at one rank), and the CPU's;
  quant     --insert-quantization per tensor, quantpc per channel (64),
  quantpc   and the user guide's sign hook: bitwise the CPU's (host loops
  hook      and ddprt_allgather);
  powersgd  step 0 (before start-iter) and the bias (never compressed) are
            bitwise the input; the first compressed step reconstructs the
            rank-2 matrices exactly (to 1e-4 of their norm); over the
            compressed steps results plus the final error equal the inputs
            (error feedback, to 1e-5); results and states are within 1e-4 of
            the largest CPU value (summation order differs on a GPU), and
            bitwise the CPU's on the CPU backend; the step counter is exact.

Every kind's counters (elements and bytes sent, per role) equal the CPU's.
"""

import argparse
import glob
import json
import os
import sys

import numpy as np

failures = []


def fail(message):
    failures.append(message)
    print("FAIL: " + message)


def load(path):
    if not os.path.exists(path):
        fail(f"missing {path}")
        return None
    return np.load(path)


def bitwise(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def close(a, b):
    """max |a - b| / max |b|, or None if shapes or types differ."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return None
    scale = max(float(np.max(np.abs(b.astype(np.float64)))), 1e-30)
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) / scale


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--start-iter", type=int, default=1)
    args = parser.parse_args()
    exact_backend = args.backend == "cpu"
    inputs = [[np.load(os.path.join(args.data, f"in.r0.s{s}.a{i}.npy"))
               for i in range(3)] for s in range(args.steps)]

    for kind in ("plain", "fp16", "powersgd", "quant", "quantpc", "hook"):
        worst = 0.0
        bitwise_count = 0
        for s in range(args.steps):
            for i in range(3):
                x = inputs[s][i]
                out = load(os.path.join(args.out, kind, f"s{s}.o{i}.npy"))
                ref = load(os.path.join(args.ref, kind, f"s{s}.o{i}.npy"))
                if out is None or ref is None:
                    continue
                where = f"{kind} step {s} result {i}"
                expect = None
                if kind == "plain":
                    expect = x
                elif kind == "fp16":
                    expect = x.astype(np.float16).astype(np.float32)
                elif kind == "powersgd" and (s < args.start_iter or x.ndim != 2):
                    expect = x
                if expect is not None:
                    if not bitwise(out, expect):
                        fail(f"{where}: not bitwise what one rank must give")
                    if not bitwise(ref, expect):
                        fail(f"{where}: the CPU reference is not either")
                # Quantization and the sign hook compute in compiled host
                # loops, the same code on every backend: bitwise the CPU's.
                if expect is not None or exact_backend or kind in ("quant", "quantpc", "hook"):
                    if not bitwise(out, ref):
                        fail(f"{where}: differs from the CPU reference")
                    else:
                        bitwise_count += 1
                else:
                    gap = close(out, ref)
                    if gap is None or gap > 1e-4:
                        fail(f"{where}: off the CPU reference by {gap} of its largest value")
                    else:
                        worst = max(worst, gap)
                if kind == "powersgd" and s == args.start_iter and x.ndim == 2:
                    exact = np.max(np.abs(out.astype(np.float64) - x)) / np.linalg.norm(x)
                    if exact > 1e-4:
                        fail(f"{where}: the first compressed step is off the "
                             f"rank-2 input by {exact:.3g} of its norm")
                    else:
                        print(f"{where}: the first compressed step is the rank-2 "
                              f"input to {exact:.2g} of its norm")
        total = args.steps * 3
        if kind not in ("powersgd",) or exact_backend:
            print(f"{kind}: {bitwise_count} of {total} results bitwise as expected "
                  f"and equal to the CPU's")
        else:
            print(f"{kind}: {bitwise_count} of {total} results bitwise as expected "
                  f"(step 0, the bias), the others within {worst:.2g} of the CPU's "
                  f"largest value")

        if kind == "powersgd":
            states = {}
            for path in sorted(glob.glob(os.path.join(args.ref, kind, "state.*.npy"))):
                name = os.path.basename(path)
                ref = np.load(path)
                out = load(os.path.join(args.out, kind, name))
                if out is None:
                    continue
                states[name] = out
                if exact_backend or ref.dtype == np.int64:
                    if not bitwise(out, ref):
                        fail(f"{kind} {name}: differs from the CPU reference")
                else:
                    gap = close(out, ref)
                    if gap is None or gap > 1e-4:
                        fail(f"{kind} {name}: off the CPU reference by {gap}")
            counter = [v for k, v in states.items() if k.startswith("state.ddp.step.")]
            if len(counter) != 1 or int(counter[0]) != args.steps:
                fail(f"{kind}: the step counter is {counter}, not {args.steps}")
            for i in (0, 2):
                shape = inputs[0][i].shape
                errors = [v for k, v in states.items()
                          if k.startswith("state.ddp.error.") and v.shape == shape]
                if len(errors) != 1:
                    fail(f"{kind}: {len(errors)} error states of shape {shape}")
                    continue
                put = sum(inputs[s][i].astype(np.float64)
                          for s in range(args.start_iter, args.steps))
                got = sum(np.load(os.path.join(args.out, kind, f"s{s}.o{i}.npy"))
                          .astype(np.float64) for s in range(args.start_iter, args.steps))
                gap = np.max(np.abs(got + errors[0] - put)) / np.max(np.abs(put))
                if gap > 1e-5:
                    fail(f"{kind} result {i}: error feedback loses {gap:.3g}")
                else:
                    print(f"{kind} result {i}: error feedback identity to {gap:.2g}")

        with open(os.path.join(args.ref, f"{kind}.json")) as f:
            ref = json.load(f)
        try:
            with open(os.path.join(args.out, f"{kind}.json")) as f:
                out = json.load(f)
        except (OSError, ValueError) as e:
            fail(f"{kind}: no summary: {e}")
            continue
        keys = ["world_size", "steps", "elements_sent_per_step", "bytes_sent_per_step",
                "elements_sent_total", "elements_before_compression",
                "elements_after_compression", "collectives", "elements_sent",
                "bytes_sent"]
        for key in keys:
            if out.get(key) != ref.get(key):
                fail(f"{kind}: {key} is {out.get(key)}, the CPU's {ref.get(key)}")
        print(f"{kind}: counters equal to the CPU's (sent {out.get('elements_sent_per_step')} "
              f"elements in the last step); {out.get('ms_per_step')} ms per step "
              f"on {out.get('backend')}")

    if failures:
        print(f"check_step: {len(failures)} failed")
        sys.exit(1)
    print("check_step: all passed")


if __name__ == "__main__":
    main()
