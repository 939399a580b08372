# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The PyTorch side: runs real DDP (gloo, N local processes) with PyTorch's own
communication hooks on the gradients gen_grads.py wrote, and saves what every
rank gets back, PowerSGD's state and its compression_stats().

  torch_hooks_ref.py DIR/manifest.json --out TORCHDIR [--scenarios fp16,psgd_r2]
                     [--start-method fork|spawn]

Hooks: default_hooks.fp16_compress_hook, powerSGD_hook.powerSGD_hook,
quantization_hooks.quantization_pertensor_hook and
quantization_perchannel_hook (bucket_size from the manifest), and
debugging_hooks.noop_hook (1.13 has it there, not in default_hooks).

Needs PyTorch (Debian's 1.13, CPU). Writes, per scenario S:
  TORCHDIR/S/rank{rank}.step{step}.out{arg}.npy         compared steps
  TORCHDIR/S/warmup/rank{rank}.step{step}.out{arg}.npy  PowerSGD's warm-up steps
  TORCHDIR/S/state/rank{rank}.{name}.npy                PowerSGD's state after
      the last step under OUR state names (ddp.q.NAME as m x r,
      ddp.error.NAME as n x m), plus torch.error.arg{i} (PyTorch's error of
      an uncompressed tensor: it keeps one for the whole bucket) and
      torch.iter (state.iter)
  TORCHDIR/S/stats.rank{rank}.json                      compression_stats(),
      the bucket layout DDP used at every step, the step count, and for the
      quantization hooks the allgathers they issued at every step (dtype,
      elements and bytes this rank sent)

How exact gradients get in: the model's forward is sum_k (p_k * g_k).sum() for
the step's gradients g_k, so backward produces p_k.grad == g_k bit for bit (a
product by 1.0); the wrapper hook below checks the bucket against the file
before the real hook sees it. DDP then replaces p.grad with the hook's result,
which is what we save.

Bucket layout: DDP (find_unused_parameters=False) puts all parameters in ONE
bucket for the first iteration and rebuilds the buckets after it, in the
order the gradients became ready, capped by bucket_cap_mb and, for the first
bucket, dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB). Our gradients total 24 KiB,
so the bucket stays one; the wrapper asserts that, records the layout
(bucket.parameters() mapped to argument indices) at every step, and every
mapping below uses the recorded layout, never an assumed order.

How the Q is shared (README.md): before PyTorch's first compressed step the
wrapper fills state.q_memory_dict[bucket] with OUR initial Qs
(init/r{R}/ddp.q.NAME.npy) and state.p_memory_dict[bucket] with a buffer of
the right size. powerSGD_hook then believes it is past its first compressed
step (`bucket_index in state.p_memory_dict`) and takes the warm-start path:
it orthogonalizes the given Q in place and uses it, without drawing random
numbers. PyTorch's flat Q buffer holds, for each compressed tensor in bucket
order GROUPED BY MATRIX SHAPE (powerSGD_hook's shape_to_tensors, a dict in
order of first appearance; even without batch_tensors_with_same_shape), an
m x r row-major block: tensor_q = buffer[off:off + m*r].view(m, r), exactly
our ddp.q.NAME. The same mapping reads the final Q back out.

