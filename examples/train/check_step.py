#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Runs the generated step (--no-allreduce) with upstream MLIR and compares it with numpy.

    check_step.py --mlir-opt PATH --mlir-runner PATH --lib-dir DIR [--hidden H] [--batch B] [--lr LR]

Generates the step with gen_mlp_step.py --no-allreduce, adds a `@main` that
calls it on fixed inputs (He-initialized weights, random biases, random
inputs in [0, 1), random one-hot labels) and prints its five results, lowers
the module with LOWERING below, runs it with mlir-runner, and compares every
result with mlp.local_step followed by mlp.sgd. Exits 1 on a mismatch
larger than the tolerance (printMemrefF32 prints 6 significant digits).
"""

import argparse
import re
import subprocess
import sys
import tempfile

import numpy as np

import gen_mlp_step
import mlp

# The upstream lowering from tensors to the LLVM dialect (MLIR 22).
LOWERING = [
    "--one-shot-bufferize=bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map",
    "--buffer-deallocation-pipeline",
    "--convert-linalg-to-loops",
    "--convert-scf-to-cf",
    "--convert-to-llvm",
    "--reconcile-unrealized-casts",
]

RTOL = 1e-5
ATOL = 1e-5

NUMBER = re.compile(r"[-+]?(?:nan|inf|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")


def tensor_type(shape):
    return "tensor<" + "".join(f"{d}x" for d in shape) + "f32>"


def dense(array):
    """A dense elements literal with every float32 value exactly."""
    if array.ndim == 0:
        return f"{float(array):.9e}"
    return "[" + ", ".join(dense(a) for a in array) + "]"


def main_function(inputs):
    """`@main`: calls @step on the inputs as constants and prints the results."""
    arg_types = [tensor_type(a.shape) for a in inputs]
    result_types = arg_types[:4] + ["tensor<f32>"]
    lines = ["func.func private @printMemrefF32(memref<*xf32>)", "", "func.func @main() {"]
    for i, (value, type_) in enumerate(zip(inputs, arg_types)):
        lines.append(f"  %in{i} = arith.constant dense<{dense(value)}> : {type_}")
    lines.append(f"  %r:5 = call @step({', '.join(f'%in{i}' for i in range(len(inputs)))})"
                 f" : ({', '.join(arg_types)}) -> ({', '.join(result_types)})")
    for i, type_ in enumerate(result_types):
        memref = type_.replace("tensor", "memref")
        lines += [f"  %buf{i} = bufferization.to_buffer %r#{i} : {type_} to {memref}",
                  f"  %print{i} = memref.cast %buf{i} : {memref} to memref<*xf32>",
                  f"  call @printMemrefF32(%print{i}) : (memref<*xf32>) -> ()"]
    lines += ["  return", "}", ""]
    return "\n".join(lines)


def parse_printed(text):
    """The values printMemrefF32 printed, one flat array per call."""
    chunks = text.split("Unranked Memref")[1:]
    return [np.array(NUMBER.findall(c.split("data =", 1)[1]), dtype=np.float32) for c in chunks]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mlir-opt", required=True)
    parser.add_argument("--mlir-runner", required=True)
    parser.add_argument("--lib-dir", required=True, help="directory of libmlir_*runner_utils.so")
    parser.add_argument("--hidden", type=int, default=mlp.HIDDEN)
    parser.add_argument("--batch", type=int, default=mlp.BATCH)
    parser.add_argument("--lr", type=float, default=mlp.LR)
    args = parser.parse_args()

    rng = np.random.default_rng(1)
    params = mlp.init_weights(args.hidden, mlp.SEED)
    params["b1"] = (0.1 * rng.standard_normal(args.hidden)).astype(np.float32)
    params["b2"] = (0.1 * rng.standard_normal(mlp.CLASSES)).astype(np.float32)
    x = rng.random((args.batch, mlp.INPUTS), dtype=np.float32)
    y = np.eye(mlp.CLASSES, dtype=np.float32)[rng.integers(0, mlp.CLASSES, args.batch)]
    inputs = [params[k] for k in mlp.PARAMS] + [x, y]

    loss, grads = mlp.local_step(params, x, y)
    updated = mlp.sgd(params, grads, args.lr)
    expected = [updated[k] for k in mlp.PARAMS] + [np.array(loss)]

    module = gen_mlp_step.generate(args.hidden, args.batch, args.lr, allreduce=False,
                                   command_line="--no-allreduce (check_step.py)")
    with tempfile.TemporaryDirectory() as tmp:
        source, lowered = f"{tmp}/check.mlir", f"{tmp}/check.llvm.mlir"
        with open(source, "w") as f:
            f.write(module + "\n" + main_function(inputs))
        subprocess.run([args.mlir_opt, source, *LOWERING, "-o", lowered], check=True)
        run = subprocess.run(
            [args.mlir_runner, lowered, "-e", "main", "-entry-point-result=void",
             f"-shared-libs={args.lib_dir}/libmlir_runner_utils.so,"
             f"{args.lib_dir}/libmlir_c_runner_utils.so"],
            check=True, capture_output=True, text=True)

    printed = parse_printed(run.stdout)
    if len(printed) != len(expected):
        sys.exit(f"check_step: expected {len(expected)} printed results, got {len(printed)}")
    failed = False
    for name, got, want in zip(list(mlp.PARAMS) + ["loss"], printed, expected):
        want = want.ravel()
        if got.shape != want.shape:
            print(f"{name}: {got.size} values printed, {want.size} expected")
            failed = True
            continue
        error = np.abs(got - want)
        ok = bool(np.all(error <= ATOL + RTOL * np.abs(want)))
        print(f"{name:5s} {'ok  ' if ok else 'FAIL'} max abs error {error.max():.2e} "
              f"(max |value| {np.abs(want).max():.3g})")
        failed |= not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
