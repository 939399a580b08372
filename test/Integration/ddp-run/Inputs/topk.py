"""numpy's top-k sparsification with error feedback, against ddp-run's.

    topk.py DIR OUT --ratio R [--no-error-feedback] [--states PATTERN]

DIR holds steps.py's gradients (in.r{rank}.s{step}.a{arg}.npy; one bucket
per argument, as ddp-opt --insert-topk makes of step.mlir's allreduces). OUT
is ddp-run's output pattern ({rank}, {step}, {result}). Simulates every rank
in float32, in the compiled code's order: m = g + e; the k = max(1,
floor(N * ratio)) elements largest in |m| (largest first, ties in index
order); e = m with zeros there; the ranks' values added into zeros in rank
order at their indices; divided by the world size. Every output must be
bitwise the simulation's, and with --states (a pattern with {rank} and
{name}: ddp-run --dump-state) so must the last residuals. Prints what each
rank sent.
"""

import argparse
import glob
import math
import os
import sys

import numpy as np


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("out")
    parser.add_argument("--ratio", type=float, required=True)
    parser.add_argument("--no-error-feedback", action="store_true")
    parser.add_argument("--states")
    args = parser.parse_args()
    f32 = np.float32
    paths = glob.glob(os.path.join(args.dir, "in.r*.s*.a*.npy"))
    field = lambda p, key: int(os.path.basename(p).split("." + key)[1].split(".")[0])
    ranks = 1 + max(field(p, "r") for p in paths)
    steps = 1 + max(field(p, "s") for p in paths)
    tensors = 1 + max(field(p, "a") for p in paths)
    errors = {}
    for step in range(steps):
        for i in range(tensors):
            grads = [np.load(os.path.join(args.dir, f"in.r{r}.s{step}.a{i}.npy"))
                     for r in range(ranks)]
            shape, n = grads[0].shape, grads[0].size
            k = max(1, min(n, math.floor(n * args.ratio)))
            total = np.zeros(n, f32)
            for r, g in enumerate(grads):
                m = g.ravel().astype(f32)
                if not args.no_error_feedback:
                    m = m + errors.get((r, i), np.zeros(n, f32))
                # Stable: equal magnitudes keep index order.
                chosen = np.argsort(-np.abs(m), kind="stable")[:k]
                rest = m.copy()
                rest[chosen] = 0
                errors[(r, i)] = rest
                total[chosen] += m[chosen]
            want = (total / f32(ranks)).reshape(shape)
            for r in range(ranks):
                got = np.load(args.out.format(rank=r, step=step, result=i))
                if got.dtype != want.dtype or got.shape != want.shape:
                    fail(f"step {step} result {i} rank {r}: {got.dtype} {got.shape}")
                if got.tobytes() != want.tobytes():
                    worst = np.max(np.abs(got.astype(np.float64) - want))
                    fail(f"step {step} result {i} rank {r}: differs from numpy "
                         f"by up to {worst:.3g}")
            print(f"step {step} result {i}: {k} of {n} elements per rank, "
                  f"bitwise numpy's on {ranks} ranks")
    if not args.states:
        return
    for r in range(ranks):
        found = sorted(glob.glob(args.states.format(rank=r, name="ddp.topk_error.*")))
        if len(found) != tensors:
            fail(f"rank {r}: {len(found)} residuals, expected {tensors}")
        # Named ddp.topk_error.<function>.<bucket>: bucket i is argument i.
        for path in found:
            i = int(path.rsplit(".", 2)[-2])
            if np.load(path).tobytes() != errors[(r, i)].tobytes():
                fail(f"rank {r}: residual {os.path.basename(path)} differs from numpy's")
        print(f"rank {r}: {len(found)} residuals bitwise numpy's")


if __name__ == "__main__":
    main()
