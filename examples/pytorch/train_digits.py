# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""A PyTorch DDP training script whose gradient averaging ddp-opt compiles.

    mpirun -np 2 python3 examples/pytorch/train_digits.py --hook ours
    mpirun -np 2 python3 examples/pytorch/train_digits.py --hook torch

A small CNN learns scikit-learn's 8x8 digits on every rank's share of the
training set (gloo); the gradients are averaged by PowerSGD rank 2 with
error feedback after 10 plain steps, either by PyTorch's powerSGD_hook
(--hook torch) or by the step ddp-opt compiled for each of DDP's buckets
(--hook ours: the two lines marked below), or exactly (--hook none).
Rank 0 prints the loss per epoch, the test accuracy and the median time of
a training step. Needs the package on the path (PYTHONPATH=build/python,
or an install) and scikit-learn.
"""
import argparse
import statistics
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
from torch.nn.parallel import DistributedDataParallel as DDP

import ddp_opt.torch


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hook", choices=["ours", "torch", "none"],
                        default="ours")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rank", type=int, default=2)
    parser.add_argument("--start-iter", type=int, default=10)
    args = parser.parse_args()

    # PyTorch's group with the ranks mpirun gave (the runtime's).
    ddp_opt.torch.init_process_group("gloo")
    rank = torch.distributed.get_rank()
    world = torch.distributed.get_world_size()

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    x_train, x_test, y_train, y_test = train_test_split(
        images, digits.target, test_size=360, random_state=0)
    x_train, y_train = x_train[rank::world], y_train[rank::world]

    torch.manual_seed(0)
    model = DDP(SmallCNN())
    if args.hook == "ours":
        # The two lines that switch DDP to ddp-opt's compiled PowerSGD:
        state = ddp_opt.torch.HookState(
            model, compress="powersgd-rank=%d start-iter=%d" %
            (args.rank, args.start_iter))
        model.register_comm_hook(state, ddp_opt.torch.hook)
    elif args.hook == "torch":
        state = psgd.PowerSGDState(
            process_group=None, matrix_approximation_rank=args.rank,
            start_powerSGD_iter=args.start_iter)
        model.register_comm_hook(state, psgd.powerSGD_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    generator = torch.Generator().manual_seed(rank)
    times = []
    for epoch in range(args.epochs):
        order = torch.randperm(len(x_train), generator=generator)
        losses = []
        for i in range(0, len(order) - args.batch + 1, args.batch):
            batch = order[i:i + args.batch]
            began = time.perf_counter()
            loss = F.cross_entropy(model(torch.from_numpy(x_train[batch])),
                                   torch.from_numpy(y_train[batch]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            times.append(time.perf_counter() - began)
            losses.append(loss.item())
        if rank == 0:
            print("epoch %d: loss %.4f" % (epoch, np.mean(losses)), flush=True)

    with torch.no_grad():
        predicted = model.module(torch.from_numpy(x_test)).argmax(1).numpy()
    accuracy = 100.0 * float(np.mean(predicted == y_test))
    if rank == 0:
        print("hook %s: test accuracy %.2f%%, median step %.2f ms (%d ranks)"
              % (args.hook, accuracy, 1e3 * statistics.median(times), world),
              flush=True)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
