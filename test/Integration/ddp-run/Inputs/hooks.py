# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Data and checks for hooks.test: user-written hooks run by ddp-run.

  hooks.py gen DIR --ranks W --steps S      step.mlir, hooks.mlir, inputs
  hooks.py sign-ef DIR OUT --ranks W --steps S   examples/hooks/sign_ef_hook.mlir
  hooks.py same A B --ranks W --steps S     bitwise-equal outputs
  hooks.py bf16 DIR OUT --ranks W --steps S   a bf16 hook's mean: within bf16
                                               rounding, and not f32's
"""
import argparse
import os

import numpy as np

SHAPES = [(8, 12), (12,), (5, 3)]

STEP = """\
func.func @step(%w: tensor<8x12xf32> loc("fc.weight"), %b: tensor<12xf32> loc("fc.bias"),
                %v: tensor<5x3xf32> loc("head.weight"))
    -> (tensor<8x12xf32>, tensor<12xf32>, tensor<5x3xf32>) {
  %r:3 = ddp.allreduce mean %w, %b, %v : tensor<8x12xf32>, tensor<12xf32>, tensor<5x3xf32>
  return %r#0, %r#1, %r#2 : tensor<8x12xf32>, tensor<12xf32>, tensor<5x3xf32>
}
"""

# PyTorch's allreduce_hook, and the same under bf16_compress_wrapper: the
# hook's type is bf16, so ddp-apply-hook casts the bucket down and back.
HOOKS = """\
func.func private @allreduce_hook(%g: tensor<?xf32>) -> tensor<?xf32> {
  %r = ddp.allreduce mean %g : tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func private @allreduce_hook_bf16(%g: tensor<?xbf16>) -> tensor<?xbf16> {
  %r = ddp.allreduce mean %g : tensor<?xbf16>
  return %r : tensor<?xbf16>
}
"""


def load(pattern, rank, step):
    return [np.load(pattern.format(rank=rank, step=step, result=i)) for i in range(len(SHAPES))]


def gen(args):
    os.makedirs(args.dir, exist_ok=True)
    with open(os.path.join(args.dir, "step.mlir"), "w") as f:
        f.write(STEP)
    with open(os.path.join(args.dir, "hooks.mlir"), "w") as f:
        f.write(HOOKS)
    rng = np.random.default_rng(7)
    for r in range(args.ranks):
        for s in range(args.steps):
            for i, shape in enumerate(SHAPES):
                value = rng.standard_normal(shape).astype(np.float32)
                np.save(os.path.join(args.dir, f"in.r{r}.s{s}.a{i}.npy"), value)


def inputs(args, r, s):
    return load(os.path.join(args.dir, "in.r{rank}.s{step}.a{result}.npy"), r, s)


def flat(values):
    return np.concatenate([v.ravel() for v in values])


def sign_ef(args):
    """The hook's arithmetic in numpy, step after step, error carried."""
    f32 = np.float32
    errors = [None] * args.ranks
    worst = 0.0
    for s in range(args.steps):
        total = None
        for r in range(args.ranks):
            m = flat(inputs(args, r, s))
            if errors[r] is not None:
                m = m + errors[r]
            scale = np.cumsum(np.abs(m), dtype=f32)[-1] / f32(m.size)
            signs = np.where(m >= 0, f32(1), f32(-1))
            errors[r] = m - signs * scale
            total = signs * scale if total is None else total + signs * scale
        want = total / f32(args.ranks)
        for r in range(args.ranks):
            got = flat(load(args.out, r, s))
            worst = max(worst, float(np.abs(got - want).max() / np.abs(want).max()))
    print(f"sign-ef: worst |ddp-run - numpy| / max = {worst:.1e}")
    assert worst < 1e-6, worst
    print("OK: sign-ef")


def same(args):
    for r in range(args.ranks):
        for s in range(args.steps):
            for a, b in zip(load(args.a, r, s), load(args.b, r, s)):
                assert np.array_equal(a, b), (r, s)
    print("OK: bitwise equal")


def bf16(args):
    worst_bf16 = 0.0
    differs = False
    for s in range(args.steps):
        exact = sum(flat(inputs(args, r, s)).astype(np.float64) for r in range(args.ranks))
        exact /= args.ranks
        for r in range(args.ranks):
            got = flat(load(args.out, r, s)).astype(np.float64)
            # Rounded to bf16 (8 significant bits) on the way in, at each
            # combine and on the way out: a few bf16 ulps of the inputs.
            bound = 4 * 2.0 ** -8 * max(np.abs(flat(inputs(args, q, s))).max()
                                          for q in range(args.ranks))
            worst_bf16 = max(worst_bf16, float(np.abs(got - exact).max() / bound))
            differs |= not np.array_equal(got.astype(np.float32), exact.astype(np.float32))
            # Every value went through bf16: its low 16 bits are zero.
            bits = got.astype(np.float32).view(np.uint32)
            assert np.all((bits & 0xFFFF) == 0), "a value did not travel in bf16"
    print(f"bf16 hook: worst error / bound = {worst_bf16:.2f}")
    assert worst_bf16 <= 1.0 and differs
    print("OK: bf16 hook")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["gen", "sign-ef", "same", "bf16"])
    parser.add_argument("dir", nargs="?")
    parser.add_argument("out", nargs="?")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    if args.command == "same":
        args.a, args.b = args.dir, args.out
    {"gen": gen, "sign-ef": sign_ef, "same": same, "bf16": bf16}[args.command](args)


if __name__ == "__main__":
    main()
