# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""ddp_opt.torch.hook against PyTorch's own hooks, in one DDP job (gloo
and our runtime side by side, under mpirun), on the same gradients.

  mpirun -np N python3 hook_oracle.py powersgd|fp16 [--steps 5] [--start-iter 2]

Each parameter's gradient is fed exactly (the forward is sum(p * g), so
backward makes p.grad == g bit for bit, as test/Integration/torch does);
every rank can compute every rank's gradients (seeded by rank and step), so
the exact mean is known here in float64. Two DDP models, one with
PyTorch's hook and one with ours, take the same gradients every step.

powersgd: powerSGD_hook(rank 2, start_powerSGD_iter=S, error feedback,
  warm start) against ours with `insert-powersgd{rank=2 start-iter=S}`.
  Warm-up steps: both sides the exact mean within float32 rounding. At step
  S both sides get the same initial Q (PyTorch through its warm-start path,
  ours by writing the runtime's states; compare.py's recipe); then
  compressed tensors agree to rtol 1e-5 of the tensor's norm, and the
  uncompressed bias is the exact mean on our side.
checkpoint: ours (PowerSGD rank 2, start 2, error feedback) run for all
  steps, against a second DDP model whose HookState is new and restored
  from the first's state_dict (through torch.save and torch.load) taken
  after step 3: from there both give bitwise the same results.
quant-per-tensor, quant-per-channel: quantization_pertensor_hook and
  quantization_perchannel_hook(bucket_size=512) against ours with
  `ddp-compress{quantize=per-tensor}` and `{quantize=per-channel
  channel-size=512}` (the hook keeps each DDP bucket one bucket, in its
  order): bit for bit (QUANT_NOTES.md in test/Integration/torch says why). Both DDP models keep their first bucket
  layout (find_unused_parameters=True), which the per-channel rows follow.
