# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Test vectors of PyTorch 1.13's quantization hooks, for QUANT_NOTES.md.

  quant_vectors.py [--random-trials 3]

Prints, as Markdown:
1. PyTorch's own observers and (de)quantize helpers on small hand-made
   tensors: MinMaxObserver / PerChannelMinMaxObserver -> calculate_qparams
   -> the float s_and_z the hook allgathers -> quantization_hooks'
   _quantize_*_cuda -> _dequantize_*_cuda (all of it exactly as the hooks
   call it, on CPU);
2. the whole hooks (quantization_pertensor_hook, quantization_perchannel_hook)
   on 2 and 3 gloo processes, through hooks_on_cpu.run_quantization_hook;
3. a check that the f32 recipe written in QUANT_NOTES.md (model_* below, in
   NumPy) gives PyTorch's hook results bit for bit, on the vectors above and
   on random buckets. The recipe is a description to check, never the
   oracle: the comparison harness runs PyTorch's hooks.

Needs PyTorch (Debian's 1.13, CPU) and NumPy. About 5 s.
"""
import argparse
import datetime
import os
import socket
import sys
import tempfile

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import quantization_hooks as qh

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hooks_on_cpu import cuda_is_to_for_cpu_devices, run_quantization_hook  # noqa: E402

F32 = np.float32
EPS = F32(np.finfo(np.float32).eps)  # 2^-23, MinMaxObserver's default eps

# Per tensor: name -> values. Scale 1/128 = (0.9921875 - (-1)) / 255 exactly,
# zero point 128, so +-1/256 and +-3/256 divide to exact .5 ties.
PER_TENSOR = [
    ("all zero", [0.0, 0.0, 0.0, 0.0]),
    ("all positive", [0.5, 1.0, 2.0, 3.0]),
    ("all negative", [-2.0, -1.0, -0.5, -0.25]),
    (".5 ties (scale 1/128, zero point 128)",
     [-1.0, -3 / 256, -1 / 256, 0.0, 1 / 256, 3 / 256, 0.9921875]),
    # min/scale = -1.5 -> zero point round(1.5) = 2; max/scale = 253.5 ->
    # 254; 254 + 2 = 256 before the clamp, 255 after it.
    ("the clamp at 255 (both ties round up)", [-0.01171875, 0.0, 1.98046875]),
    ("range below 255 eps (scale = eps)", [-1e-6, 0.0, 2e-6, 1e-5]),
    ("mixed", [-0.3, 0.7, 1.9, -2.2, 0.05]),
]
# Per channel: name -> (values, bucket_size).
PER_CHANNEL = [
    ("10 values, bucket_size 4: zero, positive, clamp channels; 2 padding zeros",
     ([0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 2.0, 3.0, -0.01171875, 1.98046875], 4)),
    ("8 values, bucket_size 4: len % bucket_size == 0 -> a whole zero channel",
     ([-1.0, -3 / 256, 3 / 256, 0.9921875, 1.0, 2.0, 3.0, 4.0], 4)),
]
# Whole hooks: per rank values (world size = len).
HOOK_INPUTS = [
    ("2 ranks", [[-1.0, -3 / 256, -1 / 256, 0.0, 1 / 256, 3 / 256, 0.9921875, 0.3, -0.7],
                 [0.5, 1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0]]),
    ("3 ranks (division by 3)", [[0.1, -0.2, 0.3, 0.7, -1.1],
                                 [1.0, 1.0, 1.0, 1.0, 1.0],
                                 [-0.01171875, 0.0, 1.98046875, 0.5, 0.25]]),
]
HOOK_BUCKET_SIZE = 4


def fmt(a):
    a = np.asarray(a)
    if a.dtype == np.float32:
        return "[" + ", ".join(repr(float(v)) for v in a.ravel()) + "]"
    return "[" + ", ".join(str(int(v)) for v in a.ravel()) + "]"


def hexes(a):
    return "[" + ", ".join("%08x" % v for v in np.asarray(a, F32).view(np.uint32).ravel()) + "]"


# ---------------------------------------------------------------------------
# The recipe of QUANT_NOTES.md, in NumPy f32 (checked against PyTorch below).
# ---------------------------------------------------------------------------

def model_qparams(x):
    """Rows of x are channels (one row: per tensor). Returns f32 scale and
    f32 zero point per row, as the hook allgathers them."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mn = np.minimum(x.min(axis=1), F32(0))
        mx = np.maximum(x.max(axis=1), F32(0))
        scale = np.maximum((mx - mn) / F32(255), EPS).astype(F32)
        zp = np.clip(F32(0) - np.round(mn / scale), 0, 255).astype(F32)
    return scale, zp


def model_quantize(x, scale, zp):
    q = np.round(x / scale[:, None]) + zp[:, None]          # f32, half to even
    return np.clip(q, 0, 255).astype(np.uint8)


def model_dequantize(q, scale, zp):
    return (scale[:, None] * (q.astype(F32) - zp[:, None])).astype(F32)


def model_hook(per_rank, bucket_size=None):
    """The hook's result (the same on every rank)."""
    world = len(per_rank)
    n = per_rank[0].size
    if bucket_size is None:
        rows = [x.reshape(1, -1) for x in per_rank]
    else:
        padded = n + bucket_size - n % bucket_size
        rows = [np.concatenate([x, np.zeros(padded - n, F32)]).reshape(-1, bucket_size)
                for x in per_rank]
    total = np.zeros_like(rows[0])
    for x in rows:                                           # rank order
        s, z = model_qparams(x)
        total = (total + model_dequantize(model_quantize(x, s, z), s, z)).astype(F32)
    return (total.ravel()[:n] / F32(world)).astype(F32)


# ---------------------------------------------------------------------------
# PyTorch
# ---------------------------------------------------------------------------

def torch_per_tensor(values):
    """What quantization_pertensor_hook does to its own bucket, step by step."""
    tensor = torch.tensor(values, dtype=torch.float32)
    obs = torch.quantization.MinMaxObserver()
    obs(tensor)
    s, z = obs.calculate_qparams()
    s_and_z = torch.FloatTensor([s, z])
    q = qh._quantize_per_tensor_cuda(tensor, s_and_z[0], s_and_z[1])
    d = qh._dequantize_per_tensor_cuda(q, s_and_z[0], s_and_z[1])
    return obs, s, z, s_and_z, q, d


def torch_per_channel(values, bucket_size):
    tensor = torch.tensor(values, dtype=torch.float32)
    chans = torch.nn.functional.pad(input=tensor, pad=(0, bucket_size - len(tensor) % bucket_size),
                                    mode="constant", value=0).view(-1, bucket_size)
    obs = torch.quantization.PerChannelMinMaxObserver()
    obs(chans)
    s, z = obs.calculate_qparams()
    s_and_z = torch.stack((s, z))
    q = qh._quantize_per_channel_cuda(chans, s_and_z[0], s_and_z[1])
    with cuda_is_to_for_cpu_devices():  # _dequantize_per_channel_cuda calls .cuda(y.device)
        d = qh._dequantize_per_channel_cuda(q, s_and_z[0], s_and_z[1])
    return chans, obs, s, z, s_and_z, q, d


class Bucket:
    """The one GradBucket method the quantization hooks call."""

    def __init__(self, tensor):
        self._tensor = tensor

    def buffer(self):
        return self._tensor


def hook_worker(rank, world, port, inputs, out_dir, random_buckets):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    results = {}
    for k, values in enumerate(inputs + random_buckets):
        mine = torch.tensor(values[rank], dtype=torch.float32)
        results["pt%d" % k] = run_quantization_hook(
            qh.quantization_pertensor_hook, None, Bucket(mine.clone())).wait().numpy()
        bucket_sizes = [HOOK_BUCKET_SIZE] if k < len(inputs) else [512, 64, 24]
        for bs in bucket_sizes:
            results["pc%d.%d" % (k, bs)] = run_quantization_hook(
                qh.quantization_perchannel_hook, None, Bucket(mine.clone()),
                bucket_size=bs).wait().numpy()
    np.savez(os.path.join(out_dir, "rank%d.npz" % rank), **results)
    dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_hooks(world, inputs, random_buckets):
    with tempfile.TemporaryDirectory() as d:
        mp.start_processes(hook_worker, args=(world, free_port(), inputs, d, random_buckets),
                           nprocs=world, join=True, start_method="fork")
        return [dict(np.load(os.path.join(d, "rank%d.npz" % r))) for r in range(world)]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--random-trials", type=int, default=3,
                        help="random 4-rank buckets of 6168 values checked against the recipe")
    args = parser.parse_args()
    failures = []

    def check(what, ours, ref):
        ours, ref = np.asarray(ours), np.asarray(ref)
        if ours.shape != ref.shape or ours.tobytes() != ref.tobytes():
            failures.append("%s: recipe %s, PyTorch %s" % (what, fmt(ours), fmt(ref)))

    print("PyTorch %s\n" % torch.__version__)
    print("## Per tensor: MinMaxObserver, calculate_qparams, _quantize/_dequantize_per_tensor_cuda\n")
    for name, values in PER_TENSOR:
        obs, s, z, s_and_z, q, d = torch_per_tensor(values)
        x = np.asarray(values, F32)
        print("- %s: x = %s" % (name, fmt(x)))
        print("  - min_val %r, max_val %r; scale %s (%s), dtype %s; zero_point %s, dtype %s"
              % (float(obs.min_val), float(obs.max_val), fmt(s.numpy()), hexes(s.numpy()),
                 s.dtype, fmt(z.numpy()), z.dtype))
        print("  - s_and_z (float32, allgathered) %s" % fmt(s_and_z.numpy()))
        print("  - q (uint8) %s" % fmt(q.numpy()))
        print("  - dequantized %s" % fmt(d.numpy()))
        ms, mz = model_qparams(x.reshape(1, -1))
        check(name + " s_and_z", np.concatenate([ms, mz]), s_and_z.numpy())
        mq = model_quantize(x.reshape(1, -1), ms, mz)
        check(name + " q", mq.ravel(), q.numpy())
        check(name + " dequantized", model_dequantize(mq, ms, mz).ravel(), d.numpy())

    print("\n## Per channel: pad, view(-1, bucket_size), PerChannelMinMaxObserver, "
          "_quantize/_dequantize_per_channel_cuda\n")
    for name, (values, bs) in PER_CHANNEL:
        chans, obs, s, z, s_and_z, q, d = torch_per_channel(values, bs)
        print("- %s: x = %s" % (name, fmt(np.asarray(values, F32))))
        print("  - channels (padded) %s" % chans.numpy().tolist())
        print("  - min_val %s, max_val %s" % (fmt(obs.min_val.numpy()), fmt(obs.max_val.numpy())))
        print("  - scale %s, dtype %s; zero_point %s, dtype %s"
              % (fmt(s.numpy()), s.dtype, fmt(z.numpy()), z.dtype))
        print("  - s_and_z = stack((scale, zero_point)): shape %s, dtype %s"
              % (tuple(s_and_z.shape), s_and_z.dtype))
        print("  - q (uint8) %s" % q.numpy().tolist())
        print("  - dequantized %s" % d.numpy().tolist())
        ms, mz = model_qparams(chans.numpy())
        check(name + " s_and_z", np.stack([ms, mz]), s_and_z.numpy())
        mq = model_quantize(chans.numpy(), ms, mz)
        check(name + " q", mq, q.numpy())
        check(name + " dequantized", model_dequantize(mq, ms, mz), d.numpy())

    print("\n## Whole hooks on gloo (hooks_on_cpu.run_quantization_hook), "
          "per-channel bucket_size %d\n" % HOOK_BUCKET_SIZE)
    rng = np.random.default_rng(0)
    random_buckets = []
    for _ in range(args.random_trials):
        # 6168 values as the comparison's bucket: mixed magnitudes, a zero
        # stretch (whole zero channels), tiny values.
        per_rank = []
        for _ in range(4):
            x = rng.standard_normal(6168).astype(F32) * F32(rng.uniform(0.01, 3))
            x[1000:1600] = 0
            x[2000:2100] *= F32(1e-6)
            per_rank.append(x.tolist())
        random_buckets.append(per_rank)
    for name, inputs in HOOK_INPUTS:
        world = len(inputs)
        res = run_hooks(world, [inputs], [])
        print("- %s: inputs %s" % (name, "; ".join(fmt(np.asarray(v, F32)) for v in inputs)))
        for key, label, bs in (("pt0", "quantization_pertensor_hook", None),
                               ("pc0.%d" % HOOK_BUCKET_SIZE, "quantization_perchannel_hook", HOOK_BUCKET_SIZE)):
            out = res[0][key]
            for r in range(1, world):
                if res[r][key].tobytes() != out.tobytes():
                    failures.append("%s %s: rank %d differs from rank 0" % (name, label, r))
            print("  - %s: every rank gets %s" % (label, fmt(out)))
            check("%s %s" % (name, label), model_hook([np.asarray(v, F32) for v in inputs], bs), out)
    res = run_hooks(4, [], random_buckets)
    for k, per_rank in enumerate(random_buckets):
        xs = [np.asarray(v, F32) for v in per_rank]
        check("random bucket %d per tensor" % k, model_hook(xs), res[0]["pt%d" % k])
        for bs in (512, 64, 24):
            check("random bucket %d per channel %d" % (k, bs), model_hook(xs, bs),
                  res[0]["pc%d.%d" % (k, bs)])

    print("\n## The recipe in QUANT_NOTES.md against PyTorch\n")
    if failures:
        for f in failures:
            print("FAIL: " + f)
        return 1
    print("OK: the f32 recipe reproduces every value above and %d random 4-rank buckets of "
          "6168 values (per tensor; per channel at bucket_size 512, 64, 24) bit for bit"
          % args.random_trials)
    return 0


if __name__ == "__main__":
    sys.exit(main())
