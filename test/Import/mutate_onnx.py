# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Robustness of ddp-import-onnx against damaged ONNX files.

  mutate_onnx.py --tool PATH [--opt PATH] --seed S --count N --workdir DIR
                 [--timeout 10] [--jobs J] MODEL.onnx [MODEL.onnx ...]

From each MODEL, writes --count mutated copies, one at a time, under --workdir,
runs `TOOL FILE -o OUT` on each and fails (exit 1, one line per failure) if a
run
  - is killed by a signal or exits with a code other than 0 or 1,
  - takes longer than --timeout seconds,
  - exits 1 without a line starting with "ddp-import-onnx: error:" on stderr,
  - exits 0 without the summary line "ddp-import-onnx: N trainable tensors,
    M elements, K left out", or with an output that does not hold N
    ddp.allreduce ops or (with --opt) that ddp-opt does not parse and verify,
  - exits 0 where the damage must be an error: data_location EXTERNAL on an
    initializer, or a trainable initializer whose dims no longer fit its data
    (dims dropped, added, negative, huge), or whose data was cut short.

Mutations (the file's protobuf structure is walked with the small wire-format
reader below, no onnx package needed, so plain python3 runs this):
  random bytes: truncate at a random length, flip bytes, zero a region,
  duplicate a region, delete a region, overwrite a varint with a huge one;
  half the time at the start of a protobuf field of the model, graph or an
  initializer rather than anywhere (a ResNet's file is mostly float data);
  structured, on one initializer: data_location EXTERNAL (with or without
  external_data entries), dims dropped / added / negative / huge /
  overflowing int64 products, data_type changed, raw_data or float_data cut
  or extended or removed, the name removed, the tensor duplicated.
Plus fixed cases: a missing file, an empty file, a directory.

Mutant k of a model comes from random.Random("SEED:k"), so a failure reproduces
alone; failing inputs are kept in --workdir as fail-*.onnx.
"""
import argparse
import concurrent.futures
import os
import random
import re
import resource
import signal
import subprocess
import sys
import time

# ---------------------------------------------------------------- protobuf --

VARINT, I64, LEN, I32 = 0, 1, 2, 5


class Field:
    __slots__ = ("num", "wt", "value", "start")

    def __init__(self, num, wt, value, start):
        self.num, self.wt, self.value, self.start = num, wt, value, start


def read_varint(buf, pos):
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def decode(buf, base=0):
    """Fields of one message; raises ValueError on malformed input."""
    fields = []
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = read_varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == VARINT:
            value, pos = read_varint(buf, pos)
        elif wt == I64:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wt == I32:
            value, pos = buf[pos:pos + 4], pos + 4
        elif wt == LEN:
            n, pos = read_varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        else:
            raise ValueError("wire type %d" % wt)
        if pos > len(buf):
            raise ValueError("truncated")
        fields.append(Field(num, wt, value, base + start))
    return fields


def varint(n):
    n &= (1 << 64) - 1  # negative int64 as protobuf writes it: 10 bytes
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


class Parts(list):
    """An encoded message as a list of bytes-like pieces (memoryview slices of
    the original file where possible: a ResNet's file is not copied for each
    mutant)."""

    def size(self):
        return sum(len(p) for p in self)


def encode_parts(fields):
    out = Parts()
    for f in fields:
        out.append(varint(f.num << 3 | f.wt))
        if f.wt == VARINT:
            out.append(varint(f.value))
        elif f.wt == LEN:
            if isinstance(f.value, Parts):
                out.append(varint(f.value.size()))
                out.extend(f.value)
            else:
                out.append(varint(len(f.value)))
                out.append(f.value)
        else:
            out.append(f.value)
    return out


def encode(fields):
    return b"".join(encode_parts(fields))


def field_header_len(f):
    return len(varint(f.num << 3 | f.wt)) + (len(varint(len(f.value))) if f.wt == LEN else 0)


# ModelProto.graph = 7; GraphProto.initializer = 5; TensorProto fields:
MODEL_GRAPH, GRAPH_INIT = 7, 5
T_DIMS, T_TYPE, T_FLOAT, T_INT32, T_INT64, T_NAME, T_RAW, T_DOUBLE = 1, 2, 4, 5, 7, 8, 9, 10
T_EXTERNAL, T_LOCATION = 13, 14
FLOAT_TYPES = {1: 4, 10: 2, 16: 2, 11: 8}  # f32, f16, bf16, f64: bytes per element


class Model:
    """A decoded model: top-level fields, graph fields, and each initializer's
    fields, with the absolute offsets of every field start (where byte-level
    damage is most interesting)."""

    def __init__(self, data):
        self.data = data = memoryview(data)
        self.model = decode(data)
        self.graph_index = next(i for i, f in enumerate(self.model)
                                if f.num == MODEL_GRAPH and f.wt == LEN)
        g = self.model[self.graph_index]
        gbase = g.start + field_header_len(g)
        self.graph = decode(g.value, gbase)
        self.init_indices = [i for i, f in enumerate(self.graph)
                             if f.num == GRAPH_INIT and f.wt == LEN]
        self.tensors = []
        self.offsets = [f.start for f in self.model] + [f.start for f in self.graph]
        for i in self.init_indices:
            f = self.graph[i]
            t = decode(f.value, f.start + field_header_len(f))
            self.tensors.append(t)
            self.offsets += [x.start for x in t]

    def rebuild(self, index, new):
        """The file with initializer #index replaced by the fields `new`, or by
        several tensors if `new` is a list of field lists (the first in place,
        the others appended to the graph)."""
        graph = list(self.graph)
        extra = []
        i = self.init_indices[index]
        if new and isinstance(new[0], list):
            graph[i] = Field(GRAPH_INIT, LEN, encode_parts(new[0]), 0)
            extra = [Field(GRAPH_INIT, LEN, encode_parts(x), 0) for x in new[1:]]
        else:
            graph[i] = Field(GRAPH_INIT, LEN, encode_parts(new), 0)
        model = list(self.model)
        model[self.graph_index] = Field(MODEL_GRAPH, LEN, encode_parts(graph + extra), 0)
        return encode_parts(model)


def tensor_info(fields):
    dims = []
    dtype = 0
    name = b""
    for f in fields:
        if f.num == T_DIMS:
            if f.wt == VARINT:
                dims.append(f.value)
            elif f.wt == LEN:  # packed
                pos = 0
                while pos < len(f.value):
                    v, pos = read_varint(f.value, pos)
                    dims.append(v)
        elif f.num == T_TYPE and f.wt == VARINT:
            dtype = f.value
        elif f.num == T_NAME and f.wt == LEN:
            name = bytes(f.value)
    return dims, dtype, name


def trainable(fields):
    dims, dtype, name = tensor_info(fields)
    return dtype in FLOAT_TYPES and b"running_mean" not in name and b"running_var" not in name


def has_data(fields):
    return any(f.num in (T_FLOAT, T_INT32, T_INT64, T_RAW, T_DOUBLE) and f.wt == LEN
               and len(f.value) for f in fields)


# --------------------------------------------------------------- mutations --

def patch(data, edits):
    """data with edits (pos, length replaced, new bytes) applied, as Parts;
    edits must not overlap."""
    out = Parts()
    at = 0
    for p, k, new in sorted(edits, key=lambda e: e[0]):
        p = max(p, at)
        out.append(data[at:p])
        out.append(new)
        at = min(p + k, len(data))
    out.append(data[at:])
    return out


def byte_mutation(rng, model, data):
    """Returns (description, Parts)."""
    data = memoryview(data)
    n = len(data)

    def pos():
        if model is not None and model.offsets and rng.random() < 0.5:
            p = rng.choice(model.offsets) + rng.randrange(0, 4)
        else:
            p = rng.randrange(0, n)
        return min(p, n - 1)

    kind = rng.choice(["truncate", "flip", "zero", "dup", "delete", "varint"])
    if kind == "truncate":
        cut = pos()
        return "truncate at %d of %d" % (cut, n), Parts([data[:cut]])
    if kind == "flip":
        where = sorted(set(pos() for _ in range(rng.randint(1, 8))))
        return "flip bytes at %s" % where, patch(
            data, [(p, 1, bytes([data[p] ^ rng.randrange(1, 256)])) for p in where])
    if kind == "zero":
        p, k = pos(), rng.randint(1, 64)
        k = min(k, n - p)
        return "zero %d bytes at %d" % (k, p), patch(data, [(p, k, bytes(k))])
    if kind == "dup":
        p, k = pos(), rng.randint(1, 64)
        chunk = bytes(data[p:p + k])
        q = rng.choice([p, pos()])
        return "duplicate %d bytes from %d at %d" % (len(chunk), p, q), patch(data, [(q, 0, chunk)])
    if kind == "delete":
        p, k = pos(), rng.randint(1, 64)
        return "delete %d bytes at %d" % (k, p), patch(data, [(p, k, b"")])
    # A field header followed by a huge varint (a length or a dim).
    p = pos()
    big = rng.choice([2**31 - 1, 2**32, 2**62, 2**63 - 1, 2**64 - 1])
    return "varint %d written at %d" % (big, p), patch(data, [(p, 10, varint(big))])


def structured_mutation(rng, model):
    """Returns (description, Parts, must_fail)."""
    idx = rng.randrange(len(model.tensors))
    t = list(model.tensors[idx])
    dims, dtype, name = tensor_info(t)
    is_trainable = trainable(t)
    label = "initializer %d %r (dims %s, type %d)" % (idx, name.decode("utf-8", "replace"),
                                                     dims, dtype)
    nodims = [f for f in t if f.num != T_DIMS]
    numel = 1
    for d in dims:
        numel *= d
    # Only a tensor that has data and more than one element loses the fit
    # between dims and data for sure when dims change.
    fits_only_its_dims = is_trainable and has_data(t) and numel > 1

    def with_dims(new):
        head = [f for f in nodims if f.num < T_DIMS]
        return head + [Field(T_DIMS, VARINT, d, 0) for d in new] + \
            [f for f in nodims if f.num >= T_DIMS]

    kinds = ["external", "external-bare", "drop-dims", "drop-one-dim", "add-dim",
             "negative-dim", "huge-dim", "overflow-dims", "dtype", "cut-data",
             "extend-data", "no-data", "no-name", "duplicate"]
    kind = rng.choice(kinds)
    must_fail = False
    if kind in ("external", "external-bare"):
        new = [f for f in t if f.num not in (T_RAW, T_LOCATION, T_EXTERNAL)]
        if kind == "external":
            for k, v in [(b"location", b"weights.bin"), (b"offset", b"0"),
                         (b"length", str(4 * max(numel, 1)).encode())]:
                entry = encode([Field(1, LEN, k, 0), Field(2, LEN, v, 0)])
                new.append(Field(T_EXTERNAL, LEN, entry, 0))
        new.append(Field(T_LOCATION, VARINT, 1, 0))
        t = new
        must_fail = True
    elif kind == "drop-dims":
        t = with_dims([])
        must_fail = fits_only_its_dims
    elif kind == "drop-one-dim" and dims:
        k = rng.randrange(len(dims))
        t = with_dims(dims[:k] + dims[k + 1:])
        must_fail = fits_only_its_dims and dims[k] != 1
    elif kind == "add-dim":
        extra = rng.choice([2, 3, 7])
        t = with_dims(dims + [extra])
        must_fail = is_trainable and has_data(t)
    elif kind == "negative-dim":
        t = with_dims((dims or [1])[:-1] + [rng.choice([-1, -8, -(2**63)])])
        must_fail = is_trainable
    elif kind == "huge-dim":
        t = with_dims((dims or [1])[:-1] + [rng.choice([2**31, 2**40, 2**62, 2**63 - 1])])
        must_fail = is_trainable
    elif kind == "overflow-dims":
        t = with_dims([2**62, 2**62, 16] if rng.random() < 0.5 else [2**32, 2**32])
        must_fail = is_trainable
    elif kind == "dtype":
        new_type = rng.choice([0, 1, 2, 6, 7, 8, 9, 10, 11, 14, 16, 17, 999, 2**31 - 1])
        t = [f for f in t if f.num != T_TYPE]
        t.insert(0, Field(T_TYPE, VARINT, new_type, 0))
        kind = "dtype %d" % new_type
    elif kind in ("cut-data", "extend-data", "no-data"):
        data_fields = [i for i, f in enumerate(t)
                       if f.num in (T_FLOAT, T_INT32, T_INT64, T_RAW, T_DOUBLE) and f.wt == LEN]
        if data_fields:
            i = data_fields[0]
            value = t[i].value
            if kind == "cut-data" and len(value) > 1:
                value = value[:rng.randrange(1, len(value))]
                must_fail = is_trainable and has_data(t)
            elif kind == "extend-data":
                value = bytes(value) + bytes(rng.choice([1, 2, 4, 8, 64]))
                must_fail = is_trainable and t[i].num == T_RAW
            elif kind == "no-data":
                value = b""
                must_fail = is_trainable and numel > 0
            t[i] = Field(t[i].num, LEN, value, 0)
    elif kind == "no-name":
        t = [f for f in t if f.num != T_NAME]
    elif kind == "duplicate":
        t = [t, t]
    return "%s: %s" % (kind, label), model.rebuild(idx, t), must_fail


# ------------------------------------------------------------------- runs --

SUMMARY = re.compile(r"^ddp-import-onnx: (\d+) trainable tensors, (\d+) elements, (\d+) left out$",
                     re.M)


def limit_memory():
    # A run that tries to allocate what a damaged dims field claims shows up
    # as a crash (std::bad_alloc), not as a machine out of memory. Set on this
    # process, inherited by the runs (a preexec_fn would make every spawn a
    # slow fork).
    try:
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    except (ValueError, OSError):
        pass


EXITS = {0: 0, 1: 0}


def run_one(args, path, out, must_fail):
    """Returns None or a failure message."""
    cmd = [args.tool, path, "-o", out]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return "timed out after %ds" % args.timeout
    rc = proc.returncode
    err = proc.stderr.decode("utf-8", "replace")
    if rc in EXITS:
        EXITS[rc] += 1
    if rc < 0:
        return "killed by signal %s; stderr: %s" % (
            signal.Signals(-rc).name if -rc in signal.valid_signals() else -rc, err[-600:])
    if rc not in (0, 1):
        return "exit code %d; stderr: %s" % (rc, err[-600:])
    if rc == 1:
        if not err.strip():
            return "exit code 1 with nothing on stderr"
        if not any(line.startswith("ddp-import-onnx: error:") for line in err.splitlines()):
            return "exit code 1 without 'ddp-import-onnx: error:'; stderr: %s" % err[-600:]
        return None
    if must_fail:
        return "exit code 0, expected an error; stderr: %s" % err[-300:]
    m = SUMMARY.search(err)
    if not m:
        return "exit code 0 without the summary line; stderr: %s" % err[-600:]
    try:
        with open(out, "rb") as f:
            text = f.read()
    except OSError as e:
        return "exit code 0 but no output file: %s" % e
    n = int(m.group(1))
    if text.count(b"ddp.allreduce") != n:
        return "summary says %d trainable tensors, output has %d ddp.allreduce" % (
            n, text.count(b"ddp.allreduce"))
    if args.opt:
        try:
            check = subprocess.run([args.opt, out, "-o", os.devnull], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, timeout=max(args.timeout, 30))
        except subprocess.TimeoutExpired:
            return "ddp-opt timed out on the output"
        if check.returncode != 0:
            return "exit code 0 but ddp-opt rejects the output (rc %d): %s" % (
                check.returncode, check.stderr.decode("utf-8", "replace")[-600:])
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="+")
    parser.add_argument("--tool", required=True)
    parser.add_argument("--opt", help="ddp-opt, to parse the outputs of successful runs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=300, help="mutants per model")
    parser.add_argument("--structured", type=float, default=0.3,
                        help="fraction of structured (protobuf-aware) mutants")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--timeout", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 8))
    args = parser.parse_args()
    limit_memory()
    os.makedirs(args.workdir, exist_ok=True)
    for stale in os.listdir(args.workdir):
        if stale.startswith(("fail-", "m-", "o-")):
            os.unlink(os.path.join(args.workdir, stale))

    failures = []
    strict = 0

    # Fixed cases.
    fixed = [
        ("missing file", os.path.join(args.workdir, "does-not-exist.onnx"), True),
        # An empty file is a valid, empty ModelProto: exit 0 or 1 are both fine.
        ("empty file", os.path.join(args.workdir, "m-empty.onnx"), False),
        ("a directory", args.workdir, True),
    ]
    open(fixed[1][1], "wb").close()
    for label, path, must_fail in fixed:
        msg = run_one(args, path, os.path.join(args.workdir, "o-fixed.mlir"), must_fail)
        if msg:
            failures.append("%s: %s" % (label, msg))
        strict += must_fail

    start = time.time()
    for model_path in args.models:
        with open(model_path, "rb") as f:
            data = f.read()
        model = Model(data)
        base = os.path.basename(model_path)

        def job(k):
            rng = random.Random("%d:%d" % (args.seed, k))
            if model.tensors and rng.random() < args.structured:
                desc, mutant, must_fail = structured_mutation(rng, model)
            else:
                desc, mutant = byte_mutation(rng, model, data)
                must_fail = False
            path = os.path.join(args.workdir, "m-%s-%d.onnx" % (base, k))
            with open(path, "wb") as f:
                f.writelines(mutant)
            out = os.path.join(args.workdir, "o-%s-%d.mlir" % (base, k))
            msg = run_one(args, path, out, must_fail)
            if msg:
                os.replace(path, os.path.join(args.workdir, "fail-%s-%d.onnx" % (base, k)))
            else:
                os.unlink(path)
            if os.path.exists(out):
                os.unlink(out)
            return k, desc, must_fail, msg

        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for k, desc, must_fail, msg in pool.map(job, range(args.count)):
                strict += must_fail
                if msg:
                    failures.append("%s mutant %d (%s): %s" % (base, k, desc, msg))

    elapsed = time.time() - start
    total = len(fixed) + args.count * len(args.models)
    if failures:
        print("FAILED: %d of %d runs (seed %d); inputs kept as %s/fail-*.onnx"
              % (len(failures), total, args.seed, args.workdir))
        for f in failures:
            print(f)
        return 1
    print("OK: %d runs (%d that must fail); %d exit 0, %d exit 1; no crash, no hang (%.1fs)"
          % (total, strict, EXITS[0], EXITS[1], elapsed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
