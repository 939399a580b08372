# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Compares our step function (run by ddp-run) with PyTorch's DDP hooks
(torch_hooks_ref.py) on the gradients of gen_grads.py. README.md here.

  compare.py outputs MANIFEST SCENARIO --torch TORCHDIR/SCENARIO --ours OURSDIR
             [--warmup] [--ours-stats PATTERN] [--rtol 1e-5]
             [--exchange fused|pytorch] [--max-ulp 0] [--same-as OURSDIR2]
      (--warmup: PyTorch's warm-up steps, TORCHDIR/SCENARIO/warmup, against
      our run of the warm-up gradients from a zero step counter;
      --exchange: how our quantization exchanges scales and payload, one
      allgather or PyTorch's two; --same-as: another run of ours that must
      have given bitwise the same results, e.g. the other exchange)
  compare.py states  MANIFEST SCENARIO COMPILED.mlir
  compare.py report  MANIFEST SCENARIO --torch TORCHDIR/SCENARIO REPORT.json

OURSDIR holds what ddp-run wrote with
  --output=OURSDIR/rank{rank}.step{step}.out{result}.npy
  --dump-state=OURSDIR/state/rank{rank}.{name}.npy
and PATTERN (with {rank}) what it wrote with --summary-json=PATTERN: per rank,
the runtime's counters (elements before/after compression, and elements and
collectives per role). For PowerSGD they are checked role by role against the
manifest, then, without the warmup role, against compression_stats() (see
check_stats); for fp16, one fp16 allreduce of the whole bucket per step; for
quantization, only 'compressed' collectives (1 or 2 per step, --exchange),
their bytes printed beside what PyTorch's hook sent (it has no counters:
torch_hooks_ref.py records its allgathers); for noop, nothing at all.

Tolerances (every check says which it used):
- fp16: each side's result differs from the exact mean sum_i g_i / W by at
  most (N + 1) * (u * S + 2^-25) per element, u = 2^-11 (fp16 unit roundoff),
  S = sum_i |g_i| / W, N ranks: at most two roundings of each rank's
  pre-divided value to fp16 (PyTorch casts, then divides in fp16; we divide
  in f32, then cast: one), N - 1 roundings of partial sums, each at most
  u * S, and 2^-25 (half an fp16 subnormal step) per rounding below fp16's
  normal range. Both sides are checked against the exact mean; they then
  differ by at most twice that.
- PowerSGD, from the same Q, compressed tensors: max |ours - torch| <=
  rtol * ||torch||_F per tensor and step (float32 rounding through a few
  matmuls and two orthogonalizations; the gradients have a spectral gap so it
  is not amplified; measured ~1e-7 relative, rtol 1e-5). States: the error
  the same way; Q through Q Q^T (for r > 2 PyTorch orthogonalizes with QR,
  we with Gram-Schmidt: same span, a basis that differs by an r x r rotation;
  outputs depend on the span only), and Q itself for r <= 2.
- PowerSGD, uncompressed tensors: ours against the plain mean,
  (N + 1) * 2^-24 * S per element. PyTorch against the plain mean with a
  bound that grows with its error buffer (below): it is not compared with
  ours directly.
- Warm-up (plain mean in f32): (N + 1) * 2^-24 * S per element.
- Quantization (per tensor, per channel): bitwise (--max-ulp 0). Our
  passes do PyTorch's f32 operations in PyTorch's order (QUANT_NOTES.md;
  quant_vectors.py shows that this recipe reproduces PyTorch bit for bit),
  so any difference is an operation done differently, which a tolerance
  would hide: a reciprocal instead of a division, a fused multiply-add,
  another summation order. Differences are counted and their largest
  absolute and ulp sizes printed. PyTorch itself is checked against the
  exact mean with the quantization bound sum_r scale_r / (2 W) per element
  (plus f32 rounding), scale_r being rank r's scale of that element's
  channel, so a harness that fed the hook something else would show.
- noop: each rank's own gradient, bitwise, on both sides.

Deliberate differences asserted (docs/pytorch-comparison.md, docs/ir-design.md):
- An all-zero compressed tensor: P is all-zero; with epsilon 0 and r <= 2
  PyTorch's Gram-Schmidt divides 0 by 0 (NaN output, NaN error, NaN Q), ours
  gives exactly 0. For r > 2 PyTorch's QR gives 0 too: no difference.
- Error buffers only for compressed tensors: our dump has no state for the
  uncompressed ones. PyTorch keeps one for the whole bucket; for an
  uncompressed tensor it is, in exact arithmetic, the ACCUMULATED
  local-minus-mean sum_{s<t} (g_i(s) - mean g(s)) (a random walk that sums to
  0 over ranks), and its f32 rounding leaks into PyTorch's later averages (a
  note prints how far, in units of the plain mean's rounding).
- fp16: an element above fp16's range before the division by W but inside
  it after: PyTorch's fp16_compress_hook casts first (inf), we divide first
  (finite, within the bound of the exact mean).
