"""Repackages steps.py's gradients the ways users hold them.

    archives.py DIR OUT --ranks W --steps S
        OUT/r{rank}.s{step}.npz: the gradients of one rank and step in one
        archive keyed by name (g0, g1, g2), as np.savez(**state_dict) writes
        it (rank 1: np.savez_compressed; rank 0 also holds an array "extra"
        that no argument takes), and OUT/{name}.r{rank}.s{step}.npy.
"""

import argparse
import os

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("out")
p.add_argument("--ranks", type=int, required=True)
p.add_argument("--steps", type=int, required=True)
args = p.parse_args()
os.makedirs(args.out, exist_ok=True)
for rank in range(args.ranks):
    for step in range(args.steps):
        grads = {f"g{i}": np.load(os.path.join(args.dir, f"in.r{rank}.s{step}.a{i}.npy"))
                 for i in range(3)}
        for name, g in grads.items():
            np.save(os.path.join(args.out, f"{name}.r{rank}.s{step}.npy"), g)
        path = os.path.join(args.out, f"r{rank}.s{step}.npz")
        if rank == 1:
            np.savez_compressed(path, **grads)
        else:
            np.savez(path, extra=np.zeros(3, np.float32), **grads)
