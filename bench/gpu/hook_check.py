# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""ddp_opt.torch's hook on a GPU, where there is no compiler: the buckets
are compiled where MLIR is (--prepare, on the CPU) into a cache that is
carried along, and run on CUDA from it (--check).

  python3 bench/gpu/hook_check.py --prepare DIR   (here: build/python, CPU)
  python3 bench/gpu/hook_check.py --check DIR     (there: the runtime built
                                                   alone, DDP_OPT_LIBRARY_DIR)

One rank. A DDP model whose gradients are fed exactly (the forward is
sum(p * g)) runs STEPS steps with our hook for each scheme: PowerSGD rank 2
(start 2, error feedback) and fp16. --prepare runs them on the CPU backend
(gloo), which compiles every bucket into DIR/cache, and saves what each
step returned (DIR/ref/SCHEME.sSTEP.NAME.npy). --check runs the same on
CUDA (nccl, the runtime joined through NCCL, on its own stream) from the
cache, never loading the compiler, and compares: fp16 bit for bit with the
CPU's (one rank: a cast there and back), PowerSGD within rtol 1e-4 of each
tensor's norm (other kernels, other sums). Prints one line per scheme and
exits 1 on a difference. On CUDA each backward first holds PyTorch's
stream about 50 ms (a sleep kernel), so that the gradients reach DDP's
bucket well after DDP calls the hook: a step that did not wait for them,
or a future that completed before the results were back in the bucket,
shows as a difference.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import ddp_opt
import ddp_opt.torch

SHAPES = [("conv.weight", (32, 16, 3, 3)), ("conv.bias", (32,)),
          ("fc1.weight", (256, 512)), ("fc2.weight", (10, 256))]
SCHEMES = {"powersgd": "powersgd-rank=2 start-iter=2", "fp16": "narrow=fp16"}
STEPS = 5


class Feeder(nn.Module):
    def __init__(self):
        super().__init__()
        self.params = nn.ParameterList(
            [nn.Parameter(torch.zeros(shape)) for _, shape in SHAPES])

    def forward(self, grads):
        return sum((p * g).sum() for p, g in zip(self.params, grads))


class LateBackward(torch.autograd.Function):
    """Identity; its backward holds the current CUDA stream first."""

    @staticmethod
    def forward(context, loss):
        return loss

    @staticmethod
    def backward(context, grad):
        torch.cuda._sleep(100_000_000)  # cycles: about 50 ms
        return grad


def gradients(step):
    rng = np.random.default_rng(100 + step)
    out = []
    for _, shape in SHAPES:
        if len(shape) == 1:
            out.append(rng.standard_normal(shape).astype(np.float32))
            continue
        n, m = shape[0], int(np.prod(shape[1:]))
        g = (rng.standard_normal((n, 3)) * [4.0, 2.0, 1.0]) @ \
            rng.standard_normal((3, m)) + 0.01 * rng.standard_normal((n, m))
        out.append(g.astype(np.float32).reshape(shape))
    return out


def main():
    parser = argparse.ArgumentParser()
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--prepare", metavar="DIR")
    mode.add_argument("--check", metavar="DIR")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="where --check runs (cpu: a rehearsal of the "
                        "carried cache without the compiler)")
    args = parser.parse_args()
    directory = args.prepare or args.check
    checking = args.check is not None
    cuda = checking and args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("hook check: SKIPPED: no CUDA device for PyTorch")
        return 0
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    if cuda:
        torch.cuda.set_device(0)
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    cache = os.path.join(directory, "cache")
    failed = False
    for scheme, compress in SCHEMES.items():
        model = Feeder().to(device)
        ddp = DDP(model)
        state = ddp_opt.torch.HookState(ddp, compress=compress,
                                        cache_dir=cache)
        ddp.register_comm_hook(state, ddp_opt.torch.hook)
        worst = 0.0
        for step in range(STEPS):
            grads = [torch.from_numpy(g).to(device) for g in gradients(step)]
            ddp.zero_grad()
            loss = ddp(grads)
            if cuda:
                loss = LateBackward.apply(loss)
            loss.backward()
            for (name, _), p in zip(SHAPES, model.params):
                got = p.grad.detach().cpu().numpy()
                path = os.path.join(directory, "ref",
                                    "%s.s%d.%s.npy" % (scheme, step, name))
                if not checking:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    np.save(path, got)
                    continue
                expected = np.load(path)
                if scheme == "fp16":
                    same = np.array_equal(got, expected)
                    difference = 0.0 if same else float(
                        np.abs(got - expected).max())
                    bad = not same
                else:
                    difference = float(np.abs(got - expected).max() /
                                       max(np.linalg.norm(expected), 1e-30))
                    bad = difference > 1e-4
                worst = max(worst, difference)
                if bad:
                    print("hook check: %s step %d %s: CUDA differs from the "
                          "CPU by %.3g" % (scheme, step, name, difference))
                    failed = True
        state.drain()
        where = ("%s, from the carried cache" % device.type.upper()
                 if checking else "CPU, compiled")
        print("hook check: %s: %d steps on %s; %s" % (
            scheme, STEPS, where, "largest difference from the CPU %.2g" %
            worst if checking else "references saved"), flush=True)
    dist.destroy_process_group()
    if checking and "libDDPCAPI" in open("/proc/self/maps").read():
        print("hook check: the compiler was loaded: a bucket was not in the "
              "cache")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
