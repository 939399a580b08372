# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch's DDP communication hooks on one GPU (NCCL, world size 1).

Same injected gradients as bench/cpu/torch_hooks.py (forward sum(p * G)), on
cuda:0. A step is backward() to torch.cuda.synchronize(); the hook's share
is the step minus the same step with noop_hook. Also prints a device-to-
device copy's bandwidth (the ceiling the fused passes are measured against)
and each hook's peak extra memory.

  python3 bench/gpu/torch_hooks_gpu.py --model resnet50 --steps 20
"""
import argparse
import os
import statistics
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import debugging_hooks, default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cpu"))
from torch_hooks import Injected, gpt2_medium_shapes, resnet50_shapes  # noqa: E402


def copy_bandwidth(device):
    """Bytes read + written per second by a 1 GiB device-to-device copy."""
    src = torch.empty(1 << 28, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        dst.copy_(src)
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / 10
    return 2 * src.numel() * 4 / seconds


def time_steps(model, dummy, steps, warmup):
    times = []
    for step in range(warmup + steps):
        model.zero_grad(set_to_none=False)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        model(dummy).backward()
        end.record()
        torch.cuda.synchronize()
        if step >= warmup:
            times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", choices=["resnet50", "gpt2-medium"], default="resnet50")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rank", type=int, default=2)
    parser.add_argument("--kinds", default="allreduce,fp16,powersgd",
                        help="hooks to time (noop always runs: it is subtracted)")
    args = parser.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1)
    device = torch.device("cuda:0")
    torch.cuda.set_device(device)
    shapes = resnet50_shapes() if args.model == "resnet50" else gpt2_medium_shapes()
    print("torch copy-bandwidth %.1f GB/s (device-to-device, read + write)"
          % (copy_bandwidth(device) / 1e9))

    dummy = torch.zeros(1, device=device)  # DDP 2.x needs an input
    results = {}
    kinds = args.kinds.split(",")
    for kind in ["noop"] + kinds:
        model = DDP(Injected(shapes, 0).to(device), device_ids=[0])
        model.module.grads = [g.to(device) for g in model.module.grads]
        if kind == "noop":
            model.register_comm_hook(None, debugging_hooks.noop_hook)
        elif kind == "allreduce":
            model.register_comm_hook(None, default_hooks.allreduce_hook)
        elif kind == "fp16":
            model.register_comm_hook(None, default_hooks.fp16_compress_hook)
        else:
            state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=args.rank,
                                       start_powerSGD_iter=2, min_compression_rate=2,
                                       use_error_feedback=True, warm_start=True)
            model.register_comm_hook(state, psgd.powerSGD_hook)
        warmup = 4
        for _ in range(warmup):  # reach steady state before measuring memory
            model.zero_grad(set_to_none=False)
            model(dummy).backward()
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        seconds = time_steps(model, dummy, args.steps, 1)
        peak = torch.cuda.max_memory_allocated(device) - base
        results[kind] = seconds
        print("torch %-10s step %8.3f ms  peak extra %8.1f MB" % (kind, 1e3 * seconds, peak / 1e6))
        if kind == "powersgd":
            # Persistent: error dict and Q memory PowerSGD keeps between steps.
            persistent = sum(t.numel() * t.element_size() for t in state.error_dict.values())
            persistent += sum(t.numel() * t.element_size() for t in state.q_memory_dict.values())
            print("torch powersgd persistent state %.1f MB" % (persistent / 1e6))
        del model
        torch.cuda.empty_cache()
    for kind in kinds:
        print("torch %-10s median %8.3f ms  (hook: step minus noop step)"
              % (kind, 1e3 * max(0.0, results[kind] - results["noop"])))
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
