# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Per-step time of a PyTorch DDP training loop with ddp-opt's compiled
hook against the same loop with PyTorch's hook, side by side in one job.

  mpirun -np 2 python3 bench/pytorch/hook_loop.py [--model resnet50|linear]
         [--steps 12] [--sides ours,theirs,alone]

The model has ResNet-50's parameters (torchvision's 161 tensors, 25.6 M
parameters, 102 MB of f32 gradients; --model linear: 6 Linear layers of
2048x2048, 100.7 MB) and a cheap forward, sum(w . x_w) with a fixed random
x_w per parameter and rank, so that backward yields a ResNet-50-sized
gradient at little compute and the step is mostly what the hook does with
it. DDP keeps the gradients in its buckets (gradient_as_bucket_view), on
both sides. Each step: zero_grad, forward, backward (DDP runs the hook on
every bucket), SGD step; timed on each rank, the slowest rank's time kept. Per
pair, the two loops alternate step by step (so both see the same machine
load), after 3 steps not timed (compilation, DDP's bucket rebuild,
PowerSGD's 2 plain steps), and rank 0 prints the median of each and
their ratio:
  PowerSGD rank 2 (error feedback, warm start, start after 2 plain steps):
    ddp_opt.torch.hook with compress="powersgd-rank=2 start-iter=2"
    against powerSGD_hook (its buckets one at a time: see
    one_bucket_at_a_time)
  fp16: ddp_opt.torch.hook with compress="narrow=fp16" against
    fp16_compress_hook
  mean: ddp_opt.torch.hook without compression (each bucket's exact mean
    in one allreduce) against DDP without a hook (its own allreduce)
Besides the whole step it prints the hooks' span: from the first bucket's
hook call to the last bucket's future completing (autograd's work between
buckets included, on both sides).
The loop alone, timed in the same alternation: the same model and step
with a hook that hands DDP its bucket as it is (nothing averaged, nothing
sent). No hook's loop can be faster, so PyTorch's step over it is the most
any hook can gain in this loop on this machine ("at most").
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
from torch.nn.parallel import DistributedDataParallel as DDP

import ddp_opt.torch

# torchvision's ResNet-50 parameter shapes, as bench/cpu's PyTorch side has
# them.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "cpu"))
from torch_hooks import resnet50_shapes  # noqa: E402


# The runtime's compute threads per rank (None: ddp-run's default).
THREADS = None


def one_bucket_at_a_time(hook):
    """powerSGD_hook issues its allreduces from future callbacks: with
    several buckets in flight, gloo's ranks can issue them in different
    orders and fail ("op.preamble.length <= op.nbytes") or hang (PyTorch
    1.13, CPU). Each bucket's hook starts once the previous one is done
    (as bench/cpu/torch_hooks.py does); ours is synchronous per bucket."""
    previous = []

    def wrapper(state, bucket):
        if previous and not previous[-1].done():
            previous[-1].wait()
        future = hook(state, bucket)
        previous[:] = [future]
        if bucket.is_last():
            previous.clear()
        return future
    return wrapper


class Injected(nn.Module):
    """Parameters of the given shapes; the loss is sum(w . x_w), so the
    gradient of w is x_w (fixed, random per rank)."""

    def __init__(self, shapes, rank):
        super().__init__()
        generator = torch.Generator().manual_seed(1234 + rank)
        self.weights = nn.ParameterList(
            [nn.Parameter(torch.zeros(s)) for s in shapes])
        self.inputs = [torch.randn(s, generator=generator) for s in shapes]

    def forward(self):
        return sum(torch.dot(w.view(-1), x.view(-1))
                   for w, x in zip(self.weights, self.inputs))


def model_shapes(name):
    if name == "resnet50":
        return resnet50_shapes()
    return [shape for _ in range(6) for shape in ([2048, 2048], [2048])]


def returned_as_is(state, bucket):
    """A hook that averages nothing: the loop's own work."""
    future = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


def spanned(hook, spans):
    """`hook`, recording (start, end) of each bucket's hook: from its call
    to its future's completion."""
    def wrapper(state, bucket):
        start = time.perf_counter()
        future = hook(state, bucket)

        def done(fut):
            spans.append((start, time.perf_counter()))
            return fut.value()
        return future.then(done)
    return wrapper


