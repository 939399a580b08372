#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Write the digits data set, sharded for data-parallel training, as .npy files.

    prepare_digits.py --out DIR [--ranks 4] [--batch 32] [--hidden 128] [--seed 0]

scikit-learn's 1797 8x8 digits, pixels scaled to [0, 1], split 80/20
(stratified, fixed seed). The training set is shuffled once (fixed seed) and
cut into NB steps of ranks*batch examples; at each step every rank gets its
own disjoint batch of `batch` examples. Step i of every epoch uses batch i,
so a run reads batch {step%NB}. Files (float32, C order):

    DIR/x.r{rank}.b{i}.npy   batch x 64 inputs of rank `rank`, batch i < NB
    DIR/y.r{rank}.b{i}.npy   batch x 10 one-hot labels
    DIR/x_test.npy           test inputs (n x 64)
    DIR/y_test.npy           test labels (n, int64)
    DIR/w1.npy b1.npy w2.npy b2.npy   initial weights (He normal, zero biases)
    DIR/meta.json            ranks, batch, hidden, seed, num_batches (NB), sizes

Prints NB. The training examples that do not fill a whole step (fewer
than ranks*batch) are left out.
"""

import argparse
import json
import os

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import mlp


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--ranks", type=int, default=mlp.RANKS)
    parser.add_argument("--batch", type=int, default=mlp.BATCH, help="examples per rank and step")
    parser.add_argument("--hidden", type=int, default=mlp.HIDDEN, help="hidden layer width")
    parser.add_argument("--seed", type=int, default=mlp.SEED)
    args = parser.parse_args()

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.2, stratify=digits.target, random_state=args.seed)

    per_step = args.ranks * args.batch
    num_batches = len(x_train) // per_step
    if num_batches == 0:
        parser.error(f"{len(x_train)} training examples cannot fill one step of {per_step}")
    order = np.random.default_rng(args.seed).permutation(len(x_train))
    one_hot = np.eye(mlp.CLASSES, dtype=np.float32)[y_train]

    os.makedirs(args.out, exist_ok=True)
    for i in range(num_batches):
        for rank in range(args.ranks):
            start = i * per_step + rank * args.batch
            rows = order[start:start + args.batch]
            x_path, y_path = mlp.batch_paths(args.out, rank, i)
            np.save(x_path, x_train[rows])
            np.save(y_path, one_hot[rows])
    np.save(os.path.join(args.out, "x_test.npy"), x_test)
    np.save(os.path.join(args.out, "y_test.npy"), y_test.astype(np.int64))
    for name, value in mlp.init_weights(args.hidden, args.seed).items():
        np.save(os.path.join(args.out, f"{name}.npy"), value)
    meta = dict(ranks=args.ranks, batch=args.batch, hidden=args.hidden, seed=args.seed,
                num_batches=num_batches, train_examples=len(x_train),
                used_train_examples=num_batches * per_step, test_examples=len(x_test))
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(num_batches)


if __name__ == "__main__":
    main()
