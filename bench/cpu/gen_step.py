#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Writes a gradient-sync step for ResNet-50's parameter shapes and one set of
random gradients per rank, for bench/cpu/compiled_step.sh.

    gen_step.py DIR --world W [--model resnet50|gpt2-medium] [--no-data]

DIR/step.mlir: func.func @step with one argument per parameter gradient and
one `ddp.allreduce mean` per gradient (as DDP without hooks would do);
DIR/g.r{rank}.a{i}.npy: the gradients (float32, normal, fixed seed).
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_hooks import gpt2_medium_shapes, resnet50_shapes  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dir")
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--model", choices=["resnet50", "gpt2-medium"],
                        default="resnet50")
    parser.add_argument("--no-data", action="store_true",
                        help="write step.mlir only, no gradients")
    args = parser.parse_args()
    shapes = resnet50_shapes() if args.model == "resnet50" else gpt2_medium_shapes()
    os.makedirs(args.dir, exist_ok=True)
    types = ["tensor<%sxf32>" % "x".join(map(str, s)) for s in shapes]
    lines = ["func.func @step(" +
             ", ".join("%%g%d: %s" % (i, t) for i, t in enumerate(types)) +
             ") -> (" + ", ".join(types) + ") {"]
    for i, t in enumerate(types):
        lines.append('  %%r%d = ddp.allreduce mean %%g%d : %s loc("p%d")' % (i, i, t, i))
    lines.append("  return " + ", ".join("%%r%d" % i for i in range(len(types))) +
                 " : " + ", ".join(types))
    lines.append("}")
    with open(os.path.join(args.dir, "step.mlir"), "w") as f:
        f.write("\n".join(lines) + "\n")
    rng = np.random.default_rng(0)
    for rank in range(0 if args.no_data else args.world):
        for i, shape in enumerate(shapes):
            np.save(os.path.join(args.dir, "g.r%d.a%d.npy" % (rank, i)),
                    rng.standard_normal(shape, dtype=np.float32))
    print(len(shapes))


if __name__ == "__main__":
    main()
