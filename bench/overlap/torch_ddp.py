#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch DDP's side of the overlap benchmark: the same MLP, data and buckets.

    /usr/bin/python3 bench/overlap/torch_ddp.py --data DIR [--configs plain,fp16,powersgd]
        [--links loopback,1,10,100] [--latency-us 20] [--steps 6] [--warmup 4]
        [--bucket-cap-mb 25] [--powersgd-rank 2] [--start-iter 2] [--lr 0.1] [--world 2]

Debian's PyTorch 1.13 (python3-torch), CPU, gloo, one compute thread per
rank, ranks started with torch.multiprocessing (MASTER_ADDR=127.0.0.1). The
model is gen_mlp_step.py's: L Linear(H, H) layers, ReLU between them, loss
sum((z - y)^2) / (2 B H), plain SGD; DIR/inputs.r<rank>.npz (written by
`gen_mlp_step.py --prepare DIR`) holds the initial weights and each rank's
batch, so both sides train the same model on the same data (nn.Linear keeps
its weight as out x in: it gets w.T).

Configurations (comm hooks): plain = allreduce_hook, fp16 =
fp16_compress_hook, powersgd = powerSGD_hook with matrix_approximation_rank
2, start_powerSGD_iter --start-iter (2), error feedback and warm start
(ddp-opt's defaults besides the start). Modes, each timed on a fresh DDP model:

  ddp         DDP as users run it: a bucket's hook runs as soon as the
              bucket is ready, during the backward pass.
  sequential  the same DDP, buckets and hooks, but no bucket's
              communication starts before the last bucket is ready (the end
              of the backward pass); then all of them, in bucket order. This
              is "communication not overlapped".
  compute     forward and backward under no_sync() (no communication at
              all), then the same SGD update: the compute-only time.

A step is timed from the start of the forward pass to the end of the SGD
update, after a barrier; per step the slowest rank's time counts; printed
is the median over the steps after --warmup (DDP rebuilds its buckets after
the first step; PowerSGD compresses from step 2 and warm-starts from step 3).

--links: "loopback" is gloo over 127.0.0.1 as it is; a number G models a
link of G Gb/s with --latency-us latency ("simulated link", see
SimulatedLink). Every figure obtained with it must say so. "net:RATE" is a
real link: the ranks run one per host of bench/net/hosts.sh (--rank R
--master-addr 10.251.0.1 in host R, GLOO_SOCKET_IFNAME=eth0), and nothing
is modelled.

Output, one line per (config, link, mode):
    torch CONFIG LINK MODE median_ms M min_ms N
plus `torch buckets ...` (the bucket sizes DDP formed, in bytes, in the
order their hooks ran) and `torch loss ...` (rank 0's local loss per step
of the plain DDP run on the first link, to check against ours).
"""

import argparse
import os
import statistics
import sys
import threading
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
from torch.nn.parallel import DistributedDataParallel as DDP


# ---------------------------------------------------------------------------
# The simulated link.
#
# The hooks call `dist.all_reduce(tensor, group=..., async_op=True)
# .get_future()` through the module name `dist` of their own module
# (default_hooks, powerSGD_hook). While a simulated link is on, that name
# points to a proxy whose all_reduce starts the real gloo allreduce at once
# and hands back a future that completes no earlier than the link allows:
#
#   begin = max(issue time, the end of the link's previous collective)
#   end   = begin + latency + bytes / bandwidth
#   bytes = 2 (W - 1) / W * the tensor's bytes (what one rank sends in a
#           ring allreduce; for PowerSGD every P, Q and uncompressed-buffer
#           allreduce counts on its own, at its own size and type)
#
# and the future completes at max(end, the real completion): the real
# loopback transfer's time counts as part of the modelled time, so a
# simulated link is never faster than loopback. Collectives go through the
# link one at a time in issue order (a FIFO, like a single communication
# thread serving a queue). The hold is a threading.Timer that sets the
# future's result at `end`; the hooks' follow-up work (PowerSGD's next
# allreduce, fp16's cast back) then runs on that timer thread.
#
# How faithful it is: it delays completions, nothing else. The bytes still
# cross loopback (memory copies on this machine's cores, competing with
# compute, as for ddp-run); latency is charged once per collective, not per
# ring step; there is no congestion beyond the FIFO; the Python timer adds
# roughly 0.1 ms per collective. It is a model of a link, for comparing
# overlap at link speeds this machine does not have.
# ---------------------------------------------------------------------------

class SimulatedLink:
    """dist with all_reduce held to a link of `gbps` Gb/s and `latency_us`."""

    def __init__(self, gbps, latency_us, world):
        self.seconds_per_byte = 8.0 / (gbps * 1e9)
        self.latency = latency_us * 1e-6
        self.ring_factor = 2.0 * (world - 1) / world
        self.link_free = 0.0
        self.lock = threading.Lock()

    def __getattr__(self, name):
        # Everything but all_reduce is torch.distributed's own.
        return getattr(dist, name)

    def all_reduce(self, tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        issued = time.perf_counter()
        real = dist.all_reduce(tensor, op=op, group=group, async_op=True).get_future()
        nbytes = self.ring_factor * tensor.numel() * tensor.element_size()
        with self.lock:
            begin = max(issued, self.link_free)
            end = begin + self.latency + nbytes * self.seconds_per_byte
            self.link_free = end
        held = torch.futures.Future()

        def hold(fut):
            try:
                value = fut.value()
            except Exception as error:  # pass gloo's errors on
                held.set_exception(error)
                return
            remaining = end - time.perf_counter()
            if remaining > 0:
                threading.Timer(remaining, held.set_result, [value]).start()
            else:
                held.set_result(value)
        real.then(hold)
        work = HeldWork(held)
        if not async_op:
            work.wait()
            return None
        return work


class HeldWork:
    """What dist.all_reduce(async_op=True) returns, for a held future."""

    def __init__(self, future):
        self.future = future

    def get_future(self):
        return self.future

    def wait(self):
        self.future.wait()
        return True


def use_link(link):
    """Point the hooks' `dist` at the link (None: torch.distributed itself)."""
    default_hooks.dist = link if link is not None else dist
    psgd.dist = link if link is not None else dist


# ---------------------------------------------------------------------------
# When each bucket's communication starts.
# ---------------------------------------------------------------------------

class Launcher:
    """Wraps a comm hook. Records the bucket sizes; with `defer`, holds every
    bucket back until the last one is ready and then starts them all in
    bucket order (the sequential mode); with `serialize`, starts a bucket's
    hook only once the previous bucket's future has completed.

    serialize is on for PowerSGD: powerSGD_hook issues its P and Q
    allreduces from future callbacks, and with two buckets in flight the
    ranks can issue gloo collectives in different orders and mismatch or
    deadlock (seen with 1.13 in bench/cpu/torch_hooks.py). It costs DDP
    nothing a FIFO link would not: the link serves one collective at a time
    anyway."""

    def __init__(self, hook, defer, serialize):
        self.hook = hook
        self.defer = defer
        self.serialize = serialize
        self.pending = []
        self.previous = None
        self.bucket_bytes = []

    def __call__(self, state, bucket):
        buffer = bucket.buffer()
        self.bucket_bytes.append(buffer.numel() * buffer.element_size())
        out = torch.futures.Future()
        self.pending.append((state, bucket, out))
        if self.defer and not bucket.is_last():
            return out
        pending, self.pending = self.pending, []
        for item in pending:
            self.launch(*item)
        return out

    def launch(self, state, bucket, out):
        def start(_=None):
            try:
                future = self.hook(state, bucket)
            except Exception as error:
                out.set_exception(error)
                return
            future.then(lambda fut: forward(fut, out))
        if self.serialize and self.previous is not None:
            self.previous.then(start)  # runs at once if it has completed
        else:
            start()
        self.previous = out


def forward(fut, out):
    """Complete `out` with `fut`'s result or error."""
    try:
        out.set_result(fut.value())
    except Exception as error:
        out.set_exception(error)


# ---------------------------------------------------------------------------
# The model and the timed steps.
# ---------------------------------------------------------------------------

def build_model(data, layers):
    """gen_mlp_step.py's MLP with DIR/inputs.r<rank>.npz's weights."""
    modules = []
    for i in range(1, layers + 1):
        w = data[f"w{i}"]
        linear = torch.nn.Linear(w.shape[0], w.shape[1])
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))
            linear.bias.copy_(torch.from_numpy(data[f"b{i}"]))
        modules.append(linear)
        if i < layers:
            modules.append(torch.nn.ReLU())
    return torch.nn.Sequential(*modules)


