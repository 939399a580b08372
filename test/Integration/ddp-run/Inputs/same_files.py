# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Compare two directories of .npy outputs bitwise.

    same_files.py DIR_A DIR_B

Every .npy file in DIR_A must exist in DIR_B with the same dtype, shape and
bytes (and DIR_B must hold no other .npy file). Prints one line,
"same N files" or the first differences, and exits 1 on a difference.
"""

import os
import sys

import numpy as np


def main():
    a, b = sys.argv[1], sys.argv[2]
    for d in (a, b):
        if not os.path.isdir(d):
            print(f"no directory {d}")
            return 1
    names_a = sorted(f for f in os.listdir(a) if f.endswith(".npy"))
    names_b = sorted(f for f in os.listdir(b) if f.endswith(".npy"))
    if not names_a:
        print(f"no .npy files in {a}")
        return 1
    if names_a != names_b:
        print(f"different files: only in {a}: {sorted(set(names_a) - set(names_b))[:5]}, "
              f"only in {b}: {sorted(set(names_b) - set(names_a))[:5]}")
        return 1
    differences = []
    for name in names_a:
        x, y = np.load(os.path.join(a, name)), np.load(os.path.join(b, name))
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            diff = (float(np.abs(x.astype(np.float64) - y).max())
                    if x.shape == y.shape else "shape")
            differences.append(f"{name} (max difference {diff})")
    if differences:
        print(f"{len(differences)} of {len(names_a)} files differ: " + ", ".join(differences[:5]))
        return 1
    print(f"same {len(names_a)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
