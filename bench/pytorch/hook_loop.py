# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Per-step time of a PyTorch DDP training loop with ddp-opt's compiled
hook against the same loop with PyTorch's hook, side by side in one job.

  mpirun -np 2 python3 bench/pytorch/hook_loop.py [--steps 12] [--layers 6]
         [--width 2048] [--batch 4]

The model is a stack of `layers` width x width Linear layers: with the
defaults 25.2 M parameters, 100.7 MB of f32 gradients, about ResNet-50's
(25.6 M, 102 MB), with little compute per step (batch 4), so that the step
is mostly what the hook does with the gradients. For each pair, the loop
runs `steps` steps per hook, alternating the hooks step by step (so both
see the same machine load), and rank 0 prints the median step time of the
slowest rank for each and their ratio:
  PowerSGD rank 2 (error feedback, start after 2 plain steps, which are
    not timed): ddp_opt.torch.hook with compress="powersgd-rank=2
    start-iter=2" against powerSGD_hook
  fp16: ddp_opt.torch.hook with compress="narrow=fp16" against
    fp16_compress_hook
  none: PyTorch's own allreduce (no hook), for scale
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
from torch.nn.parallel import DistributedDataParallel as DDP

import ddp_opt.torch


def build(layers, width, hook, compress):
    torch.manual_seed(0)
    net = nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])
    model = DDP(net)
    if hook == "ours":
        state = ddp_opt.torch.HookState(model, compress=compress)
        model.register_comm_hook(state, ddp_opt.torch.hook)
    elif hook == "powerSGD_hook":
        state = psgd.PowerSGDState(process_group=None,
                                   matrix_approximation_rank=2,
                                   start_powerSGD_iter=2)
        model.register_comm_hook(state, psgd.powerSGD_hook)
    elif hook == "fp16_compress_hook":
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    return model, torch.optim.SGD(model.parameters(), lr=1e-6)


def step(model, optimizer, x):
    began = time.perf_counter()
    optimizer.zero_grad()
    model(x).square().mean().backward()
    optimizer.step()
    elapsed = torch.tensor([time.perf_counter() - began], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args()
    ddp_opt.torch.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    x = torch.randn(args.batch, args.width)
    params = args.layers * (args.width * args.width + args.width)
    if rank == 0:
        print("%d ranks, %d layers of %dx%d: %.1f M parameters, %.1f MB of "
              "f32 gradients per step; median of %d steps (slowest rank)" % (
                  world, args.layers, args.width, args.width, params / 1e6,
                  params * 4 / 1e6, args.steps), flush=True)
    pairs = [("PowerSGD r2", ("ours", "powersgd-rank=2 start-iter=2"),
              ("powerSGD_hook", None)),
             ("fp16", ("ours", "narrow=fp16"), ("fp16_compress_hook", None))]
    plain, plain_optimizer = build(args.layers, args.width, "none", None)
    for _ in range(2):
        step(plain, plain_optimizer, x)
    plain_times = [step(plain, plain_optimizer, x) for _ in range(args.steps)]
    del plain, plain_optimizer
    for label, (ours_hook, compress), (their_hook, _) in pairs:
        ours = build(args.layers, args.width, ours_hook, compress)
        theirs = build(args.layers, args.width, their_hook, None)
        # Compilation, DDP's bucket rebuild and PowerSGD's 2 plain steps.
        for _ in range(3):
            step(*ours, x)
            step(*theirs, x)
        times = {"ours": [], "theirs": []}
        for _ in range(args.steps):
            times["ours"].append(step(*ours, x))
            times["theirs"].append(step(*theirs, x))
        if rank == 0:
            a = statistics.median(times["ours"]) * 1e3
            b = statistics.median(times["theirs"]) * 1e3
            print("%-12s ddp-opt %8.1f ms   PyTorch %-19s %8.1f ms   %.2fx" %
                  (label, a, their_hook, b, b / a), flush=True)
        del ours, theirs
    if rank == 0:
        print("%-12s PyTorch DDP allreduce (no hook) %8.1f ms" % (
            "none", statistics.median(plain_times) * 1e3), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
