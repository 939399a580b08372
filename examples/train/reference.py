#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Data-parallel training of the digits MLP in numpy: what ddp-run should do.

    reference.py --data DIR [--steps K] [--lr LR] [--config NAME ...]
                 [--initial-q runtime|numpy] [--seed S] [--write-run RUNDIR]
                 [--compare RUNDIR] [--print-every N]

Simulates `ranks` ranks running the MLIR step function (gen_mlp_step.py) on
the batches of prepare_digits.py: every step, rank r computes its gradients
on batch (step % NB), the gradients are averaged across ranks as the
configuration says, and every rank applies SGD. The configurations are
mlp.CONFIGS:

- exact: the mean allreduce.
- fp16: ddp-opt's --insert-fp16-compression: each rank scales by 1/W,
  casts to fp16, the fp16 values are summed (rounding after every
  addition), and the sum is cast back.
- powersgd-rR[-noef]: ddp-opt's --insert-powersgd (PyTorch's powerSGD_hook)
  with rank R, warm start, error feedback unless -noef, and `start-iter`
  mlp.POWERSGD_START_ITER; a matrix n x m (a bias is n x 1) is compressed iff
  n*m > (n+m)*r*2, the others take the exact mean. The initial Q is, by
  default, what the runtime draws (`ddp.random_normal`: Philox4x32-10, seed
  --seed, stream k for the k-th compressed gradient in allreduce order,
  counter (index, start-iter); see philox_normal), so that the simulation
  follows the same trajectory as ddp-run; --initial-q numpy draws it with
  numpy's generator instead (another, equally valid start).

Prints the mean loss across ranks (averaged over each group of
--print-every steps) and, per configuration, the test accuracy of the final
weights.

--compare RUNDIR checks ddp-run's outputs in train.sh's layout (see
write_run) against the simulation: the ranks' final weights must be
bitwise identical, and the losses and weights must match the simulation
to float32 rounding, as far as training does not amplify the rounding (see
mlp.COMPARE_*: the first 25 steps for every configuration, the whole run
for exact); exits 1 otherwise.

--write-run RUNDIR writes the simulation's results in the same layout
(with a summary.json holding ddp-run --summary-json's traffic keys and this
simulation's time), for testing report.py without ddp-run.
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np

import mlp


class ExactMean:
    """The plain mean allreduce."""

    def elements_sent(self, shapes):
        """Elements each rank sends per step (PyTorch's compression_stats())."""
        return sum(int(np.prod(s)) for s in shapes)

    def bytes_sent(self, shapes):
        return 4 * self.elements_sent(shapes)

    def reduce(self, grads):
        world = np.float32(len(grads))
        return {k: sum(g[k] for g in grads) / world for k in mlp.PARAMS}


class Fp16Mean(ExactMean):
    """fp16_compress_hook: scale by 1/W, cast to fp16, sum in fp16, cast back.

    Sends as many elements as the exact mean, in half the bytes. The runtime
    adds the ranks' values in the order of its ring (a different order for
    each chunk); this simulation adds them in rank order, so the two can
    differ by one fp16 rounding per step.
    """

    def bytes_sent(self, shapes):
        return 2 * self.elements_sent(shapes)

    def reduce(self, grads):
        scale = np.float32(1.0 / len(grads))
        out = {}
        for k in mlp.PARAMS:
            total = np.zeros_like(grads[0][k], dtype=np.float16)
            for g in grads:
                total = total + (g[k] * scale).astype(np.float16)
            out[k] = total.astype(np.float32)
        return out


# The runtime's random numbers (runtime/lib/Philox.h): Philox4x32-10 keyed
# by (seed, stream), counter (element block, step), Box-Muller.
_M32 = 0xFFFFFFFF


def _philox(counter, key):
    c, k = list(counter), list(key)
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k[0]) & _M32, p1 & _M32,
             ((p0 >> 32) ^ c[3] ^ k[1]) & _M32, p0 & _M32]
        k = [(k[0] + 0x9E3779B9) & _M32, (k[1] + 0xBB67AE85) & _M32]
    return c


