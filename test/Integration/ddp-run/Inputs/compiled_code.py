"""Inputs and checks for compiled-code.test.

    compiled_code.py inputs DIR
        Writes the digits MLP step's inputs (64-32-10, a batch of 8 per
        rank): DIR/w1.npy, b1, w2, b2 and DIR/x.r{rank}.npy, y.r{rank} for
        two ranks.

    compiled_code.py layouts DIR
        Writes matmul_layouts.mlir's inputs DIR/{a,b,e,f}.npy.

    compiled_code.py check-layouts DIR OUT
        Checks its results OUT/o0.npy, o1.npy against numpy.

    compiled_code.py large DIR
        Writes large_step.mlir's gradient for two ranks: DIR/w.r{rank}.npy.

    compiled_code.py same A B
        A and B are --final-output files (r{rank}.npy) of two runs of
        large_step.mlir on two ranks: bitwise equal, rank by rank and run by
        run.

    compiled_code.py compare BLAS LOOPS
        BLAS and LOOPS are --final-output directories (r{rank}.o{result}.npy)
        of the same run with the matmuls in BLAS and in loops: the weights
        bitwise equal on the BLAS run's two ranks, and the two runs equal to
        f32 rounding (the sums over K run in another order).
"""

import os
import sys

import numpy as np


def inputs(out):
    rng = np.random.default_rng(3)
    f32 = np.float32
    np.save(f"{out}/w1.npy", (rng.standard_normal((64, 32)) * 0.2).astype(f32))
    np.save(f"{out}/b1.npy", np.zeros(32, f32))
    np.save(f"{out}/w2.npy", (rng.standard_normal((32, 10)) * 0.3).astype(f32))
    np.save(f"{out}/b2.npy", np.zeros(10, f32))
    for r in range(2):
        np.save(f"{out}/x.r{r}.npy", rng.random((8, 64)).astype(f32))
        y = np.zeros((8, 10), f32)
        y[np.arange(8), rng.integers(0, 10, 8)] = 1
        np.save(f"{out}/y.r{r}.npy", y)


def compare(blas, loops):
    worst = 0.0
    for result in range(5):
        a = [np.load(f"{blas}/r{r}.o{result}.npy") for r in range(2)]
        b = [np.load(f"{loops}/r{r}.o{result}.npy") for r in range(2)]
        # The weights (0-3) are the same on every rank; the loss (4) is
        # each rank's own.
        if result < 4 and a[0].tobytes() != a[1].tobytes():
            sys.exit(f"result {result}: the ranks differ")
        for r in range(2):
            scale = max(float(np.abs(b[r]).max()), 1e-30)
            worst = max(worst, float(np.abs(a[r] - b[r]).max()) / scale)
    if not worst <= 1e-5:
        sys.exit(f"BLAS and loops differ by {worst:.1e} (relative)")
    print("ranks bitwise equal; BLAS and loops agree to rounding")


def large(out):
    rng = np.random.default_rng(7)
    for r in range(2):
        np.save(f"{out}/w.r{r}.npy",
                rng.standard_normal((512, 1024)).astype(np.float32))


def same(a, b):
    arrays = [np.load(f"{run}/r{r}.npy") for run in (a, b) for r in range(2)]
    if any(x.tobytes() != arrays[0].tobytes() for x in arrays):
        sys.exit(f"{a} and {b}: the results differ")
    print("the same bits on every rank, whatever the threads")


def layouts(out):
    rng = np.random.default_rng(5)
    f32 = np.float32
    np.save(f"{out}/a.npy", rng.standard_normal((3, 4, 8)).astype(f32))
    np.save(f"{out}/b.npy", rng.standard_normal((3, 8, 5)).astype(f32))
    np.save(f"{out}/e.npy", np.zeros((4, 0), f32))
    np.save(f"{out}/f.npy", np.zeros((0, 5), f32))


def check_layouts(data, out):
    a, b = np.load(f"{data}/a.npy"), np.load(f"{data}/b.npy")
    want = np.einsum("bmk,bkn->mbn", a.astype(np.float64), b.astype(np.float64))
    got = np.load(f"{out}/o0.npy")
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-5):
        sys.exit(f"the interleaved batch differs by {np.abs(got - want).max():.1e}")
    ones = np.load(f"{out}/o1.npy")
    if ones.shape != (4, 5) or not (ones == 1).all():
        sys.exit("C += A B over K = 0 changed C")
    print("interleaved batch and K = 0: as numpy")


if __name__ == "__main__":
    if sys.argv[1] == "inputs":
        inputs(sys.argv[2])
    elif sys.argv[1] == "layouts":
        layouts(sys.argv[2])
    elif sys.argv[1] == "check-layouts":
        check_layouts(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "large":
        large(sys.argv[2])
    elif sys.argv[1] == "same":
        same(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
