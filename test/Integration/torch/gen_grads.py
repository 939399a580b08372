# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Writes the inputs of the PyTorch-vs-ddp-run comparison (README.md here).

  gen_grads.py --out DIR [--world-size 4] [--steps 4] [--warmup-steps 2]
               [--ranks 1,2,4] [--seed 0]

DIR/step.mlir            the step function: gradients in, one
                         `ddp.allreduce mean` per gradient, averages out
                         (what DDP does before any compression pass)
DIR/manifest.json        tensors, what PowerSGD's rule decides for each at every
                         rank in --ranks, the state names our pass creates, the
                         quantization and noop scenarios (channels, padding,
                         bucket layout, PyTorch's allgather bytes), and the file
                         patterns below; every other script reads it
DIR/grads/rank{rank}.step{step}.arg{arg}.npy
                         the gradients of the compared steps (PyTorch's
                         compressed steps start_iter .. start_iter+steps-1)
DIR/grads/warmup.rank{rank}.step{step}.arg{arg}.npy
                         the gradients of the warm-up steps 0 .. start_iter-1
DIR/init/r{R}/ddp.q.{NAME}.npy
                         the initial Q (m x r, standard normal, not
                         orthogonalized) of compressed matrix K at rank R; both
                         sides orthogonalize it before use
DIR/init/ddp.step.step.npy
                         int64 0-d: start_iter + 1, "past the first compressed
                         step", so that our IR loads the Q above instead of
                         drawing a random one (see README.md)

Only numpy is needed. Everything is a pure function of the options.
"""
import argparse
import json
import os

import numpy as np

# (name, shape, kind). The order is the order of the step function's
# arguments; our pass numbers the compressed ones in this order.
TENSORS = [
    # Compressed at rank 1, 2 and 4.
    ("fc1.weight", (64, 32), "lowrank"),
    # 4-D: viewed as 16 x 72 by both sides.
    ("conv.weight", (16, 8, 3, 3), "lowrank"),
    # Same shape as fc1.weight but after another shape: PyTorch lays out its
    # flat Q buffer grouped by shape (fc1, fc2, conv, ...), our states are
    # named after the gradients (ddp.q.fc1.weight): the harness maps them.
    ("fc2.weight", (64, 32), "lowrank"),
    # A bias: n x 1, never compressed. Entries 0..7 are tiny (fp16 subnormal
    # after the division by the world size).
    ("fc1.bias", (64,), "vector"),
    # 256 > (16+16)*r*2 for r = 1, 2; at r = 4, 256 == 256: not compressed.
    ("mid.weight", (16, 16), "lowrank"),
    # 64 > 32 at r = 1; at r = 2, 64 == 64: not compressed.
    ("small.weight", (8, 8), "lowrank"),
    # Zero on every rank at every step (a frozen layer still in the bucket):
    # P is all-zero, PyTorch's Gram-Schmidt (r <= 2, epsilon 0) gives NaN,
    # ours gives 0 (a documented difference).
    ("frozen.weight", (32, 16), "zero"),
    # 16 == (4+4)*1*2: never compressed.
    ("tiny.weight", (4, 4), "lowrank"),
    # Uncompressed vector; at compared step 1 rank 0 sends 1e5 in element 0:
    # above fp16's range before the division by the world size, inside it
    # after. PyTorch's fp16_compress_hook casts first (inf), we divide first.
    ("scale", (8,), "overflow"),
]
OVERFLOW_VALUE = 1.0e5
OVERFLOW_STEP = 1
OVERFLOW_RANK = 0


def matrix_view(shape):
    """PyTorch's tensor.view(shape[0], -1)."""
    n = shape[0]
    return n, int(np.prod(shape)) // n if n else 0


def should_compress(n, m, rank, rate):
    """PyTorch's rule (powerSGD_hook._should_compress) and its counts."""
    r = min(n, m, rank)
    return (n + m) * r * rate < n * m, r, n * m, (n + m) * r


def gradients(rng, world_size, steps):
    """grads[step][rank][arg], float32."""
    bases = []
    for _, shape, kind in TENSORS:
        n, m = matrix_view(shape)
        if kind == "lowrank":
            k = min(n, m)
            u, _ = np.linalg.qr(rng.standard_normal((n, k)))
            v, _ = np.linalg.qr(rng.standard_normal((m, k)))
            # A clear spectral decay (ratio 0.55) so that the span PowerSGD
            # finds is well conditioned at r = 1, 2, 4 and float rounding is
            # not amplified.
            s = 4.0 * 0.55 ** np.arange(k)
            bases.append((u * s) @ v.T)
        else:
            bases.append(None)
    out = []
    for _ in range(steps):
        per_rank = []
        for _ in range(world_size):
            per_arg = []
            for (_, shape, kind), base in zip(TENSORS, bases):
                n, m = matrix_view(shape)
                if kind == "lowrank":
                    g = base + (0.2 / np.sqrt(m)) * rng.standard_normal((n, m))
                elif kind == "vector":
                    g = 0.5 * rng.standard_normal((n, m))
                    g[:8] *= 1e-5
                elif kind == "overflow":
                    g = rng.standard_normal((n, m))
                else:
                    g = np.zeros((n, m))
                per_arg.append(g.reshape(shape).astype(np.float32))
            per_rank.append(per_arg)
        out.append(per_rank)
    return out


def quantization_scenarios(tensors):
    """PyTorch's quantization hooks and noop_hook (QUANT_NOTES.md).

    The per-channel hook cuts the flat bucket into channels of bucket_size
    values, so its results depend on the bucket's layout: argument order,
    which is how ddp-bucketize lays out step.mlir (every gradient is an
    argument, ready at entry: the written order stays) and how DDP lays out
    its first bucket. find_unused_parameters=True stops DDP from rebuilding
    (reversing) it after the first step; torch_hooks_ref.py asserts the
    layout at every step. It pads by bucket_size - L % bucket_size: at least
    one zero, a whole zero channel when L % bucket_size == 0 (24 here)."""
    total = sum(t["matrix"][0] * t["matrix"][1] for t in tensors)
    layout = list(range(len(tensors)))
    out = {"quant_pertensor": {"hook": "quantization_pertensor_hook", "channels": 1,
                               "channel_size": total, "padding": 0}}
    for name, size in (("quant_perchannel", 512), ("quant_perchannel64", 64),
                       ("quant_perchannel24", 24)):
        padding = size - total % size
        out[name] = {"hook": "quantization_perchannel_hook", "bucket_size": size,
                     "channels": (total + padding) // size, "channel_size": size,
                     "padding": padding}
    out["noop"] = {"hook": "noop_hook"}
    if total % 24 != 0:
        raise SystemExit("quant_perchannel24 expects a bucket of a multiple of 24 values, "
                         "not %d" % total)
    for scenario in out.values():
        scenario["find_unused_parameters"] = True
        scenario["bucket_layout"] = layout
        if scenario["hook"] != "noop_hook":
            # What one rank contributes per step to the hook's two
            # allgathers: f32 scales and zero points, then the uint8 payload
            # (padding included).
            c = scenario["channels"]
            scenario["torch_allgather_bytes"] = [8 * c, c * scenario["channel_size"]]
    return out


def mlir_type(shape):
    return "tensor<%sxf32>" % "x".join(str(d) for d in shape)


def step_module():
    args = ", ".join('%%g%d: %s loc("%s")' % (i, mlir_type(s), name)
                     for i, (name, s, _) in enumerate(TENSORS))
    results = ", ".join(mlir_type(s) for _, s, _ in TENSORS)
    lines = ["// Generated by gen_grads.py: one averaged allreduce per gradient.",
             "func.func @step(%s) -> (%s) {" % (args, results)]
    for i, (_, s, _) in enumerate(TENSORS):
        lines.append("  %%r%d = ddp.allreduce mean %%g%d : %s" % (i, i, mlir_type(s)))
    lines.append("  return %s : %s" % (", ".join("%%r%d" % i for i in range(len(TENSORS))),
                                       results))
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=4,
                        help="compared (compressed) steps")
    parser.add_argument("--warmup-steps", type=int, default=2,
                        help="PyTorch's start_powerSGD_iter (>= 2: PyTorch refuses "
                             "less with error feedback or warm start)")
    parser.add_argument("--ranks", default="1,2,4",
                        help="PowerSGD ranks to prepare scenarios for")
    parser.add_argument("--min-compression-rate", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.warmup_steps < 2:
        parser.error("--warmup-steps must be >= 2 (PowerSGDState refuses "
                     "start_powerSGD_iter <= 1 with error feedback or warm start)")
    if args.steps <= OVERFLOW_STEP:
        parser.error("--steps must be > %d" % OVERFLOW_STEP)

    rng = np.random.default_rng(args.seed)
    for sub in ("grads", "init"):
        os.makedirs(os.path.join(args.out, sub), exist_ok=True)
    with open(os.path.join(args.out, "step.mlir"), "w") as f:
        f.write(step_module())

    main_grads = gradients(rng, args.world_size, args.steps)
    main_grads[OVERFLOW_STEP][OVERFLOW_RANK][len(TENSORS) - 1].flat[0] = OVERFLOW_VALUE
    warm_grads = gradients(rng, args.world_size, args.warmup_steps)
    for prefix, grads in (("", main_grads), ("warmup.", warm_grads)):
        for t, per_rank in enumerate(grads):
            for r, per_arg in enumerate(per_rank):
                for i, g in enumerate(per_arg):
                    np.save(os.path.join(args.out, "grads", "%srank%d.step%d.arg%d.npy"
                                         % (prefix, r, t, i)), g)

    start_iter = args.warmup_steps
    np.save(os.path.join(args.out, "init", "ddp.step.step.npy"),
            np.array(start_iter + 1, dtype=np.int64))

    tensors = []
    for name, shape, kind in TENSORS:
        n, m = matrix_view(shape)
        tensors.append({"name": name, "shape": list(shape), "matrix": [n, m], "kind": kind})

    scenarios = {"fp16": {"hook": "fp16_compress_hook"}}
    scenarios.update(quantization_scenarios(tensors))
    for rank in [int(x) for x in args.ranks.split(",") if x]:
        name = "psgd_r%d" % rank
        os.makedirs(os.path.join(args.out, "init", "r%d" % rank), exist_ok=True)
        per_tensor, states, before, after = [], {"ddp.step.step": []}, 0, 0
        qs, errors, k = {}, {}, 0
        for t in tensors:
            n, m = t["matrix"]
            compress, r, nb, na = should_compress(n, m, rank, args.min_compression_rate)
            before += nb
            after += na if compress else nb
            entry = {"compressed": compress, "r": r if compress else 0}
            if compress:
                # Our states are named after the gradient (its name
                # location): ddp.q.NAME, ddp.error.NAME.
                entry["state_id"] = t["name"]
                qs["ddp.q.%s" % t["name"]] = [m, r]
                errors["ddp.error.%s" % t["name"]] = [n, m]
                q0 = rng.standard_normal((m, r)).astype(np.float32)
                np.save(os.path.join(args.out, "init", "r%d" % rank,
                                     "ddp.q.%s.npy" % t["name"]), q0)
                k += 1
            per_tensor.append(entry)
        states.update(qs)
        states.update(errors)
        scenarios[name] = {
            "hook": "powerSGD_hook",
            "rank": rank,
            "start_iter": start_iter,
            "min_compression_rate": args.min_compression_rate,
            "use_error_feedback": True,
            "warm_start": True,
            "orthogonalization_epsilon": 0.0,
            "initial_step_counter": start_iter + 1,
            "tensors": per_tensor,
            # Our state name -> shape ([] for the i64 counter).
            "states": states,
            # Per compressed step, as PyTorch's compression_stats() adds them.
            "numel_before_per_step": before,
            "numel_after_per_step": after,
        }

    manifest = {
        "world_size": args.world_size,
        "steps": args.steps,
        "warmup_steps": args.warmup_steps,
        "seed": args.seed,
        "tensors": tensors,
        "grads": "grads/rank{rank}.step{step}.arg{arg}.npy",
        "warmup_grads": "grads/warmup.rank{rank}.step{step}.arg{arg}.npy",
        "initial_q": "init/r{R}/{name}.npy",
        "initial_step_counter": "init/ddp.step.step.npy",
        "overflow": {"arg": len(TENSORS) - 1, "index": 0, "step": OVERFLOW_STEP,
                     "rank": OVERFLOW_RANK, "value": OVERFLOW_VALUE},
        "scenarios": scenarios,
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