The quantization hooks of 1.13 were written for CUDA and NCCL and fail on
CPU with gloo; hooks_on_cpu.run_quantization_hook runs them unchanged with
two patches active only during the hook (its docstring, README.md). Their
scenarios build DDP with find_unused_parameters=True, which keeps DDP's
first bucket layout (argument order, ours) instead of rebuilding it after
the first step: the per-channel hook's channels follow that layout. The
wrapper asserts the manifest's bucket_layout at every step.
"""
import argparse
import datetime
import json
import os
import socket
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import debugging_hooks
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
from torch.distributed.algorithms.ddp_comm_hooks import quantization_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hooks_on_cpu import run_quantization_hook  # noqa: E402


class GradFeeder(torch.nn.Module):
    """Parameters shaped like the gradients; d(forward)/d(p_k) = g_k."""

    def __init__(self, shapes):
        super().__init__()
        self.ps = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.zeros(s)) for s in shapes])

    def forward(self, gs):
        return sum((p * g).sum() for p, g in zip(self.ps, gs))


def load(manifest_dir, pattern, **kw):
    return np.load(os.path.join(manifest_dir, pattern.format(**kw)))


def q_layout(layout, scenario, tensors):
    """[(arg, offset, m, r)] of PyTorch's flat Q buffer: compressed tensors in
    bucket order, grouped by matrix shape in order of first appearance."""
    groups = {}
    for arg in layout:
        entry = scenario["tensors"][arg]
        if entry["compressed"]:
            groups.setdefault(tuple(tensors[arg]["matrix"]), []).append(arg)
    out, offset = [], 0
    for args in groups.values():
        for arg in args:
            m, r = tensors[arg]["matrix"][1], scenario["tensors"][arg]["r"]
            out.append((arg, offset, m, r))
            offset += m * r
    return out, offset


def run_scenario(name, scenario, manifest, mdir, out, rank, world):
    tensors = manifest["tensors"]
    shapes = [tuple(t["shape"]) for t in tensors]
    model = GradFeeder(shapes)
    ddp = DDP(model, bucket_cap_mb=100, broadcast_buffers=False,
              find_unused_parameters=scenario.get("find_unused_parameters", False))
    ptr_to_arg = {p.data_ptr(): k for k, p in enumerate(model.ps)}
    hook = scenario["hook"]
    powersgd = hook == "powerSGD_hook"
    layouts = []
    allgathers = []
    expected = {}

    if powersgd:
        state = psgd.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=scenario["rank"],
            start_powerSGD_iter=scenario["start_iter"],
            min_compression_rate=scenario["min_compression_rate"],
            use_error_feedback=scenario["use_error_feedback"],
            warm_start=scenario["warm_start"],
            orthogonalization_epsilon=scenario["orthogonalization_epsilon"],
            random_seed=0)
        initial_qs = {k: load(mdir, manifest["initial_q"], R=scenario["rank"], name=k)
                      for k in scenario["states"] if k.startswith("ddp.q.")}
    else:
        state = None

    def wrapper(hook_state, bucket):
        layout = [ptr_to_arg[p.data_ptr()] for p in bucket.parameters()]
        if bucket.index() != 0 or not bucket.is_last() or sorted(layout) != list(range(len(shapes))):
            raise RuntimeError("expected one bucket with every gradient, got bucket %d "
                               "with %s" % (bucket.index(), layout))
        layouts.append(layout)
        flat = torch.cat([g.reshape(-1) for g in bucket.gradients()])
        if not torch.equal(flat, bucket.buffer()):
            raise RuntimeError("bucket.gradients() is not the buffer in order")
        want = torch.cat([torch.from_numpy(expected[a]).reshape(-1) for a in layout])
        if not torch.equal(bucket.buffer(), want):
            raise RuntimeError("the bucket is not the gradients from the files")
        if "bucket_layout" in scenario and layout != scenario["bucket_layout"]:
            raise RuntimeError("DDP's bucket layout %s is not the manifest's %s"
                               % (layout, scenario["bucket_layout"]))
        if hook == "fp16_compress_hook":
            return default_hooks.fp16_compress_hook(hook_state, bucket)
        if hook == "noop_hook":
            return debugging_hooks.noop_hook(hook_state, bucket)
        if hook.startswith("quantization_"):
            kwargs = {"bucket_size": scenario["bucket_size"]} if "bucket_size" in scenario else {}
            allgathers.append([])
            return run_quantization_hook(getattr(quantization_hooks, hook), hook_state, bucket,
                                         allgathers=allgathers[-1], **kwargs)
        idx = bucket.index()
        if hook_state.iter == hook_state.start_powerSGD_iter and idx not in hook_state.p_memory_dict:
            # Our initial Q, through PyTorch's warm-start path (module docstring).
            qs, total_q = q_layout(layout, scenario, tensors)
            q_flat = torch.empty(total_q, dtype=bucket.buffer().dtype)
            for arg, offset, m, r in qs:
                key = "ddp.q.%s" % scenario["tensors"][arg]["state_id"]
                q_flat[offset:offset + m * r] = torch.from_numpy(initial_qs[key]).reshape(-1)
            total_p = sum(tensors[a]["matrix"][0] * r for a, _, _, r in qs)
            hook_state.q_memory_dict[idx] = q_flat
            hook_state.p_memory_dict[idx] = torch.empty(total_p, dtype=q_flat.dtype)
        return psgd.powerSGD_hook(hook_state, bucket)

    ddp.register_comm_hook(state, wrapper)

    def step(pattern, t, save):
        for k in range(len(shapes)):
            expected[k] = load(mdir, pattern, rank=rank, step=t, arg=k)
        ddp.zero_grad(set_to_none=False)
        ddp([torch.from_numpy(expected[k]) for k in range(len(shapes))]).backward()
        for k, p in enumerate(model.ps):
            np.save(save.format(rank=rank, step=t, arg=k), p.grad.detach().numpy())

    sdir = os.path.join(out, name)
    stats = {"scenario": name, "rank": rank, "world_size": world, "torch": torch.__version__}
    if powersgd:
        os.makedirs(os.path.join(sdir, "warmup"), exist_ok=True)
        for t in range(scenario["start_iter"]):
            step(manifest["warmup_grads"], t,
                 os.path.join(sdir, "warmup", "rank{rank}.step{step}.out{arg}.npy"))
        stats["compression_stats_after_warmup"] = list(state.compression_stats())
    os.makedirs(sdir, exist_ok=True)
    for t in range(manifest["steps"]):
        step(manifest["grads"], t, os.path.join(sdir, "rank{rank}.step{step}.out{arg}.npy"))
    stats["layouts"] = layouts
    stats["compared_steps"] = manifest["steps"]
    if hook.startswith("quantization_"):
        stats["allgathers"] = allgathers

    if powersgd:
        rate, before, after = state.compression_stats()
        stats.update({"compress_rate": rate, "elements_before_compression": before,
                      "elements_after_compression": after, "iter": state.iter,
                      "compressed_steps": state.iter - state.start_powerSGD_iter})
        # The state under our names, through the layout of the last step.
        layout = layouts[-1]
        os.makedirs(os.path.join(sdir, "state"), exist_ok=True)
        save = lambda key, a: np.save(os.path.join(sdir, "state", "rank%d.%s.npy" % (rank, key)), a)
        error = state.error_dict[0].numpy()
        offset = 0
        for arg in layout:
            n, m = tensors[arg]["matrix"]
            piece = error[offset:offset + n * m].reshape(n, m)
            offset += n * m
            entry = scenario["tensors"][arg]
            save("ddp.error.%s" % entry["state_id"] if entry["compressed"]
                 else "torch.error.arg%d" % arg, piece)
        qs, _ = q_layout(layout, scenario, tensors)
        q_flat = state.q_memory_dict[0].numpy()
        for arg, offset, m, r in qs:
            save("ddp.q.%s" % scenario["tensors"][arg]["state_id"],
                 q_flat[offset:offset + m * r].reshape(m, r))
        save("torch.iter", np.array(state.iter, dtype=np.int64))
    with open(os.path.join(sdir, "stats.rank%d.json" % rank), "w") as f:
        json.dump(stats, f, indent=1)
    dist.barrier()


def worker(rank, world, port, manifest_path, out, names):
    torch.set_num_threads(1)
    with open(manifest_path) as f:
        manifest = json.load(f)
    mdir = os.path.dirname(os.path.abspath(manifest_path))
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    try:
        for name in names:
            run_scenario(name, manifest["scenarios"][name], manifest, mdir, out, rank, world)
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("manifest")
    parser.add_argument("--out", required=True)
    parser.add_argument("--scenarios", default="",
                        help="comma-separated; default: all in the manifest")
    parser.add_argument("--start-method", default="fork", choices=["fork", "spawn"],
                        help="fork skips re-importing torch in every rank (faster); "
                             "CPU only, so forking is safe")
    args = parser.parse_args()
    with open(args.manifest) as f:
        manifest = json.load(f)
    names = [s for s in args.scenarios.split(",") if s] or list(manifest["scenarios"])
    for name in names:
        if name not in manifest["scenarios"]:
            parser.error("no scenario %r in the manifest" % name)
    os.makedirs(args.out, exist_ok=True)
    world = manifest["world_size"]
    mp.start_processes(worker, args=(world, free_port(), os.path.abspath(args.manifest),
                                     os.path.abspath(args.out), names),
                       nprocs=world, join=True, start_method=args.start_method)
    print("torch %s: ran %s on %d ranks" % (torch.__version__, ", ".join(names), world))
    return 0


if __name__ == "__main__":
    sys.exit(main())
