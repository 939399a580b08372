#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Inputs for step.mlir, and what random-k must give for them (test.sh).

    check.py gen DIR --ranks R --steps S
        DIR/in/r{rank}.s{step}.{name}.npy: random gradients
    check.py check DIR --ranks R --steps S --ratio X --seed N
        compares DIR/out/r{rank}.s{step}.o{result}.npy and the states
        DIR/state/r{rank}.{name}.npy after the last step with a NumPy model
        of RandomK.cpp's formulas; exits 1 on a difference
"""

import argparse
import math
import os
import sys

import numpy as np

# step.mlir's arguments, in order, and its buckets as random-k sees them:
# (bucket index, its gradients); the others are plain means.
ARGS = [("fc1.weight", (16, 4), np.float32), ("fc1.bias", (16,), np.float32),
        ("fc2.weight", (3, 5), np.float32), ("head.scale", (8,), np.float16),
        ("temperature", (1,), np.float32)]
BUCKETS = [(0, ["fc1.weight", "fc1.bias"]), (1, ["fc2.weight"])]

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def splitmix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def chosen(seed, bucket, step, n, ratio):
    """The k indices bucket `bucket` sends at `step`, in order of j."""
    k = min(max(1, math.ceil(ratio * n)), n)
    stride = n // k
    offset = splitmix64((seed + (bucket << 32) + (step + 1) * GOLDEN) & MASK) % n
    return [(offset + j * stride) % n for j in range(k)]


def gen(args):
    rng = np.random.default_rng(7)
    os.makedirs(os.path.join(args.dir, "in"), exist_ok=True)
    for rank in range(args.ranks):
        for step in range(args.steps):
            for name, shape, dtype in ARGS:
                value = rng.standard_normal(shape).astype(dtype)
                np.save(os.path.join(args.dir, "in", f"r{rank}.s{step}.{name}.npy"),
                        value)


def load(args, *parts):
    return np.load(os.path.join(args.dir, *parts))


def check(args):
    names = [name for name, _, _ in ARGS]
    failures = []

    def compare(what, got, want, exact):
        if got.shape != want.shape or got.dtype != want.dtype:
            failures.append(f"{what}: {got.dtype}{list(got.shape)}, "
                            f"expected {want.dtype}{list(want.shape)}")
        elif exact and not np.array_equal(got, want):
            failures.append(f"{what}: differs by up to "
                            f"{np.max(np.abs(got - want))}")
        elif not np.allclose(got, want, rtol=1e-3, atol=1e-3):
            failures.append(f"{what}: differs by up to "
                            f"{np.max(np.abs(got.astype(np.float32) - want))}")

    errors = {b: [None] * args.ranks for b, _ in BUCKETS}
    for step in range(args.steps):
        grads = [{name: load(args, "in", f"r{rank}.s{step}.{name}.npy")
                  for name in names} for rank in range(args.ranks)]
        want = [dict() for _ in range(args.ranks)]
        for bucket, members in BUCKETS:
            flats = [np.concatenate([g[name].ravel() for name in members])
                     for g in grads]
            n = flats[0].size
            m = [flat + (errors[bucket][r] if errors[bucket][r] is not None
                         else np.zeros(n, np.float32))
                 for r, flat in enumerate(flats)]
            picked = chosen(args.seed, bucket, step, n, args.ratio)
            # The runtime's mean: the ranks' sum in rank order, over R.
            total = np.zeros(len(picked), np.float32)
            for r in range(args.ranks):
                total += m[r][picked]
            mean = np.zeros(n, np.float32)
            mean[picked] = total / np.float32(args.ranks)
            for r in range(args.ranks):
                error = m[r].copy()
                error[picked] = 0
                errors[bucket][r] = error
                start = 0
                for name in members:
                    size = grads[r][name].size
                    want[r][name] = mean[start:start + size].reshape(
                        grads[r][name].shape)
                    start += size
            print(f"step {step}, bucket {bucket}: {len(picked)} of {n} "
                  f"elements sent, from index {picked[0]}, {n // len(picked)} apart")
        for name in ("head.scale", "temperature"):
            total = sum(g[name].astype(np.float32) for g in grads)
            plain = total / np.float32(args.ranks)
            for r in range(args.ranks):
                want[r][name] = plain.astype(grads[r][name].dtype)
        for rank in range(args.ranks):
            for result, name in enumerate(names):
                got = load(args, "out", f"r{rank}.s{step}.o{result}.npy")
                compare(f"rank {rank}, step {step}, {name}", got,
                        want[rank][name], exact=name != "head.scale")

    for bucket, _ in BUCKETS:
        for rank in range(args.ranks):
            got = load(args, "state", f"r{rank}.random_k.error.step.{bucket}.npy")
            compare(f"rank {rank}, error of bucket {bucket}", got,
                    errors[bucket][rank], exact=True)
            counter = load(args, "state", f"r{rank}.random_k.step.step.{bucket}.npy")
            if int(counter) != args.steps:
                failures.append(f"rank {rank}, step counter of bucket {bucket}: "
                                f"{int(counter)}, expected {args.steps}")
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)
    print(f"random-k: {args.steps} steps on {args.ranks} ranks match the model "
          "(means, errors, step counters)")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["gen", "check"])
    parser.add_argument("dir")
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--ratio", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    gen(args) if args.mode == "gen" else check(args)


if __name__ == "__main__":
    main()
