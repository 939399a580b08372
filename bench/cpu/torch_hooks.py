#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Times PyTorch's DDP communication hooks on a model's parameter shapes.

Debian's PyTorch 1.13 (python3-torch), gloo, CPU, one thread per rank. The
gradients are injected: the module's forward is sum(p * G), so each
parameter's gradient is a fixed random G. Only the hooks are timed: per step,
from the first bucket's hook call to the last bucket's future completing.

  /usr/bin/python3 bench/cpu/torch_hooks.py --model resnet50 --world 2
  /usr/bin/python3 bench/cpu/torch_hooks.py --shapes-from examples/resnet18_grads.mlir \
      --kinds allreduce,fp16,quant-per-tensor

--shapes-from takes the shapes of a module's f32 tensor arguments (what
ddp-run feeds on our side). Kinds: allreduce (allreduce_hook), fp16
(fp16_compress_hook), powersgd (powerSGD_hook, rank --rank, start 2, error
feedback, warm start), quant-per-tensor (quantization_pertensor_hook, run on
CPU and gloo unchanged through test/Integration/torch/hooks_on_cpu.py).

Across hosts (bench/net/hosts.sh), one process per host:
  GLOO_SOCKET_IFNAME=eth0 torch_hooks.py --process-rank R --master-addr 10.251.0.1 ...
"""
import argparse
import os
import re
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
from torch.nn.parallel import DistributedDataParallel as DDP


def resnet50_shapes():
    """torchvision's ResNet-50 parameters, in model.parameters() order."""
    shapes = [[64, 3, 7, 7], [64], [64]]
    inp = 64
    for width, blocks in zip([64, 128, 256, 512], [3, 4, 6, 3]):
        out = width * 4
        for block in range(blocks):
            shapes += [[width, inp, 1, 1], [width], [width],
                       [width, width, 3, 3], [width], [width],
                       [out, width, 1, 1], [out], [out]]
            if block == 0:
                shapes += [[out, inp, 1, 1], [out], [out]]
            inp = out
    return shapes + [[1000, 2048], [1000]]


def module_shapes(path):
    """The shapes of a module's f32 tensor arguments, in order."""
    text = open(path).read()
    return [[int(d) for d in shape.split("x")] for shape in
            re.findall(r'tensor<([0-9x]+)xf32> loc\("[^"]+"\)', text)]


