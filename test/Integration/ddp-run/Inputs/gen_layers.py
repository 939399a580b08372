# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Write a step of N layers, large enough that split-functions cuts it.

    gen_layers.py DIR [--layers N] [--ranks R]

DIR/step.mlir: @step(w0..wN-1, x) -> (w0'..wN-1'): a chain through the
layers (d = d * w + w), each layer's gradient g_k = d_k * x, one
`ddp.allreduce mean` per gradient after the whole chain, then SGD. The
weights are 16x8 (PowerSGD compresses them at rank 1), x differs per rank.
DIR/in.r{rank}.npz holds the arrays, named after the arguments.
"""

import argparse
import os

import numpy as np


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--layers", type=int, default=60)
    parser.add_argument("--ranks", type=int, default=2)
    args = parser.parse_args()
    n, t = args.layers, "tensor<16x8xf32>"
    os.makedirs(args.dir, exist_ok=True)
    lines = []
    params = ", ".join(f"%w{k}: {t} loc(\"w{k}\")" for k in range(n))
    results = ", ".join([t] * n)
    lines.append(f"func.func @step({params}, %x: {t} loc(\"x\")) -> ({results}) {{")
    lines.append(f"  %lr = arith.constant dense<0.01> : {t}")
    d = "%x"
    for k in reversed(range(n)):
        lines.append(f"  %p{k} = arith.mulf {d}, %w{k} : {t}")
        lines.append(f"  %d{k} = arith.addf %p{k}, %w{k} : {t}")
        lines.append(f"  %g{k} = arith.mulf %d{k}, %x : {t} loc(\"w{k}\")")
        d = f"%d{k}"
    for k in reversed(range(n)):
        lines.append(f"  %m{k} = ddp.allreduce mean %g{k} : {t}")
    for k in range(n):
        lines.append(f"  %s{k} = arith.mulf %lr, %m{k} : {t}")
        lines.append(f"  %n{k} = arith.subf %w{k}, %s{k} : {t}")
    news = ", ".join(f"%n{k}" for k in range(n))
    lines.append(f"  return {news} : {results}")
    lines.append("}")
    with open(os.path.join(args.dir, "step.mlir"), "w") as f:
        f.write("\n".join(lines) + "\n")
    rng = np.random.default_rng(0)
    weights = {f"w{k}": (0.1 * rng.standard_normal((16, 8))).astype(np.float32)
               for k in range(n)}
    for r in range(args.ranks):
        arrays = dict(weights)
        arrays["x"] = rng.standard_normal((16, 8)).astype(np.float32)
        np.savez(os.path.join(args.dir, f"in.r{r}.npz"), **arrays)


if __name__ == "__main__":
    main()