mlir-hook: PyTorch's allreduce_hook against the same hook written in MLIR
  (examples/hooks/allreduce_hook.mlir, compress="hook=allreduce_hook
  hook-from=..."): both the exact mean within float32 rounding.
fp16: fp16_compress_hook against ours with `ddp-compress{narrow=fp16}`:
  both within fp16's rounding bound of the exact mean,
  (N + 1) * (2^-11 * S + 2^-25) per element, S = mean |g|.
mixed: two DDP buckets (fc1 600x512 and conv 64x64x8x8 each fill one of
  1 MiB alone) and compress="powersgd-rank=2 start-iter=0
  powersgd-buckets=^fc quantize=per-tensor": the hook's reports say fc1
  went to PowerSGD and conv to quantization; conv's result equals
  quantization_pertensor_hook's on its bucket bit for bit; fc1's is
  finite and not the exact mean (compressed).
plan: the same against ours with `ddp-compress{plan=PROFILE plan-world=N}`
  (--profile: a machine profile on which fp16 is the fastest for these
  gradients): the plan's decision is read from the hook's report, and the
  results are checked as fp16's.
Prints one OK line per check; exits 1 with the first failure.
"""
import argparse
import os
import re
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
from torch.distributed.algorithms.ddp_comm_hooks import quantization_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import ddp_opt.torch

# PyTorch 1.13's quantization hooks need CUDA and NCCL; this runs them
# unchanged on CPU and gloo (test/Integration/torch/hooks_on_cpu.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "torch"))
from hooks_on_cpu import run_quantization_hook  # noqa: E402

SHAPES = [("conv.weight", (16, 3, 3, 3)), ("fc1.weight", (64, 32)),
          ("fc1.bias", (64,)), ("fc2.weight", (24, 64))]
RANK = 2


class Feeder(nn.Module):
    def __init__(self):
        super().__init__()
        self.params = nn.ParameterDict()
        for name, shape in SHAPES:
            self.params[name.replace(".", "_")] = nn.Parameter(
                torch.zeros(shape))

    def forward(self, grads):
        return sum((p * g).sum() for p, g in zip(self.params.values(), grads))


def gradients(rank, step):
    """Low rank plus noise (a spectral gap, so rounding is not amplified)."""
    rng = np.random.default_rng(1000 * step + rank)
    out = []
    for _, shape in SHAPES:
        n, m = shape[0], int(np.prod(shape[1:], dtype=np.int64))
        if len(shape) == 1:
            g = rng.standard_normal(n)
        else:
            g = (rng.standard_normal((n, 3)) * [4.0, 2.0, 1.0]) @ \
                rng.standard_normal((3, m)) + 0.01 * rng.standard_normal((n, m))
        out.append(np.asarray(g, np.float32).reshape(shape))
    return out


def fail(message):
    print("FAIL: " + message, flush=True)
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["powersgd", "fp16", "checkpoint",
                                             "quant-per-tensor",
                                             "quant-per-channel", "mlir-hook",
                                             "mixed", "plan"])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--start-iter", type=int, default=2)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--profile", default=None,
                        help="plan: the machine profile (ddprt-calibrate)")
    args = parser.parse_args()
    if args.scenario == "plan" and not args.profile:
        parser.error("plan needs --profile")
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    world = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    ddp_opt.torch.init_process_group("gloo")
    if args.scenario == "mixed":
        return mixed(args, rank, world)
    start = args.start_iter

    quantized = args.scenario.startswith("quant")
    theirs, ours = Feeder(), Feeder()
    ddp_theirs = DDP(theirs, bucket_cap_mb=100,
                     find_unused_parameters=quantized)
    ddp_ours = DDP(ours, bucket_cap_mb=100, find_unused_parameters=quantized)
    names = [name for name, _ in SHAPES]
    matrices = {name: (shape[0], int(np.prod(shape[1:], dtype=np.int64)))
                for name, shape in SHAPES if len(shape) > 1}
    q_rng = np.random.default_rng(7)
    initial_q = {name: q_rng.standard_normal((m, RANK)).astype(np.float32)
                 for name, (n, m) in matrices.items()}

    if args.scenario == "powersgd":
        torch_state = psgd.PowerSGDState(
            process_group=None, matrix_approximation_rank=RANK,
            start_powerSGD_iter=start, min_compression_rate=2,
            use_error_feedback=True, warm_start=True,
            orthogonalization_epsilon=0, random_seed=0)
        param_name = {id(p): names[i] for i, p in
                      enumerate(theirs.params.values())}

        def torch_hook(state, bucket):
            # PyTorch's first compressed step takes OUR Q through its
            # warm-start path: its flat Q holds the compressed tensors in
            # bucket order grouped by matrix shape (powerSGD_hook's
            # shape_to_tensors).
            index = bucket.index()
            if state.iter == start and index not in state.p_memory_dict:
                groups = {}
                for p in bucket.parameters():
                    name = param_name[id(p)]
                    if name in matrices:
                        groups.setdefault(matrices[name], []).append(name)
                order = [name for group in groups.values() for name in group]
                state.q_memory_dict[index] = torch.from_numpy(np.concatenate(
                    [initial_q[name].reshape(-1) for name in order]))
                state.p_memory_dict[index] = torch.empty(
                    sum(matrices[name][0] * RANK for name in order))
            return psgd.powerSGD_hook(state, bucket)

        ddp_theirs.register_comm_hook(torch_state, torch_hook)
        our_index = {id(p): i for i, p in enumerate(ours.params.values())}
        counter = [None]
        our_state = ddp_opt.torch.HookState(
            ddp_ours, pipeline="builtin.module(insert-powersgd{rank=%d "
            "start-iter=%d})" % (RANK, start), cache_dir=args.cache_dir)

        def our_hook(state, bucket):
            # The same Q at the same step: our counter past the first
            # compressed step, so that the step loads the Q written here.
            if state.iteration == start:
                # The hook's thread is idle between steps' buckets only
                # once the steps before have run.
                state.drain()
                compiled = state._bucket_step(bucket, bucket.gradients())
                for spec in compiled.step.states:
                    if "start_iter" in spec and compiled.started:
                        # The rebuilt bucket's function was compiled at
                        # iteration 1; its counter went on from there.
                        counter[0] = int(state.runtime.read_state(
                            spec["name"], "i64", 1)[0])
                for spec in compiled.step.states:
                    if "start_iter" in spec:
                        state.runtime.write_state(
                            spec["name"], "i64", np.array([start + 1]))
                        compiled.started = True
                for p in bucket.parameters():
                    name = names[our_index[id(p)]]
                    if name in initial_q:
                        # The state is named after the gradient (the
                        # parameter's name in the model).
                        state.runtime.write_state(
                            "ddp.q." + state._names[id(p)], "f32",
                            initial_q[name])
            return ddp_opt.torch.hook(state, bucket)

        ddp_ours.register_comm_hook(our_state, our_hook)
    elif quantized:
        per_channel = args.scenario == "quant-per-channel"

        def torch_hook(state, bucket):
            if per_channel:
                return run_quantization_hook(
                    quantization_hooks.quantization_perchannel_hook, state,
                    bucket, bucket_size=512)
            return run_quantization_hook(
                quantization_hooks.quantization_pertensor_hook, state, bucket)

        ddp_theirs.register_comm_hook(None, torch_hook)
        our_state = ddp_opt.torch.HookState(
            ddp_ours, compress="quantize=per-channel channel-size=512"
            if per_channel else "quantize=per-tensor",
            cache_dir=args.cache_dir)
        ddp_ours.register_comm_hook(our_state, ddp_opt.torch.hook)
    elif args.scenario == "mlir-hook":
        ddp_theirs.register_comm_hook(None, default_hooks.allreduce_hook)
        hook_file = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                 "..", "..", "..", "examples", "hooks",
                                 "allreduce_hook.mlir")
        our_state = ddp_opt.torch.HookState(
            ddp_ours, compress="hook=allreduce_hook hook-from=%s" %
            os.path.normpath(hook_file), cache_dir=args.cache_dir)
        ddp_ours.register_comm_hook(our_state, ddp_opt.torch.hook)
    else:
        ddp_theirs.register_comm_hook(None, default_hooks.fp16_compress_hook)
        compress = "narrow=fp16" if args.scenario == "fp16" else \
            "plan=%s plan-world=%d" % (args.profile, world)
        our_state = ddp_opt.torch.HookState(ddp_ours, compress=compress,
                                            cache_dir=args.cache_dir)
        ddp_ours.register_comm_hook(our_state, ddp_opt.torch.hook)

    if args.scenario == "checkpoint":
        return checkpoint(args, rank, world)
    worst = 0.0
    for step in range(args.steps):
        mine = [torch.from_numpy(g) for g in gradients(rank, step)]
        every = [gradients(r, step) for r in range(world)]
        exact = [np.mean([e[k].astype(np.float64) for e in every], axis=0)
                 for k in range(len(SHAPES))]
        scale = [np.mean([np.abs(e[k].astype(np.float64)) for e in every],
                         axis=0) for k in range(len(SHAPES))]
        for model in (ddp_theirs, ddp_ours):
            model.zero_grad()
            model(mine).backward()
        for k, (name, _) in enumerate(SHAPES):
            t = list(theirs.params.values())[k].grad.numpy().astype(np.float64)
            o = list(ours.params.values())[k].grad.numpy().astype(np.float64)
            where = "step %d %s" % (step, name)
            if quantized:
                if not np.array_equal(o, t):
                    fail("%s: ours and PyTorch's %s hook differ in %d of %d "
                         "values (max %.3g)" % (
                             where, args.scenario, int((o != t).sum()),
                             o.size, np.abs(o - t).max()))
                if np.array_equal(o, exact[k]):
                    fail("%s: the quantized result is the exact mean" % where)
            elif args.scenario in ("fp16", "plan"):
                bound = (world + 1) * (2.0 ** -11 * scale[k] + 2.0 ** -25)
                for side, got in (("PyTorch", t), ("ours", o)):
                    excess = np.abs(got - exact[k]) - bound
                    if excess.max() > 0:
                        fail("%s: %s is %.3g beyond fp16's bound of the exact "
                             "mean" % (where, side, excess.max()))
            elif args.scenario == "mlir-hook" or step < start or \
                    name not in matrices:
                bound = (world + 1) * 2.0 ** -24 * scale[k] + 1e-30
                if (np.abs(o - exact[k]) > bound).any():
                    fail("%s: ours is not the exact mean (max error %.3g)" %
                         (where, np.abs(o - exact[k]).max()))
                if (step < start or args.scenario == "mlir-hook") and \
                        (np.abs(t - exact[k]) > bound).any():
                    fail("%s: PyTorch is not the exact mean (max error %.3g)"
                         % (where, np.abs(t - exact[k]).max()))
            else:
                difference = np.abs(o - t).max() / np.linalg.norm(t)
                worst = max(worst, difference)
                if difference > 1e-5:
                    fail("%s: ours and powerSGD_hook differ by %.3g of the "
                         "tensor's norm (rtol 1e-5)" % (where, difference))
                if np.abs(o - exact[k]).max() < 1e-6 * np.abs(exact[k]).max():
                    fail("%s: the compressed result is the exact mean: "
                         "nothing was compressed" % where)
    if rank == 0:
        if args.scenario == "mlir-hook":
            print("OK: mlir-hook: %d ranks x %d steps: allreduce_hook.mlir "
                  "and PyTorch's allreduce_hook both the exact mean" %
                  (world, args.steps), flush=True)
            print("OK: report: %s" % our_state.reports[0].strip().splitlines()
                  [-1], flush=True)
        elif quantized:
            print("OK: %s: %d ranks x %d steps: ours and PyTorch's hook bit "
                  "for bit" % (args.scenario, world, args.steps), flush=True)
        elif args.scenario == "fp16":
            print("OK: fp16: %d ranks x %d steps: ours and fp16_compress_hook "
                  "both within fp16 rounding of the exact mean" %
                  (world, args.steps), flush=True)
        elif args.scenario == "plan":
            report = our_state.reports[0]
            chosen = [line.split() for line in report.splitlines()
                      if line.strip().startswith("0 ") and "faster" in line]
            if not chosen:
                fail("the hook's report has no plan for bucket 0:\n" + report)
            decision = chosen[0][chosen[0].index("faster") - 2]
            print("OK: plan: bucket 0 planned as %s; %d ranks x %d steps: "
                  "ours and fp16_compress_hook both within fp16 rounding of "
                  "the exact mean" % (decision, world, args.steps), flush=True)
        else:
            print("OK: powersgd: %d warm-up steps exact; %d compressed steps "
                  "match powerSGD_hook (largest difference %.1e of a "
                  "tensor's norm, rtol 1e-5)" % (start, args.steps - start,
                                                  worst), flush=True)
            # DDP rebuilt its bucket after the first iteration (in the order
            # the gradients became ready): a new function, compiled again,
            # whose step counter went on from the iteration.
            layouts = sorted(tuple(names) for _, names, _ in
                             our_state._buckets)
            print("OK: %d bucket functions compiled (DDP's first bucket and "
                  "its rebuilt one), %d gradients each; the rebuilt one's "
                  "step counter was %s at iteration %d" % (
                      len(layouts), len(layouts[0]), counter[0], start),
                  flush=True)
            state = our_state.state_dict()
            print("OK: state_dict holds %s" % ", ".join(
                sorted(k for k in state["states"] if not
                       k.startswith("ddp.step."))), flush=True)
    dist.destroy_process_group()


class TwoBuckets(nn.Module):
    """Each parameter fills a DDP bucket (1 MiB) alone, in any order."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Parameter(torch.zeros(64, 64, 8, 8))
        self.fc1 = nn.Parameter(torch.zeros(600, 512))

    def forward(self, grads):
        return (self.conv * grads[0]).sum() + (self.fc1 * grads[1]).sum()


def mixed(args, rank, world):
    def grads(r, step):
        rng = np.random.default_rng(1000 * step + r)
        return [rng.standard_normal((64, 64, 8, 8)).astype(np.float32),
                rng.standard_normal((600, 512)).astype(np.float32)]

    theirs, ours = TwoBuckets(), TwoBuckets()
    ddp_theirs = DDP(theirs, bucket_cap_mb=1, find_unused_parameters=True)
    ddp_ours = DDP(ours, bucket_cap_mb=1, find_unused_parameters=True)
    conv = id(theirs.conv)

    def torch_hook(state, bucket):
        # The quantization hook on conv's bucket; fc1's is not compared.
        if any(id(p) == conv for p in bucket.parameters()):
            return run_quantization_hook(
                quantization_hooks.quantization_pertensor_hook, state, bucket)
        return default_hooks.allreduce_hook(state, bucket)

    ddp_theirs.register_comm_hook(None, torch_hook)
    state = ddp_opt.torch.HookState(
        ddp_ours, compress="powersgd-rank=2 start-iter=0 powersgd-buckets=^fc "
        "quantize=per-tensor", cache_dir=args.cache_dir)
    ddp_ours.register_comm_hook(state, ddp_opt.torch.hook)
    for step in range(args.steps):
        for model in (ddp_theirs, ddp_ours):
            model.zero_grad()
            model([torch.from_numpy(g) for g in grads(rank, step)]).backward()
        if not torch.equal(ours.conv.grad, theirs.conv.grad):
            fail("step %d conv: ours and quantization_pertensor_hook differ "
                 "(max %.3g)" % (step, (ours.conv.grad - theirs.conv.grad)
                                 .abs().max()))
        exact = np.mean([grads(r, step)[1].astype(np.float64)
                         for r in range(world)], axis=0)
        fc1 = ours.fc1.grad.numpy()
        if not np.isfinite(fc1).all():
            fail("step %d fc1: not finite" % step)
        if np.abs(fc1 - exact).max() < 1e-3 * np.abs(exact).max():
            fail("step %d fc1: the exact mean: PowerSGD did not take it"
                 % step)
    # Each bucket's report row: its gradient (a scheme's bucket names it in
    # brackets) and the decision.
    row = re.compile(r"^\s*0\s+(?:bucket of \d+ \[(\S+)\]|(\S+))\s+\S+\s+\S+\s+(\S+)")
    decisions = sorted(
        "%s %s" % (match.group(1) or match.group(2), match.group(3))
        for report in state.reports.values() for line in report.splitlines()
        for match in [row.match(line)] if match)
    if rank == 0:
        print("OK: mixed: %d ranks x %d steps: decisions %s; conv bit for "
              "bit quantization_pertensor_hook's, fc1 compressed" % (
                  world, args.steps, "; ".join(decisions)), flush=True)
    dist.destroy_process_group()


def checkpoint(args, rank, world):
    start = args.start_iter
    pipeline = "builtin.module(insert-powersgd{rank=%d start-iter=%d})" % (
        RANK, start)
    cut = start + 1
    if args.steps <= cut:
        fail("--steps must leave compressed steps after the checkpoint")

    def build():
        model = Feeder()
        ddp = DDP(model, bucket_cap_mb=100)
        state = ddp_opt.torch.HookState(ddp, pipeline=pipeline,
                                        cache_dir=args.cache_dir)
        ddp.register_comm_hook(state, ddp_opt.torch.hook)
        return model, ddp, state

    def run(model, ddp, step):
        ddp.zero_grad()
        ddp([torch.from_numpy(g) for g in gradients(rank, step)]).backward()
        return [p.grad.clone() for p in model.params.values()]

    first = build()
    path = os.path.join(args.cache_dir or ".", "ddp_opt.rank%d.pt" % rank)
    for step in range(cut):
        run(first[0], first[1], step)
    torch.save({"ddp_opt": first[2].state_dict()}, path)
    expected = [run(first[0], first[1], step)
                for step in range(cut, args.steps)]
    second = build()
    second[2].load_state_dict(torch.load(path)["ddp_opt"])
    for k, step in enumerate(range(cut, args.steps)):
        got = run(second[0], second[1], step)
        for name, a, b in zip([n for n, _ in SHAPES], expected[k], got):
            if not torch.equal(a, b):
                fail("step %d %s: the restored hook differs from the one "
                     "that ran on (max %.3g)" % (step, name,
                                                  (a - b).abs().max()))
    if rank == 0:
        saved = first[2].state_dict()
        print("OK: checkpoint after step %d (iteration %d, %d states) "
              "restored into a new hook: steps %d-%d bitwise the same" % (
                  cut - 1, saved["iteration"] - (args.steps - cut),
                  len(saved["states"]), cut, args.steps - 1), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