def quantization_per_tensor_hook():
    """PyTorch's quantization_pertensor_hook, unchanged, on CPU and gloo."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "..", "test", "Integration", "torch"))
    from hooks_on_cpu import run_quantization_hook
    from torch.distributed.algorithms.ddp_comm_hooks import quantization_hooks

    def hook(state, bucket):
        return run_quantization_hook(
            quantization_hooks.quantization_pertensor_hook, state, bucket)
    return hook


def gpt2_medium_shapes():
    d, vocab = 1024, 50257
    shapes = [[vocab, d], [1024, d]]
    for _ in range(24):
        shapes += [[d], [d], [d, 3 * d], [3 * d], [d, d], [d], [d], [d],
                   [d, 4 * d], [4 * d], [4 * d, d], [d]]
    return shapes + [[d], [d]]


class Injected(torch.nn.Module):
    def __init__(self, shapes, rank):
        super().__init__()
        generator = torch.Generator().manual_seed(1234 + rank)
        self.weights = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.zeros(s)) for s in shapes])
        self.grads = [torch.randn(s, generator=generator) for s in shapes]

    def forward(self, *unused):
        # DDP in PyTorch 2.x indexes the forward's inputs: callers pass a
        # dummy tensor, which the loss ignores.
        return sum((w * g).sum() for w, g in zip(self.weights, self.grads))


def timed(hook, spans):
    """Records (start, end) of each bucket's hook. Buckets run one after the
    other: powerSGD_hook issues allreduces from future callbacks, and with
    several buckets in flight gloo's ranks can issue them in different
    orders and deadlock or mismatch (seen with 1.13 on ResNet-50)."""
    previous = []

    def wrapper(state, bucket):
        if previous and not spans_reset(spans, previous):
            previous[-1].wait()
        start = time.perf_counter()
        future = hook(state, bucket)

        def done(fut):
            spans.append((start, time.perf_counter()))
            return fut.value()[0] if isinstance(fut.value(), list) else fut.value()
        chained = future.then(done)
        previous[:] = [chained]
        return chained
    return wrapper


def spans_reset(spans, previous):
    """A new step started (the spans were cleared): forget the last future."""
    if not spans and previous and previous[-1].done():
        previous.clear()
        return True
    return False


def worker(rank, args, results):
    os.environ["MASTER_ADDR"] = args.master_addr
    os.environ["MASTER_PORT"] = str(args.port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    if args.shapes_from:
        shapes = module_shapes(args.shapes_from)
    else:
        shapes = resnet50_shapes() if args.model == "resnet50" else \
            gpt2_medium_shapes()
    lines = []
    for kind in args.kinds.split(","):
        model = DDP(Injected(shapes, rank))
        spans = []
        if kind == "allreduce":
            model.register_comm_hook(None, timed(default_hooks.allreduce_hook, spans))
            warmup = 2
        elif kind == "fp16":
            model.register_comm_hook(None, timed(default_hooks.fp16_compress_hook, spans))
            warmup = 2
        elif kind == "quant-per-tensor":
            model.register_comm_hook(None, timed(quantization_per_tensor_hook(), spans))
            warmup = 2
        elif kind == "powersgd":
            state = psgd.PowerSGDState(
                process_group=None, matrix_approximation_rank=args.rank,
                start_powerSGD_iter=2, min_compression_rate=2,
                use_error_feedback=True, warm_start=True)
            model.register_comm_hook(state, timed(psgd.powerSGD_hook, spans))
            warmup = 4  # past start_powerSGD_iter, and one warm-started step
        steps = []
        for step in range(warmup + args.steps):
            spans.clear()
            dist.barrier()
            model.zero_grad(set_to_none=False)
            model().backward()
            if step >= warmup:
                span = max(end for _, end in spans) - min(start for start, _ in spans)
                steps.append(span)
        slowest = torch.tensor(steps, dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        times = slowest.tolist()
        if rank == 0:
            lines.append("torch %-10s median %8.2f ms  min %8.2f ms" % (
                kind, 1e3 * statistics.median(times), 1e3 * min(times)))
            if kind == "powersgd":
                ratio, before, after = state.compression_stats()
                lines.append("torch powersgd compression_stats: %.1fx, %d -> %d elements"
                             % (ratio, before, after))
    if rank == 0:
        results.extend(lines)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", choices=["resnet50", "gpt2-medium"], default="resnet50")
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rank", type=int, default=2)
    parser.add_argument("--port", type=int, default=29517)
    parser.add_argument("--shapes-from", metavar="MLIR", default=None,
                        help="the shapes of this module's f32 tensor "
                        "arguments instead of --model's")
    parser.add_argument("--kinds", default="allreduce,fp16,powersgd")
    parser.add_argument("--process-rank", type=int, default=-1,
                        help="run this rank alone, in this process (one process per "
                        "host of bench/net/hosts.sh), instead of spawning --world")
    parser.add_argument("--master-addr", default="127.0.0.1",
                        help="rank 0's address (MASTER_ADDR)")
    args = parser.parse_args()
    for kind in args.kinds.split(","):
        if kind not in ("allreduce", "fp16", "powersgd", "quant-per-tensor"):
            parser.error("unknown kind '%s' (allreduce, fp16, powersgd, "
                         "quant-per-tensor)" % kind)
    if args.process_rank >= 0:
        results = []
        worker(args.process_rank, args, results)
        print("\n".join(results))
        return 0
    with mp.Manager() as manager:
        results = manager.list()
        mp.spawn(worker, args=(args, results), nprocs=args.world, join=True)
        print("\n".join(results))


if __name__ == "__main__":
    sys.exit(main())