def philox_normal(shape, seed, stream, step):
    """What `ddp.random_normal %step seed S stream K` gives on the CPU backend."""
    key = _philox([stream & _M32, stream >> 32, 0x5EED, 0], [seed & _M32, seed >> 32])[:2]
    count = int(np.prod(shape))
    samples = []
    for block in range((count + 3) // 4):
        bits = _philox([block & _M32, block >> 32, step & _M32, step >> 32], key)
        for pair in range(2):
            u1 = (bits[2 * pair] + 1.0) / 4294967296.0   # (0, 1]
            u2 = bits[2 * pair + 1] / 4294967296.0        # [0, 1)
            radius = math.sqrt(-2.0 * math.log(u1))
            samples += [radius * math.cos(2 * math.pi * u2), radius * math.sin(2 * math.pi * u2)]
    return np.array(samples[:count]).astype(np.float32).reshape(shape)


def orthogonalize(p):
    """Modified Gram-Schmidt over the columns (ddp.orthogonalize, epsilon 0),
    in float64 as the runtime does. A zero column stays zero."""
    p = p.astype(np.float64)
    for j in range(p.shape[1]):
        norm = np.linalg.norm(p[:, j])
        p[:, j] = p[:, j] / norm if norm > 0 else 0
        p[:, j + 1:] -= np.outer(p[:, j], p[:, j] @ p[:, j + 1:])
    return p.astype(np.float32)


class PowerSGD:
    """powerSGD_hook (layerwise, warm start), in ddp-opt's order of steps."""

    def __init__(self, rank, error_feedback, start_iter, seed, initial_q="runtime",
                 min_compression_rate=2.0):
        self.rank = rank
        self.error_feedback = error_feedback
        self.start_iter = start_iter
        self.seed = seed
        self.initial_q = initial_q
        self.rng = np.random.default_rng(seed)
        self.min_compression_rate = min_compression_rate
        self.step = 0
        self.q = {}        # name -> warm-start Q (m x r)
        self.errors = {}   # name -> [per-rank error (n x m)]

    def matrix_shape(self, shape):
        """The tensor viewed as shape[0] x prod(shape[1:])."""
        return shape[0], int(np.prod(shape[1:], dtype=np.int64))

    def compressed_rank(self, shape):
        """PowerSGD's r for a tensor, or 0 if it is left uncompressed."""
        n, m = self.matrix_shape(shape)
        r = min(n, m, self.rank)
        return r if n * m > (n + m) * r * self.min_compression_rate else 0

    def elements_sent(self, shapes):
        """Elements each rank sends per step after the warm-up: P and Q of
        each compressed tensor, the others whole."""
        total = 0
        for shape in shapes:
            n, m = self.matrix_shape(shape)
            r = self.compressed_rank(shape)
            total += (n + m) * r if r else n * m
        return total

    def bytes_sent(self, shapes):
        return 4 * self.elements_sent(shapes)

    def reduce(self, grads):
        out = ExactMean().reduce(grads)
        if self.step >= self.start_iter:
            stream = 0
            for k in mlp.ALLREDUCE_ORDER:
                shape = grads[0][k].shape
                r = self.compressed_rank(shape)
                if r:
                    out[k] = self.compress(k, [g[k].reshape(self.matrix_shape(shape)) for g in grads],
                                           r, stream).reshape(shape)
                    stream += 1
        self.step += 1
        return out

    def compress(self, name, mats, r, stream):
        """One tensor's PowerSGD mean over the ranks' matrices `mats`."""
        world = np.float32(len(mats))
        if self.step == self.start_iter:
            shape = (mats[0].shape[1], r)
            if self.initial_q == "runtime":
                self.q[name] = philox_normal(shape, self.seed, stream, self.step)
            else:
                self.q[name] = self.rng.standard_normal(shape).astype(np.float32)
            self.errors[name] = [np.zeros_like(m) for m in mats]
        q = orthogonalize(self.q[name])
        if self.error_feedback:
            mats = [m + e for m, e in zip(mats, self.errors[name])]
        p = orthogonalize(sum(m @ q for m in mats))        # P: summed, not averaged
        q = sum(m.T @ p for m in mats) / world             # Q: averaged
        approx = p @ q.T
        if self.error_feedback:
            self.errors[name] = [m - approx for m in mats]
        self.q[name] = q
        return approx


def flat_bucket(grads_of_rank):
    """The one bucket ddp-bucketize makes of the step's gradients, flat
    (GradBucket.buffer()): in the order backward produces them."""
    return np.concatenate([grads_of_rank[k].ravel() for k in mlp.ALLREDUCE_ORDER])


def unflatten(flat, like):
    out, offset = {}, 0
    for k in mlp.ALLREDUCE_ORDER:
        size = like[k].size
        out[k] = flat[offset:offset + size].reshape(like[k].shape)
        offset += size
    return out


class Quantization:
    """quantization_pertensor_hook / quantization_perchannel_hook (PyTorch
    1.13) over the one bucket, in float32 and in PyTorch's order of
    operations (docs/pytorch-comparison.md): per channel of K elements (the
    whole bucket per tensor; zero padding to C = N // K + 1 channels per
    channel), min-max scale and zero point, uint8 payload, dequantized and
    summed in rank order, divided by W."""

    def __init__(self, channel_size):
        self.channel_size = channel_size

    def layout(self, n):
        if self.channel_size is None:
            return 1, n
        return n // self.channel_size + 1, self.channel_size

    def elements_sent(self, shapes):
        c, k = self.layout(sum(int(np.prod(s)) for s in shapes))
        return 2 * c + c * k

    def bytes_sent(self, shapes):
        c, k = self.layout(sum(int(np.prod(s)) for s in shapes))
        return 8 * c + c * k

    def reduce(self, grads):
        f32 = np.float32
        flats = [flat_bucket(g) for g in grads]
        n = flats[0].size
        c, k = self.layout(n)
        parts = []
        for x in flats:
            x = np.concatenate([x, np.zeros(c * k - n, f32)]).reshape(c, k)
            low = np.minimum(x.min(axis=1), f32(0))
            high = np.maximum(x.max(axis=1), f32(0))
            scale = np.maximum((high - low) / f32(255), f32(2.0 ** -23))
            zero = np.clip(0 - np.rint(low / scale).astype(np.int32), 0, 255).astype(f32)
            q = np.clip(np.rint(x / scale[:, None]) + zero[:, None], 0, 255).astype(np.uint8)
            parts.append((scale, zero, q))
        total = np.zeros((c, k), f32)
        for scale, zero, q in parts:
            total = total + scale[:, None] * (q.astype(f32) - zero[:, None])
        return unflatten(total.ravel()[:n] / f32(len(grads)), grads[0])


class SignEF:
    """examples/hooks/sign_ef_hook.mlir: each rank sends mean(|m|) and
    sign(m) of m = g + e (one f32, one i8 per element) and keeps
    e = m - mean(|m|) * sign(m); the result is the ranks' mean of their
    scaled signs."""

    def __init__(self):
        self.errors = None

    def elements_sent(self, shapes):
        return 1 + sum(int(np.prod(s)) for s in shapes)

    def bytes_sent(self, shapes):
        return 4 + sum(int(np.prod(s)) for s in shapes)

    def reduce(self, grads):
        f32 = np.float32
        flats = [flat_bucket(g) for g in grads]
        if self.errors is None:
            self.errors = [np.zeros_like(x) for x in flats]
        total = np.zeros_like(flats[0])
        for r, x in enumerate(flats):
            m = x + self.errors[r]
            # The compiled loop adds in order (cumsum does; sum is pairwise).
            scale = np.cumsum(np.abs(m), dtype=f32)[-1] / f32(m.size)
            signs = np.where(m >= 0, f32(1), f32(-1))
            self.errors[r] = m - signs * scale
            total = total + signs * scale
        return unflatten(total / f32(len(grads)), grads[0])


class TopK:
    """ddp-opt --insert-topk: each rank adds its residual to its flat
    bucket (m = g + e), sends the k = max(1, floor(N * ratio)) elements of
    m largest in magnitude (ties in index order) and their indices (i32),
    and keeps the rest as its residual; the ranks' values are added into
    zeros in rank order at their indices and divided by W."""

    def __init__(self, ratio):
        self.ratio = ratio
        self.errors = None

    def count(self, shapes):
        n = sum(int(np.prod(s)) for s in shapes)
        return max(1, min(n, int(np.floor(n * self.ratio))))

    def elements_sent(self, shapes):
        return 2 * self.count(shapes)

    def bytes_sent(self, shapes):
        return 8 * self.count(shapes)

    def reduce(self, grads):
        f32 = np.float32
        flats = [flat_bucket(g) for g in grads]
        n = flats[0].size
        k = max(1, min(n, int(np.floor(n * self.ratio))))
        if self.errors is None:
            self.errors = [np.zeros_like(x) for x in flats]
        total = np.zeros_like(flats[0])
        for r, x in enumerate(flats):
            m = x + self.errors[r]
            chosen = np.argsort(-np.abs(m), kind="stable")[:k]
            rest = m.copy()
            rest[chosen] = 0
            self.errors[r] = rest
            total[chosen] += m[chosen]
        return unflatten(total / f32(len(grads)), grads[0])


def make_reducer(config, seed, initial_q="runtime"):
    """The gradient averaging of a configuration in mlp.CONFIGS."""
    spec = mlp.CONFIGS[config]
    if spec["method"] == "exact":
        return ExactMean()
    if spec["method"] == "fp16":
        return Fp16Mean()
    if spec["method"] == "quantization":
        return Quantization(spec["channel_size"])
    if spec["method"] == "sign-ef":
        return SignEF()
    if spec["method"] == "topk":
        return TopK(spec["ratio"])
    powersgd = PowerSGD(spec["rank"], spec["error_feedback"], mlp.POWERSGD_START_ITER, seed,
                        initial_q)
    if spec.get("ranks_per_node"):
        return NodeMeans(powersgd, spec["ranks_per_node"])
    return powersgd


class NodeMeans:
    """ddp-compress two-level=node-mean: the exact mean within each node of
    `per_node` consecutive ranks, then `inner` across the nodes' means (each
    node one participant, its error feedback the node's)."""

    def __init__(self, inner, per_node):
        self.inner = inner
        self.per_node = per_node

    def elements_sent(self, shapes):
        return self.inner.elements_sent(shapes)

    def bytes_sent(self, shapes):
        return self.inner.bytes_sent(shapes)

    def reduce(self, grads):
        k = self.per_node
        return self.inner.reduce([ExactMean().reduce(grads[i:i + k])
                                  for i in range(0, len(grads), k)])


def write_run(write_dir, losses, params, summary):
    """ddp-run's outputs as train.sh asks for them: loss.r{rank}.s{step}.npy
    (result 4 of every step), final.r{rank}.o{result}.npy (all results of
    the last step) and summary.json."""
    steps, ranks = losses.shape
    for rank in range(ranks):
        for step in range(steps):
            np.save(os.path.join(write_dir, f"loss.r{rank}.s{step}.npy"), losses[step, rank])
        results = [params[k] for k in mlp.PARAMS] + [losses[-1, rank]]
        for index, value in enumerate(results):
            np.save(os.path.join(write_dir, f"final.r{rank}.o{index}.npy"), value)
    with open(os.path.join(write_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


def train(config, data_dir, steps, lr, seed, initial_q="runtime", write_dir=None):
    """Runs one configuration; returns (per-step, per-rank losses, final weights)."""
    meta, params, _, _ = mlp.load_data(data_dir)
    ranks, num_batches = meta["ranks"], meta["num_batches"]
    batches = [[tuple(np.load(p) for p in mlp.batch_paths(data_dir, r, i)) for r in range(ranks)]
               for i in range(num_batches)]
    reducer = make_reducer(config, seed, initial_q)
    losses = np.zeros((steps, ranks), np.float32)
    compute_seconds = 0.0
    for step in range(steps):
        start = time.perf_counter()
        grads = []
        for rank, (x, y) in enumerate(batches[step % num_batches]):
            losses[step, rank], g = mlp.local_step(params, x, y)
            grads.append(g)
        params = mlp.sgd(params, reducer.reduce(grads), lr)
        compute_seconds += time.perf_counter() - start
    if write_dir:
        # ddp-run --summary-json's keys (traffic of the last step, after
        # PowerSGD's warm-up); the time is this simulation's (all ranks).
        shapes = [p.shape for p in params.values()]
        write_run(write_dir, losses, params, dict(
            world_size=ranks, steps=steps, ms_per_step=1000 * compute_seconds / steps,
            elements_sent_per_step=reducer.elements_sent(shapes),
            bytes_sent_per_step=reducer.bytes_sent(shapes)))
    return losses, params


def compare(run_dir, config, losses, params, simulated=None):
    """Checks ddp-run's outputs in run_dir/config against the simulation
    (of `simulated`, by default `config` itself).

    Prints one line; returns the failures (empty if it matches)."""
    directory = os.path.join(run_dir, config)
    steps, ranks = losses.shape
    failures = []
    final = [{k: np.load(os.path.join(directory, f"final.r{r}.o{i}.npy"))
              for i, k in enumerate(mlp.PARAMS)} for r in range(ranks)]
    identical = all(np.array_equal(final[r][k], final[0][k])
                    for r in range(1, ranks) for k in mlp.PARAMS)
    if not identical:
        failures.append("the ranks' final weights are not bitwise the same")

    def difference(got, want):
        return float(np.abs(got - want).max() / np.abs(want).max())

    run_losses = np.array([[np.load(os.path.join(directory, f"loss.r{r}.s{s}.npy"))
                            for r in range(ranks)] for s in range(steps)])
    early = min(steps, mlp.COMPARE_EARLY_STEPS)
    early_error = difference(run_losses[:early], losses[:early])
    method = mlp.CONFIGS[simulated or config]["method"]
    early_rtol = mlp.COMPARE_EARLY_RTOL_BY_METHOD.get(method, mlp.COMPARE_EARLY_RTOL)
    if not early_error <= early_rtol:
        failures.append(f"losses of steps 0-{early - 1} differ by {early_error:.1e} "
                        f"(tolerance {early_rtol:.0e})")
    loss_error = difference(run_losses, losses)
    weight_errors = {k: difference(final[0][k], params[k]) for k in mlp.PARAMS}
    final_rtol = mlp.COMPARE_FINAL_RTOL.get(method)
    if final_rtol is not None:
        for name, error in [("losses", loss_error)] + list(weight_errors.items()):
            if not error <= final_rtol:
                failures.append(f"{name} of the whole run differ by {error:.1e} "
                                f"(tolerance {final_rtol:.0e})")
    print(f"compare {config:<16} {'FAIL' if failures else 'ok  '} ranks bitwise identical: "
          f"{'yes' if identical else 'NO'}; |ddp-run - numpy| / max|numpy|: "
          f"losses 0-{early - 1} {early_error:.1e}, all {loss_error:.1e}; final "
          + ", ".join(f"{k} {e:.1e}" for k, e in weight_errors.items())
          + ("" if final_rtol is not None else " (not checked)"))
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="directory written by prepare_digits.py")
    parser.add_argument("--steps", type=int, default=mlp.STEPS)
    parser.add_argument("--lr", type=float, default=mlp.LR)
    parser.add_argument("--seed", type=int, default=mlp.SEED, help="seed of PowerSGD's initial Q")
    parser.add_argument("--initial-q", choices=["runtime", "numpy"], default="runtime",
                        help="draw PowerSGD's initial Q as the runtime does, or with numpy")
    parser.add_argument("--config", nargs="+", default=list(mlp.CONFIGS),
                        help="configurations (%s); NAME=CONFIG simulates CONFIG for the run "
                        "directory NAME (train.sh's auto=powersgd-r1)" % ", ".join(mlp.CONFIGS))
    parser.add_argument("--print-every", type=int, default=0,
                        help="print the mean loss of every N steps (default: one epoch; "
                             "-1: do not print losses)")
    parser.add_argument("--write-run", metavar="RUNDIR", help="write results in train.sh's layout")
    parser.add_argument("--compare", metavar="RUNDIR",
                        help="check ddp-run's outputs in train.sh's layout against the simulation")
    args = parser.parse_args()

    meta, _, x_test, y_test = mlp.load_data(args.data)
    every = args.print_every or meta["num_batches"]
    summary = []
    failures = []
    for entry in args.config:
        config, _, simulated = entry.partition("=")
        simulated = simulated or config
        if simulated not in mlp.CONFIGS:
            parser.error(f"--config: '{simulated}' is not one of {', '.join(mlp.CONFIGS)}")
        write_dir = os.path.join(args.write_run, config) if args.write_run else None
        if write_dir:
            os.makedirs(write_dir, exist_ok=True)
        losses, params = train(simulated, args.data, args.steps, args.lr, args.seed,
                               args.initial_q, write_dir)
        mean_losses = losses.mean(axis=1)
        if every > 0:
            print(f"== {config}")
            for start in range(0, args.steps, every):
                print(f"steps {start:4d}-{min(start + every, args.steps) - 1:4d}  "
                      f"loss {mean_losses[start:start + every].mean():.4f}")
        if args.compare:
            failures += [f"{config}: {f}" for f in compare(args.compare, config, losses, params,
                                                                simulated)]
        last = mean_losses[-meta["num_batches"]:].mean()
        summary.append((config, 100 * mlp.accuracy(params, x_test, y_test), last))
    print()
    print("| config | test accuracy % | mean loss, last epoch |")
    print("|---|---:|---:|")
    for config, acc, last in summary:
        print(f"| {config} | {acc:.2f} | {last:.4f} |")
    if failures:
        print("\n".join(["", "ddp-run does not match the numpy simulation:"] + failures),
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