"""
import argparse
import json
import os
import re
import sys

import numpy as np

U16 = 2.0 ** -11
SUB16 = 2.0 ** -25
U32 = 2.0 ** -24
FP16_MAX = 65504.0
EPS32 = 2.0 ** -23  # MinMaxObserver's default eps, torch.finfo(torch.float32).eps
QUANT_HOOKS = ("quantization_pertensor_hook", "quantization_perchannel_hook")


class Checker:
    def __init__(self):
        self.failures = []
        self.notes = []
        self.worst = {}

    def fail(self, msg):
        self.failures.append(msg)

    def ratio(self, key, value, relative=None):
        """The worst value of a check, as a fraction of its tolerance; with
        `relative`, also the worst measured difference relative to its scale."""
        worst, rel = self.worst.get(key, (0.0, None))
        if relative is not None:
            rel = max(rel or 0.0, float(relative))
        self.worst[key] = (max(worst, float(value)), rel)

    def finish(self, title):
        for note in self.notes:
            print("note: " + note)
        for key in sorted(self.worst):
            worst, rel = self.worst[key]
            print("worst %s: %.3g%s" % (key, worst, "" if rel is None
                                        else " (max relative difference %.3g)" % rel))
        if self.failures:
            for f in self.failures[:40]:
                print("FAIL: " + f)
            if len(self.failures) > 40:
                print("... %d more" % (len(self.failures) - 40))
            return 1
        print("OK: " + title)
        return 0


def load_manifest(path):
    with open(path) as f:
        return json.load(f), os.path.dirname(os.path.abspath(path))


def npy(path):
    if not os.path.exists(path):
        raise SystemExit("FAIL: missing %s" % path)
    return np.load(path)


def grads_of(manifest, mdir, warmup, steps):
    pattern = manifest["warmup_grads" if warmup else "grads"]
    return [[[np.load(os.path.join(mdir, pattern.format(rank=r, step=t, arg=a))).astype(np.float64)
              for a in range(len(manifest["tensors"]))]
             for r in range(manifest["world_size"])] for t in range(steps)]


def outputs_of(d, world, steps, nargs):
    return [[[npy(os.path.join(d, "rank%d.step%d.out%d.npy" % (r, t, a))) for a in range(nargs)]
             for r in range(world)] for t in range(steps)]


def check_same_on_ranks(c, name, outs):
    for t, per_rank in enumerate(outs):
        for a in range(len(per_rank[0])):
            for r in range(1, len(per_rank)):
                if per_rank[r][a].tobytes() != per_rank[0][a].tobytes():
                    c.fail("%s: step %d result %d differs between rank 0 and rank %d "
                           "(must be bitwise identical)" % (name, t, a, r))


def frob(x):
    return float(np.linalg.norm(np.asarray(x, np.float64).ravel()))


def close(c, what, ours, ref, scale, rtol, key="outputs", atol=1e-7):
    ours = np.asarray(ours, np.float64)
    ref = np.asarray(ref, np.float64)
    if ours.shape != ref.shape:
        c.fail("%s: shape %s, PyTorch %s" % (what, ours.shape, ref.shape))
        return
    if not np.all(np.isfinite(ours)) or not np.all(np.isfinite(ref)):
        c.fail("%s: non-finite values (ours %d, PyTorch %d)"
               % (what, np.sum(~np.isfinite(ours)), np.sum(~np.isfinite(ref))))
        return
    err = float(np.max(np.abs(ours - ref))) if ours.size else 0.0
    tol = rtol * scale + atol
    c.ratio("|ours - torch| / (rtol x norm): PowerSGD %s" % key, err / tol,
            err / scale if scale > 0 else None)
    if err > tol:
        c.fail("%s: max |ours - torch| = %.3g > %.3g (rtol %.0e x %.3g)" % (what, err, tol, rtol, scale))


# ---------------------------------------------------------------------------
# outputs
# ---------------------------------------------------------------------------

def check_fp16(c, manifest, grads, torch_outs, ours_outs):
    world = manifest["world_size"]
    ov = manifest["overflow"]
    documented = compared = differ = 0
    for t, per_rank in enumerate(grads):
        for a in range(len(manifest["tensors"])):
            g = np.stack([per_rank[r][a] for r in range(world)])
            exact = g.sum(0) / world
            s = np.abs(g).sum(0) / world
            bound = 1.01 * (world + 1) * (U16 * s + SUB16)
            overflow_before_division = np.any(np.abs(g) >= FP16_MAX + 16, axis=0) & \
                np.all(np.abs(g) / world <= FP16_MAX, axis=0) & (np.abs(exact) + bound <= FP16_MAX)
            torch0 = torch_outs[t][0][a].astype(np.float64)
            for r in range(world):
                ours = ours_outs[t][r][a].astype(np.float64)
                what = "fp16 step %d rank %d %s" % (t, r, manifest["tensors"][a]["name"])
                if not np.all(np.isfinite(ours)):
                    c.fail("%s: our result is not finite" % what)
                    continue
                e = np.abs(ours - exact) / bound
                c.ratio("|ours - exact mean| / fp16 bound", e.max())
                if np.any(e > 1):
                    i = np.unravel_index(np.argmax(e), e.shape)
                    c.fail("%s: |ours - exact| = %.3g > bound %.3g at %s"
                           % (what, abs(ours[i] - exact[i]), bound[i], i))
            tfin = np.isfinite(torch0)
            doc = ~tfin & overflow_before_division
            if np.any(~tfin & ~overflow_before_division):
                c.fail("fp16 step %d %s: PyTorch gives non-finite values where no overflow "
                       "is expected" % (t, manifest["tensors"][a]["name"]))
            if np.any(doc):
                documented += int(doc.sum())
                c.notes.append(
                    "documented difference (fp16 overflow): step %d %s[%s]: a rank sends %g; "
                    "PyTorch casts before dividing by %d -> %s; we divide first -> %r (exact mean %r)"
                    % (t, manifest["tensors"][a]["name"], ",".join(map(str, np.argwhere(doc)[0])),
                       np.abs(g).max(axis=0)[doc][0], world, torch0[doc][0],
                       float(ours_outs[t][0][a][doc][0]), float(exact[doc][0])))
            e = np.where(tfin, np.abs(torch0 - exact), 0) / bound
            c.ratio("|torch - exact mean| / fp16 bound", e.max())
            if np.any(e > 1):
                c.fail("fp16 step %d %s: PyTorch exceeds the bound (the bound is wrong)"
                       % (t, manifest["tensors"][a]["name"]))
            ours0 = ours_outs[t][0][a].astype(np.float64)
            d = np.where(tfin, np.abs(ours0 - torch0), 0) / (2 * bound)
            c.ratio("|ours - torch| / (2 x fp16 bound)", d.max())
            compared += int(tfin.sum())
            differ += int(np.sum(tfin & (ours0 != torch0)))
    c.notes.append("fp16: %d of %d finite results differ from PyTorch's in the last bits "
                   "(PyTorch casts, then divides in fp16; we divide in f32, then cast)"
                   % (differ, compared))
    expected = 1 if (ov["step"] < len(grads) and ov["value"] / world <= FP16_MAX) else 0
    if documented != expected:
        c.fail("expected %d element(s) of the documented fp16 overflow difference, saw %d"
               % (expected, documented))


def check_warmup(c, manifest, grads, torch_outs, ours_outs):
    world = manifest["world_size"]
    for t, per_rank in enumerate(grads):
        for a in range(len(manifest["tensors"])):
            g = np.stack([per_rank[r][a] for r in range(world)])
            exact = g.sum(0) / world
            bound = 1.01 * (world + 1) * U32 * np.abs(g).sum(0) / world + 1e-45
            for side, outs in (("ours", ours_outs), ("torch", torch_outs)):
                e = np.abs(outs[t][0][a].astype(np.float64) - exact) / bound
                c.ratio("|%s - exact mean| / f32 bound (warm-up)" % side, e.max())
                if not np.all(e <= 1):
                    c.fail("warm-up step %d %s: %s is not the mean (%.3g x bound)"
                           % (t, manifest["tensors"][a]["name"], side, np.nanmax(e)))


def check_powersgd(c, manifest, scenario, grads, torch_outs, ours_outs, rtol):
    world = manifest["world_size"]
    tensors = manifest["tensors"]
    gs_path = scenario["orthogonalization_epsilon"] == 0 and scenario["rank"] <= 2
    nan_steps = 0
    err_acc = {a: 0.0 for a in range(len(tensors))}
    cum, drift = {}, [0.0, 0.0]
    for a, entry in enumerate(scenario["tensors"]):
        name = tensors[a]["name"]
        zero = all(not np.any(per_rank[r][a]) for per_rank in grads for r in range(world))
        for t, per_rank in enumerate(grads):
            torch0 = torch_outs[t][0][a]
            if entry["compressed"] and zero:
                for r in range(world):
                    if np.any(ours_outs[t][r][a] != 0):
                        c.fail("%s step %d rank %d: an all-zero gradient must give exactly 0"
                               % (name, t, r))
                if gs_path:
                    # The documented difference: PyTorch 0/0 in Gram-Schmidt.
                    if not np.all(np.isnan(torch0)):
                        c.fail("%s step %d: expected PyTorch's NaN (zero column, epsilon 0, "
                               "r <= 2); the documented difference no longer holds" % (name, t))
                    nan_steps += 1
                elif np.any(torch0 != 0):
                    c.fail("%s step %d: PyTorch's QR path should give 0" % (name, t))
                continue
            if entry["compressed"]:
                for r in range(world):
                    close(c, "%s step %d rank %d" % (name, t, r), ours_outs[t][r][a], torch0,
                          frob(torch0), rtol)
                continue
            # Uncompressed: ours is the plain mean (f32 bound). PyTorch averages
            # g_i + e_i with its error of the uncompressed slices, which in exact
            # arithmetic is the accumulated local-minus-mean e_i(t) =
            # sum_{s<t} (g_i(s) - mean g(s)), summing to 0 over ranks; in f32 its
            # rounding stays in the result, so PyTorch's bound grows with sum|e_i|.
            g = np.stack([per_rank[r][a] for r in range(world)])
            exact = g.mean(0)
            s = np.abs(g).sum(0) / world
            e_abs = np.abs(err_acc[a]).sum(0) / world
            cum[a] = cum.get(a, 0) + s + e_abs
            bound_ours = 1.01 * (world + 1) * U32 * s + 1e-45
            bound_torch = 1.01 * (world + 2) * U32 * cum[a] + 1e-45
            for r in range(world):
                e = np.abs(ours_outs[t][r][a] - exact) / bound_ours
                c.ratio("|ours - plain mean| / f32 bound (uncompressed)", e.max())
                if np.any(e > 1):
                    c.fail("%s step %d rank %d: ours is not the plain mean (%.3g x bound)"
                           % (name, t, r, e.max()))
            e = np.abs(torch0 - exact) / bound_torch
            c.ratio("|torch - plain mean| / bound with its error buffer (uncompressed)", e.max())
            if np.any(e > 1):
                c.fail("%s step %d: PyTorch is off the plain mean by more than its error "
                       "buffer's rounding explains (%.3g x bound)" % (name, t, e.max()))
            unit = U32 * s + 1e-45
            drift[0] = max(drift[0], float(np.max(np.abs(torch0 - exact) / unit)))
            drift[1] = max(drift[1], float(np.max(np.abs(ours_outs[t][0][a] - exact) / unit)))
            err_acc[a] = err_acc[a] + (g - exact)
    c.notes.append("uncompressed tensors: max |result - plain mean| / (2^-24 sum_i |g_i| / W): "
                   "PyTorch %.3g (the rounding of its error buffer), ours %.3g" % tuple(drift))
    if nan_steps:
        c.notes.append("documented difference (zero column): %d step(s) of an all-zero "
                       "compressed gradient: PyTorch NaN (epsilon 0, r = %d, Gram-Schmidt), "
                       "ours exactly 0" % (nan_steps, scenario["rank"]))


def check_powersgd_state(c, manifest, scenario, grads, torch_dir, ours_dir, rtol):
    world = manifest["world_size"]
    tensors = manifest["tensors"]
    gs_path = scenario["orthogonalization_epsilon"] == 0 and scenario["rank"] <= 2
    sdir_o = os.path.join(ours_dir, "state")
    sdir_t = os.path.join(torch_dir, "state")
    for r in range(world):
        names = set()
        if os.path.isdir(sdir_o):
            for f in os.listdir(sdir_o):
                m = re.match(r"rank(\d+)\.(.*)\.npy$", f)
                if m and int(m.group(1)) == r:
                    names.add(m.group(2))
        if names != set(scenario["states"]):
            c.fail("rank %d: our states are %s, expected %s (no error buffer for an "
                   "uncompressed tensor)" % (r, sorted(names), sorted(scenario["states"])))
            continue
        steps = len(grads)
        counter = int(npy(os.path.join(sdir_o, "rank%d.ddp.step.step.npy" % r)))
        if counter != scenario["initial_step_counter"] + steps:
            c.fail("rank %d: our step counter is %d, expected %d"
                   % (r, counter, scenario["initial_step_counter"] + steps))
        it = int(npy(os.path.join(sdir_t, "rank%d.torch.iter.npy" % r)))
        if it != scenario["start_iter"] + steps:
            c.fail("rank %d: PyTorch's iter is %d, expected %d" % (r, it, scenario["start_iter"] + steps))
        for a, entry in enumerate(scenario["tensors"]):
            name = tensors[a]["name"]
            zero = all(not np.any(per_rank[rr][a]) for per_rank in grads for rr in range(world))
            if not entry["compressed"]:
                continue
            k = entry["state_id"]
            for kind in ("error", "q"):
                key = "ddp.%s.%s" % (kind, k)
                ours = npy(os.path.join(sdir_o, "rank%d.%s.npy" % (r, key))).astype(np.float64)
                ref = npy(os.path.join(sdir_t, "rank%d.%s.npy" % (r, key))).astype(np.float64)
                what = "rank %d %s (%s)" % (r, key, name)
                if zero:
                    # The error stays 0; a Q that the zero gradient collapsed
                    # is never stored (documented difference): ours keeps the
                    # last usable one, PyTorch stores 0 (or NaN, epsilon 0).
                    if kind == "error" and np.any(ours != 0):
                        c.fail("%s: must be 0 for an all-zero gradient" % what)
                    if kind == "q" and not (np.all(np.isfinite(ours)) and np.any(ours != 0)):
                        c.fail("%s: must be a usable Q (finite, not all zero) for an "
                               "all-zero gradient" % what)
                    if gs_path and not np.all(np.isnan(ref)):
                        c.fail("%s: expected PyTorch's NaN" % what)
                    continue
                if kind == "error":
                    last = grads[-1][r][a].reshape(ref.shape)
                    close(c, what, ours, ref, frob(ref) + frob(last), rtol, "error state")
                else:
                    scale = frob(ref) ** 2
                    close(c, what + " Q Q^T", ours @ ours.T, ref @ ref.T, scale, rtol, "Q state (Q Q^T)")
                    if scenario["rank"] <= 2:  # both sides Gram-Schmidt: same basis
                        close(c, what, ours, ref, frob(ref), rtol, "Q state (r <= 2, same basis)")
    # PyTorch's error of uncompressed tensors: kept per rank, zero in sum.
    for a, entry in enumerate(scenario["tensors"]):
        if entry["compressed"]:
            continue
        errs = [npy(os.path.join(sdir_t, "rank%d.torch.error.arg%d.npy" % (r, a))).astype(np.float64)
                for r in range(world)]
        total = sum(errs)
        scale = sum(frob(e) for e in errs)
        if scale == 0:
            c.fail("%s: PyTorch's error of an uncompressed tensor is 0 on every rank; "
                   "the documented difference is not exercised" % tensors[a]["name"])
        elif np.max(np.abs(total)) > 1e-5 * scale:
            c.fail("%s: PyTorch's uncompressed errors do not sum to 0" % tensors[a]["name"])
    c.notes.append("documented difference (error buffers): PyTorch keeps local-minus-mean "
                   "errors for %d uncompressed tensor(s), summing to 0; we keep none"
                   % sum(not e["compressed"] for e in scenario["tensors"]))


def ordered_f32(x):
    """f32 values as integers whose difference counts ulps (+0 == -0)."""
    i = np.ascontiguousarray(x, np.float32).view(np.int32).astype(np.int64)
    return np.where(i < 0, -(2 ** 31) - i, i)


def bucket_channels(manifest, scenario, per_arg):
    """A rank's gradients as DDP's flat bucket (the manifest's layout), padded
    and cut into channels as the quantization hook does: channels x size."""
    flat = np.concatenate([np.asarray(per_arg[a], np.float64).ravel()
                           for a in scenario["bucket_layout"]])
    flat = np.concatenate([flat, np.zeros(scenario["padding"])])
    return flat.reshape(scenario["channels"], scenario["channel_size"])


def unbucket(manifest, scenario, flat):
    """The inverse of bucket_channels without the padding: per argument."""
    out, offset = {}, 0
    for a in scenario["bucket_layout"]:
        shape = manifest["tensors"][a]["shape"]
        n = int(np.prod(shape))
        out[a] = flat[offset:offset + n].reshape(shape)
        offset += n
    return [out[a] for a in range(len(manifest["tensors"]))]


def check_quantization(c, manifest, scenario, grads, torch_outs, ours_outs, max_ulp):
    world = manifest["world_size"]
    nargs = len(manifest["tensors"])
    check_same_on_ranks(c, "PyTorch", torch_outs)
    compared = differ = 0
    worst_abs, worst_ulp = 0.0, 0
    zero_channels = []
    for t, per_rank in enumerate(grads):
        # PyTorch against the exact mean, within the quantization bound.
        chans = [bucket_channels(manifest, scenario, per_rank[r]) for r in range(world)]
        scales = []
        for x in chans:
            lo = np.minimum(x.min(axis=1), 0)
            hi = np.maximum(x.max(axis=1), 0)
            scales.append(np.maximum((hi - lo) / 255.0, EPS32))
            zero_channels.append(int(np.sum(~np.any(x != 0, axis=1))))
        half_step = sum(np.repeat(sc, scenario["channel_size"]) for sc in scales) / (2 * world)
        magnitude = sum(np.abs(x).ravel() for x in chans) / world
        bound = unbucket(manifest, scenario, 1.001 * half_step +
                         (world + 2) * U32 * (magnitude + 2 * half_step) + 1e-45)
        for a in range(nargs):
            exact = sum(per_rank[r][a] for r in range(world)) / world
            e = np.abs(torch_outs[t][0][a].astype(np.float64) - exact) / bound[a]
            c.ratio("|torch - exact mean| / quantization bound", e.max())
            if not np.all(e <= 1):
                c.fail("%s step %d %s: PyTorch is off the exact mean by %.3g x the quantization "
                       "bound (the harness fed the hook something else?)"
                       % (scenario["hook"], t, manifest["tensors"][a]["name"], np.nanmax(e)))
        # Ours against PyTorch: bitwise, or within --max-ulp.
        for r in range(world):
            for a in range(nargs):
                ours = np.asarray(ours_outs[t][r][a], np.float32)
                ref = np.asarray(torch_outs[t][r][a], np.float32)
                what = "step %d rank %d %s" % (t, r, manifest["tensors"][a]["name"])
                if ours.shape != ref.shape:
                    c.fail("%s: shape %s, PyTorch %s" % (what, ours.shape, ref.shape))
                    continue
                compared += ours.size
                if ours.tobytes() == ref.tobytes():
                    continue
                bad = ours.view(np.int32) != ref.view(np.int32)
                differ += int(bad.sum())
                finite = np.isfinite(ours) & np.isfinite(ref)
                if not np.all(finite[bad]):
                    c.fail("%s: non-finite values differ from PyTorch's" % what)
                ulp = np.abs(ordered_f32(ours) - ordered_f32(ref))[finite]
                worst_ulp = max(worst_ulp, int(ulp.max()) if ulp.size else 0)
                diff = np.abs(ours.astype(np.float64) - ref)[finite]
                worst_abs = max(worst_abs, float(diff.max()) if diff.size else 0.0)
                if ulp.size and ulp.max() > max_ulp:
                    i = np.unravel_index(np.argmax(np.where(finite, np.abs(
                        ordered_f32(ours) - ordered_f32(ref)), -1)), ours.shape)
                    c.fail("%s: %d element(s) differ from PyTorch, worst %d ulp at %s: ours %r, "
                           "PyTorch %r" % (what, int(bad.sum()), int(ulp.max()), list(i),
                                           float(ours[i]), float(ref[i])))
    zmin, zmax = min(zero_channels), max(zero_channels)
    if scenario["channels"] > 1:
        c.notes.append("channels: %d of %d values (%d padding zeros); %s all-zero per rank and "
                       "step (scale = eps)" % (scenario["channels"], scenario["channel_size"],
                                               scenario["padding"],
                                               zmin if zmin == zmax else "%d-%d" % (zmin, zmax)))
    c.notes.append("ours vs PyTorch: %d of %d elements differ, max |diff| %.3g, max %d ulp "
                   "(tolerance: %s)" % (differ, compared, worst_abs, worst_ulp,
                                        "bitwise" if max_ulp == 0 else "%d ulp" % max_ulp))


def check_noop(c, manifest, grads, torch_outs, ours_outs):
    """noop_hook: every rank keeps its own gradient, bit for bit."""
    same = {"ours": 0, "PyTorch": 0}
    total = 0
    for t, per_rank in enumerate(grads):
        for r in range(manifest["world_size"]):
            for a, g in enumerate(per_rank[r]):
                own = g.astype(np.float32).tobytes()
                total += 1
                for side, outs in (("ours", ours_outs), ("PyTorch", torch_outs)):
                    if np.asarray(outs[t][r][a], np.float32).tobytes() == own:
                        same[side] += 1
                    else:
                        c.fail("step %d rank %d %s: %s is not the rank's own gradient"
                               % (t, r, manifest["tensors"][a]["name"], side))
    c.notes.append("noop: the rank's own gradient, bitwise: ours %d of %d results, PyTorch %d"
                   % (same["ours"], total, same["PyTorch"]))


def check_bitwise_same(c, name, outs, other_outs):
    for t, per_rank in enumerate(outs):
        for r, per_arg in enumerate(per_rank):
            for a, x in enumerate(per_arg):
                if x.tobytes() != other_outs[t][r][a].tobytes():
                    c.fail("step %d rank %d result %d differs from %s's (must be bitwise "
                           "identical)" % (t, r, a, name))


ROLES = ("gradient", "uncompressed", "warmup", "compressed")


def per_step_figures(manifest, scenario):
    """Elements one rank sends per step, by role, and the elements PowerSGD's
    projection covers, from the manifest (PyTorch's compression rule)."""
    tensors = manifest["tensors"]
    total = sum(t["matrix"][0] * t["matrix"][1] for t in tensors)
    if scenario["hook"] != "powerSGD_hook":
        return total, {}, 0
    sent = dict.fromkeys(ROLES, 0)
    projected = 0
    for t, entry in zip(tensors, scenario["tensors"]):
        n, m = t["matrix"]
        if entry["compressed"]:
            # P (n x r) and Q (m x r).
            sent["compressed"] += (n + m) * entry["r"]
            projected += n * m
        else:
            sent["uncompressed"] += n * m
    return total, sent, projected


def load_summary(pattern, rank):
    path = pattern.replace("{rank}", str(rank))
    if not os.path.exists(path):
        raise SystemExit("FAIL: missing %s" % path)
    with open(path) as f:
        return json.load(f)


def check_summary_roles(c, r, ours, want_sent, want_collectives):
    """Elements and collectives per role as expected (absent: 0); a role in
    want_collectives but not in want_sent may send any number of elements."""
    for role in ROLES:
        got = (ours["elements_sent"][role], ours["collectives"][role])
        want = (want_sent.get(role, got[0] if role in want_collectives else 0),
                want_collectives.get(role, 0))
        if got != want:
            c.fail("rank %d: role %s: we sent %d elements in %d collectives, expected %d in %d"
                   % ((r, role) + got + want))
    if ours["elements_sent_total"] != sum(ours["elements_sent"].values()):
        c.fail("rank %d: elements_sent_total %d is not the sum over roles %d"
               % (r, ours["elements_sent_total"], sum(ours["elements_sent"].values())))


def check_stats(c, manifest, scenario, torch_dir, pattern, world, warmup, steps):
    """Our counters (ddp-run --summary-json) against compression_stats().

    The runtime counts differently from PyTorch (docs/pytorch-comparison.md):
    `elements_before_compression` gets n*m for every projected matrix plus
    every element of every collective that is not compressed (P, Q), and
    `elements_after_compression` every element of every collective. So its
    warm-up steps count (W, W), ratio 1, where PyTorch counts nothing. The
    PyTorch-comparable pair is ours minus the warmup (and gradient) role;
    uncompressed tensors of compressed steps count n*m on both sides of both.
    Every per-role figure is checked against the manifest first."""
    total, per_step, projected = per_step_figures(manifest, scenario)
    if warmup:
        want_sent = {"warmup": total * steps}
        want_collectives = {"warmup": steps}
    else:
        want_sent = {k: v * steps for k, v in per_step.items() if v}
        # One bucket (torch_hooks_ref.py asserts it): PyTorch allreduces its
        # uncompressed tensors, its Ps and its Qs once each per step; so do
        # we, the Ps and the Qs both as compressed collectives.
        want_collectives = {k: (2 if k == "compressed" else 1) * steps
                            for k, v in per_step.items() if v}
    for r in range(world):
        with open(os.path.join(torch_dir, "stats.rank%d.json" % r)) as f:
            t = json.load(f)
        if warmup:
            want = (0, 0)
            _, tb, ta = t["compression_stats_after_warmup"]
            if (tb, ta) != want:
                c.fail("PyTorch counted %s during warm-up" % ((tb, ta),))
        else:
            want = (t["elements_before_compression"], t["elements_after_compression"])
            per = (scenario["numel_before_per_step"] * t["compressed_steps"],
                   scenario["numel_after_per_step"] * t["compressed_steps"])
            if want != per:
                c.fail("rank %d: PyTorch's compression_stats %s, the manifest's rule says %s"
                       % (r, want, per))
        if not pattern:
            continue
        ours = load_summary(pattern, r)
        if (ours["rank"], ours["world_size"], ours["steps"]) != (r, world, steps):
            c.fail("rank %d: summary says rank %s of %s, %s steps (expected %d steps)"
                   % (r, ours["rank"], ours["world_size"], ours["steps"], steps))
        check_summary_roles(c, r, ours, want_sent, want_collectives)
        raw = (ours["elements_before_compression"], ours["elements_after_compression"])
        sent = ours["elements_sent"]
        # The runtime's definition, from its own per-role figures.
        rule = (sum(sent[k] for k in ROLES if k != "compressed")
                + projected * (0 if warmup else steps), sum(sent.values()))
        if raw != rule:
            c.fail("rank %d: our counters %s, the runtime's rule on our per-role figures "
                   "says %s" % (r, raw, rule))
        skip = sent["warmup"] + sent["gradient"]
        comparable = (raw[0] - skip, raw[1] - skip)
        if comparable != tuple(want):
            c.fail("rank %d: our element counters %s minus the warmup/gradient roles (%d) = %s, "
                   "PyTorch's compression_stats() %s" % (r, raw, skip, comparable, tuple(want)))
        if r == 0:
            c.notes.append("our counters (cumulative over the run): %s; without the warmup role "
                           "(%d elements): %s" % (raw, skip, comparable))
    c.notes.append("compression_stats (cumulative over compressed steps): %s" % (tuple(want),))


def check_fp16_stats(c, manifest, pattern, world, steps):
    """fp16: no compression counters on PyTorch's side; DDP sends its one
    bucket as one fp16 allreduce per step, so should we (after
    --ddp-bucketize): numel elements, 2 bytes each."""
    total, _, _ = per_step_figures(manifest, {"hook": "fp16_compress_hook"})
    for r in range(world):
        ours = load_summary(pattern, r)
        check_summary_roles(c, r, ours, {"gradient": total * steps}, {"gradient": steps})
        if (ours["elements_sent_per_step"], ours["bytes_sent_per_step"]) != (total, 2 * total):
            c.fail("rank %d: %d elements, %d bytes per step; expected %d fp16 elements"
                   % (r, ours["elements_sent_per_step"], ours["bytes_sent_per_step"], total))
    c.notes.append("fp16 traffic per rank and step: %d elements, %d bytes, %d collective(s)"
                   % (ours["elements_sent_per_step"], ours["bytes_sent_per_step"],
                      ours["collectives"]["gradient"] // steps))


def check_quant_stats(c, manifest, scenario, torch_dir, pattern, world, steps, exchange):
    """Quantization: everything we send is 'compressed' (no other role), in one
    collective per step (fused) or two (PyTorch's exchange: scales and zero
    points, then the payload). PyTorch's hook has no counters:
    torch_hooks_ref.py recorded the allgathers it issued, checked here against
    the manifest; our bytes are printed beside them, not required equal."""
    want_bytes = scenario["torch_allgather_bytes"]
    per_step = 2 if exchange == "pytorch" else 1
    for r in range(world):
        with open(os.path.join(torch_dir, "stats.rank%d.json" % r)) as f:
            gathers = json.load(f)["allgathers"]
        if len(gathers) != steps or any([g["bytes"] for g in step] != want_bytes
                                        for step in gathers):
            c.fail("rank %d: PyTorch's hook sent %s per step, the manifest says %s"
                   % (r, [[g["bytes"] for g in step] for step in gathers], want_bytes))
        ours = load_summary(pattern, r)
        # The quantization scheme sends everything: no other role.
        check_summary_roles(c, r, ours, {}, {"compressed": per_step * steps})
        if r == 0:
            ours_bytes = ours["bytes_sent"]["compressed"] / steps
            c.notes.append(
                "traffic per rank and step: ours %g bytes (%g elements) in %g collective(s) "
                "(exchange=%s); PyTorch's hook %d bytes in 2 allgathers (%d f32 scale/zero-point "
                "bytes, %d uint8 payload bytes)"
                % (ours_bytes, ours["elements_sent"]["compressed"] / steps,
                   ours["collectives"]["compressed"] / steps, exchange, sum(want_bytes),
                   want_bytes[0], want_bytes[1]))


def check_noop_stats(c, pattern, world):
    for r in range(world):
        ours = load_summary(pattern, r)
        check_summary_roles(c, r, ours, {}, {})
        if r == 0:
            c.notes.append("noop traffic per rank: ours %d collectives, %d bytes; noop_hook "
                           "sends nothing" % (sum(ours["collectives"].values()),
                                              sum(ours["bytes_sent"].values())))


def cmd_outputs(args):
    manifest, mdir = load_manifest(args.manifest)
    scenario = manifest["scenarios"][args.scenario]
    world = manifest["world_size"]
    nargs = len(manifest["tensors"])
    powersgd = scenario["hook"] == "powerSGD_hook"
    quant = scenario["hook"] in QUANT_HOOKS
    noop = scenario["hook"] == "noop_hook"
    if args.warmup and not powersgd:
        raise SystemExit("--warmup is for PowerSGD scenarios")
    steps = scenario["start_iter"] if args.warmup else manifest["steps"]
    grads = grads_of(manifest, mdir, args.warmup, steps)
    torch_outs = outputs_of(os.path.join(args.torch, "warmup") if args.warmup else args.torch,
                            world, steps, nargs)
    ours_outs = outputs_of(args.ours, world, steps, nargs)
    c = Checker()
    if not noop:  # noop: every rank keeps its own gradient
        check_same_on_ranks(c, "ours", ours_outs)
    if args.warmup:
        check_warmup(c, manifest, grads, torch_outs, ours_outs)
    elif powersgd:
        check_powersgd(c, manifest, scenario, grads, torch_outs, ours_outs, args.rtol)
        check_powersgd_state(c, manifest, scenario, grads, args.torch, args.ours, args.rtol)
    elif quant:
        check_quantization(c, manifest, scenario, grads, torch_outs, ours_outs, args.max_ulp)
    elif noop:
        check_noop(c, manifest, grads, torch_outs, ours_outs)
    else:
        check_fp16(c, manifest, grads, torch_outs, ours_outs)
    if args.same_as:
        check_bitwise_same(c, args.same_as, ours_outs, outputs_of(args.same_as, world, steps, nargs))
        c.notes.append("bitwise identical to %s" % os.path.basename(os.path.normpath(args.same_as)))
    if powersgd:
        check_stats(c, manifest, scenario, args.torch, args.ours_stats, world, args.warmup, steps)
    elif args.ours_stats and quant:
        check_quant_stats(c, manifest, scenario, args.torch, args.ours_stats, world, steps,
                          args.exchange)
    elif args.ours_stats and noop:
        check_noop_stats(c, args.ours_stats, world)
    elif args.ours_stats:
        check_fp16_stats(c, manifest, args.ours_stats, world, steps)
    if not args.ours_stats:
        c.notes.append("no --ours-stats: our element counters were not compared")
    return c.finish("%s%s: %d ranks x %d steps match PyTorch %s" % (
        args.scenario, " warm-up" if args.warmup else "", world, steps,
        json.load(open(os.path.join(args.torch, "stats.rank0.json")))["torch"]))


def cmd_states(args):
    """The states in the compiled module are the ones the manifest expects
    (names, shapes: the Q of matrix K is m x r), so --set-state feeds the
    right Q to the right matrix."""
    manifest, _ = load_manifest(args.manifest)
    scenario = manifest["scenarios"][args.scenario]
    got = {}
    with open(args.mlir) as f:
        for line in f:
            m = re.match(r"\s*ddp\.state @([\w.]+) : (\S+)", line)
            if m:
                t = m.group(2)
                got[m.group(1)] = [] if t == "i64" else \
                    [int(d) for d in re.match(r"tensor<(.*)xf32>", t).group(1).split("x")]
    c = Checker()
    if got != scenario["states"]:
        c.fail("states %s, expected %s" % (got, scenario["states"]))
    return c.finish("%s: %d states as expected" % (args.scenario, len(got)))


def cmd_report(args):
    """ddp-compression-report's per-step counts times PyTorch's compressed
    steps equal PyTorch's cumulative compression_stats()."""
    manifest, _ = load_manifest(args.manifest)
    with open(args.report) as f:
        report = json.load(f)
    c = Checker()
    for r in range(manifest["world_size"]):
        with open(os.path.join(args.torch, "stats.rank%d.json" % r)) as f:
            t = json.load(f)
        k = t["compressed_steps"]
        got = (report["numel_before"] * k, report["numel_after"] * k)
        want = (t["elements_before_compression"], t["elements_after_compression"])
        if got != want:
            c.fail("rank %d: report %s x %d steps = %s, PyTorch %s"
                   % (r, (report["numel_before"], report["numel_after"]), k, got, want))
    return c.finish("%s: %d -> %d elements per step (%.2fx), as PyTorch's compression_stats()"
                    % (args.scenario, report["numel_before"], report["numel_after"],
                       report["numel_before"] / report["numel_after"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("outputs")
    p.add_argument("manifest")
    p.add_argument("scenario")
    p.add_argument("--torch", required=True)
    p.add_argument("--ours", required=True)
    p.add_argument("--warmup", action="store_true")
    p.add_argument("--ours-stats")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--exchange", choices=["fused", "pytorch"], default="fused",
                   help="quantization: our exchange (1 or 2 collectives per step)")
    p.add_argument("--max-ulp", type=int, default=0,
                   help="quantization: largest ulp difference from PyTorch accepted "
                        "(0: bitwise; see the docstring)")
    p.add_argument("--same-as", help="another run of ours (its --output directory) that "
                                     "must have given bitwise the same results")
    p.set_defaults(fn=cmd_outputs)
    p = sub.add_parser("states")
    p.add_argument("manifest")
    p.add_argument("scenario")
    p.add_argument("mlir")
    p.set_defaults(fn=cmd_states)
    p = sub.add_parser("report")
    p.add_argument("manifest")
    p.add_argument("scenario")
    p.add_argument("--torch", required=True)
    p.add_argument("report")
    p.set_defaults(fn=cmd_report)
    args = parser.parse_args()
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