def build(shapes, hook, compress):
    rank = dist.get_rank()
    # DDP's own fast path for both sides: gradients live in the buckets
    # (no copy into them and back).
    model = DDP(Injected(shapes, rank), gradient_as_bucket_view=True)
    spans = []
    if hook == "ours":
        state = ddp_opt.torch.HookState(model, compress=compress,
                                        threads=THREADS)
        model.register_comm_hook(state, spanned(ddp_opt.torch.hook, spans))
    elif hook == "powerSGD_hook":
        state = psgd.PowerSGDState(process_group=None,
                                   matrix_approximation_rank=2,
                                   start_powerSGD_iter=2)
        model.register_comm_hook(state, spanned(
            one_bucket_at_a_time(psgd.powerSGD_hook), spans))
    elif hook == "alone":
        model.register_comm_hook(None, spanned(returned_as_is, spans))
    elif hook == "fp16_compress_hook":
        model.register_comm_hook(None, spanned(
            default_hooks.fp16_compress_hook, spans))
    return model, torch.optim.SGD(model.parameters(), lr=1e-6), spans


def step(model, optimizer, spans):
    """(the step's time, its hooks' span), each the slowest rank's."""
    spans.clear()
    began = time.perf_counter()
    optimizer.zero_grad()
    model().backward()
    optimizer.step()
    ended = time.perf_counter()
    hooks = (max(e for _, e in spans) - min(s for s, _ in spans)
             if spans else 0.0)
    elapsed = torch.tensor([ended - began, hooks], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return tuple(float(v) for v in elapsed)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--model", choices=["resnet50", "linear"],
                        default="resnet50")
    parser.add_argument("--sides", default="ours,theirs,alone",
                        help="which loops of each row run: ours, PyTorch's "
                        "(theirs), the loop alone (a hook that averages "
                        "nothing)")
    args = parser.parse_args()
    sides = args.sides.split(",")
    ddp_opt.torch.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    shapes = model_shapes(args.model)
    params = sum(int(torch.Size(shape).numel()) for shape in shapes)
    if rank == 0:
        print("%d ranks, %s's %d parameter tensors: %.1f M parameters, %.1f "
              "MB of f32 gradients per step; median of %d steps (slowest "
              "rank)" % (world, args.model, len(shapes), params / 1e6,
                         params * 4 / 1e6, args.steps), flush=True)
    pairs = [("PowerSGD r2", ("ours", "powersgd-rank=2 start-iter=2"),
              ("powerSGD_hook", None)),
             ("fp16", ("ours", "narrow=fp16"), ("fp16_compress_hook", None)),
             ("mean", ("ours", None), ("none", None))]
    rows = []
    for label, (ours_hook, compress), (their_hook, _) in pairs:
        models = {"ours": build(shapes, ours_hook, compress)
                  if "ours" in sides else None,
                  "theirs": build(shapes, their_hook, None)
                  if "theirs" in sides else None,
                  "alone": build(shapes, "alone", None)
                  if "alone" in sides else None}
        times = {side: [(float("nan"), float("nan"))]
                 for side in ("ours", "theirs", "alone")}
        for side in sides:
            times[side] = []
        # Compilation, DDP's bucket rebuild and PowerSGD's 2 plain steps.
        for _ in range(3):
            for side in sides:
                step(*models[side])
        for _ in range(args.steps):
            for side in sides:
                times[side].append(step(*models[side]))
        median = {side: [statistics.median(t[i] for t in times[side]) * 1e3
                         for i in (0, 1)] for side in times}
        rows.append((label, their_hook, median))
        del models
    if rank == 0:
        print("%-12s %-22s %10s %10s %8s %10s %8s %12s %12s %8s" % (
            "", "PyTorch's hook", "step ours", "PyTorch", "ratio", "alone",
            "at most", "hooks ours", "PyTorch", "ratio"))
        for label, their_hook, m in rows:
            hooks = ("%9.1f ms %9.1f ms %7.2fx" % (
                m["ours"][1], m["theirs"][1], m["theirs"][1] / m["ours"][1])
                if their_hook != "none" else "%9.1f ms %12s %8s" % (
                    m["ours"][1], "-", "-"))
            print("%-12s %-22s %7.1f ms %7.1f ms %7.2fx %7.1f ms %7.2fx %s" % (
                label, their_hook if their_hook != "none" else "(no hook)",
                m["ours"][0], m["theirs"][0], m["theirs"][0] / m["ours"][0],
                m["alone"][0], m["theirs"][0] / m["alone"][0], hooks),
                flush=True)
        print("alone: the loop with a hook that averages nothing; at most: "
              "PyTorch's step over it, the most any hook gains here",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