def make_hook(config, rank, start_iter):
    """(hook, state) for a configuration."""
    if config == "plain":
        return default_hooks.allreduce_hook, None
    if config == "fp16":
        return default_hooks.fp16_compress_hook, None
    if config == "powersgd":
        state = psgd.PowerSGDState(
            process_group=None, matrix_approximation_rank=rank,
            start_powerSGD_iter=start_iter, min_compression_rate=2,
            use_error_feedback=True, warm_start=True)
        return psgd.powerSGD_hook, state
    raise ValueError(f"unknown configuration {config}")


def run(args, data, config, mode, x, y):
    """Per-step times (s, this rank) and local losses of one configuration and mode."""
    model = DDP(build_model(data, args.layers), bucket_cap_mb=args.bucket_cap_mb)
    launcher = None
    if mode != "compute":
        hook, state = make_hook(config, args.powersgd_rank, args.start_iter)
        launcher = Launcher(hook, defer=(mode == "sequential"),
                            serialize=(config == "powersgd"))

        def launched_hook(state, bucket):  # DDP wants a function (its name)
            return launcher(state, bucket)
        model.register_comm_hook(state, launched_hook)
    count = x.numel()  # B H
    times, losses = [], []
    for step in range(args.warmup + args.steps):
        model.zero_grad(set_to_none=False)
        if launcher:
            launcher.bucket_bytes = []
        dist.barrier()
        start = time.perf_counter()
        if mode == "compute":
            with model.no_sync():
                loss = ((model(x) - y) ** 2).sum() / (2 * count)
                loss.backward()
        else:
            loss = ((model(x) - y) ** 2).sum() / (2 * count)
            loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.sub_(args.lr * p.grad)
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    buckets = launcher.bucket_bytes if launcher else []
    return times, losses, buckets


