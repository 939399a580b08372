#!/usr/bin/env python3
# Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Inputs and the comparison of split-reductions.test.

    split_reductions.py gen DIR --ranks W --steps S
        DIR/in.r{rank}.s{step}.a{0,1}.npy: 3 x 2000 and 4000 f32 gradients,
        each rank's of another scale, with a few signed zeros and repeated
        extremes (a minimum or maximum that several chunks share)
    split_reductions.py same A B --ranks W --steps S --results N
        every result file of A bitwise equal to B's
"""
import argparse
import os

import numpy as np


def gen(args):
    os.makedirs(args.dir, exist_ok=True)
    for r in range(args.ranks):
        for s in range(args.steps):
            rng = np.random.default_rng(100 * r + s)
            for i, shape in enumerate([(3, 2000), (4000,)]):
                g = (rng.standard_normal(shape) * (1 + r + s)).astype(np.float32)
                flat = g.reshape(-1)
                flat[rng.integers(0, flat.size, 8)] = -0.0
                flat[rng.integers(0, flat.size, 3)] = flat.max()
                flat[rng.integers(0, flat.size, 3)] = flat.min()
                np.save(os.path.join(args.dir, "in.r%d.s%d.a%d.npy" % (r, s, i)), g)


def same(args):
    count = 0
    for r in range(args.ranks):
        for s in range(args.steps):
            for i in range(args.results):
                a = np.load(args.a.format(rank=r, step=s, result=i))
                b = np.load(args.b.format(rank=r, step=s, result=i))
                assert a.dtype == b.dtype and a.shape == b.shape, (r, s, i)
                assert a.tobytes() == b.tobytes(), (r, s, i, np.abs(a - b).max())
                count += 1
    print("OK: bitwise equal (%d files)" % count)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["gen", "same"])
    parser.add_argument("a")
    parser.add_argument("b", nargs="?")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--results", type=int, default=2)
    args = parser.parse_args()
    if args.command == "gen":
        args.dir = args.a
        gen(args)
    else:
        same(args)


if __name__ == "__main__":
    main()
