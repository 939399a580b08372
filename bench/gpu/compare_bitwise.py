#!/usr/bin/env python3
# Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Whether every .npy of REF has a bit-for-bit equal file in GOT.

    compare_bitwise.py REF GOT
"""
import glob
import os
import sys

import numpy as np


def main():
    ref, got = sys.argv[1], sys.argv[2]
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ref, '*.npy')))
    bad = 0
    for name in names:
        path = os.path.join(got, name)
        if not os.path.exists(path):
            bad += 1
            print('MISSING %s' % path)
            continue
        a, b = np.load(os.path.join(ref, name)), np.load(path)
        if a.shape != b.shape or a.dtype != b.dtype or a.tobytes() != b.tobytes():
            bad += 1
            diff = (np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))
                    if a.shape == b.shape else 'shapes %s %s' % (a.shape, b.shape))
            print('MISMATCH %s: max |diff| %s' % (name, diff))
    print('%s: %d of %d files bitwise equal to %s' % (got, len(names) - bad, len(names), ref))
    return 1 if bad or not names else 0


if __name__ == '__main__':
    sys.exit(main())