def worker(rank, args, results):
    os.environ["MASTER_ADDR"] = args.master_addr
    os.environ["MASTER_PORT"] = str(args.port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    with np.load(os.path.join(args.data, f"inputs.r{rank}.npz")) as npz:
        data = {name: npz[name] for name in npz.files}
    x = torch.from_numpy(data["x"])
    y = torch.from_numpy(data["y"])
    lines = []

    def report(config, link, mode, times):
        # The slowest rank's time per step, median over the measured steps.
        slowest = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        measured = slowest.tolist()[args.warmup:]
        lines.append("torch %s %s %s median_ms %.3f min_ms %.3f" % (
            config, link, mode, 1e3 * statistics.median(measured), 1e3 * min(measured)))

    # Compute-only: no communication, so once for every configuration and link.
    times, _, _ = run(args, data, "plain", "compute", x, y)
    report("any", "any", "compute", times)
    for link_index, link in enumerate(args.links.split(",")):
        # "net:RATE" is a real link (the hosts of bench/net/hosts.sh, one
        # process each): nothing is modelled.
        use_link(None if link == "loopback" or link.startswith("net:") else
                 SimulatedLink(float(link), args.latency_us, args.world))
        for config in args.configs.split(","):
            for mode in args.modes.split(","):
                times, losses, buckets = run(args, data, config, mode, x, y)
                report(config, link, mode, times)
                if link_index == 0 and mode == "ddp":
                    lines.append("torch buckets %s %s" % (config, " ".join(map(str, buckets))))
                if link_index == 0 and mode == "ddp" and config == "plain":
                    lines.append("torch loss " + " ".join("%.9g" % v for v in losses))
    use_link(None)
    if rank == 0:
        results.extend(lines)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="directory of inputs.r<rank>.npz")
    parser.add_argument("--layers", type=int, default=0,
                        help="number of layers (default: as many as the data has)")
    parser.add_argument("--configs", default="plain,fp16,powersgd")
    parser.add_argument("--modes", default="ddp,sequential")
    parser.add_argument("--links", default="loopback,1,10,100",
                        help="loopback and/or simulated link speeds in Gb/s")
    parser.add_argument("--latency-us", type=float, default=20.0,
                        help="latency of the simulated links")
    parser.add_argument("--steps", type=int, default=6, help="measured steps")
    parser.add_argument("--warmup", type=int, default=4, help="steps before those")
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    parser.add_argument("--powersgd-rank", type=int, default=2)
    parser.add_argument("--start-iter", type=int, default=2,
                        help="start_powerSGD_iter (at least 2 with error feedback)")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--port", type=int, default=29531)
    parser.add_argument("--rank", type=int, default=-1,
                        help="run this rank alone, in this process (one process per "
                        "host: bench/net/hosts.sh), instead of spawning --world")
    parser.add_argument("--master-addr", default="127.0.0.1",
                        help="rank 0's address (MASTER_ADDR)")
    args = parser.parse_args()
    if args.warmup < args.start_iter + 2 and "powersgd" in args.configs:
        parser.error("--warmup must be at least --start-iter + 2 for powersgd (the exact "
                     "steps, the first compressed step, the first warm-started one)")
    if args.layers == 0:
        with np.load(os.path.join(args.data, "inputs.r0.npz")) as npz:
            args.layers = sum(1 for name in npz.files if name.startswith("w"))
    if args.rank >= 0:
        results = []
        worker(args.rank, args, results)
        print("\n".join(results))
        return 0
    with mp.Manager() as manager:
        results = manager.list()
        mp.spawn(worker, args=(args, results), nprocs=args.world, join=True)
        print("\n".join(results))


if __name__ == "__main__":
    sys.exit(main())
