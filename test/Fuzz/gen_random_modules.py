#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Generate random, valid MLIR modules that reduce gradients for ddp-opt.

Usage:
  gen_random_modules.py --seed S --count N -o FILE

Writes N modules separated by `// -----` lines, so that
`ddp-opt --split-input-file FILE` runs every module in one process.

Each module holds 1-3 `func.func`s whose tensor arguments are reduced by
`ddp.allreduce` (single or multi-tensor, `mean` on floats or `sum`) or by the
upstream `shard.all_reduce` (with a module-level `shard.grid`), sometimes
inside `scf.if` / `scf.for` regions (nested up to a few levels), sometimes fed
or followed by unrelated arith ops. Every function returns all its results.

Python 3.9+ and the standard library only. The output depends only on the
seed and the count.
"""

import argparse
import random
import sys

FLOAT_TYPES = ["f32", "f16", "bf16", "f64"]
INT_TYPES = ["i32", "i64"]

# Weighted element types: mostly f32.
ELEMENT_WEIGHTS = [
    ("f32", 50),
    ("f16", 10),
    ("bf16", 10),
    ("f64", 8),
    ("i32", 8),
    ("i64", 6),
]

MAX_DEPTH = 3


def is_float(elem):
    return elem in FLOAT_TYPES


class TensorType(object):
    def __init__(self, shape, elem):
        self.shape = shape  # list of int or None (dynamic)
        self.elem = elem

    def __str__(self):
        dims = ["?" if d is None else str(d) for d in self.shape]
        if dims:
            return "tensor<%sx%s>" % ("x".join(dims), self.elem)
        return "tensor<%s>" % self.elem

    @property
    def is_float(self):
        return is_float(self.elem)


class Value(object):
    def __init__(self, name, type_):
        self.name = name
        self.type = type_


def weighted_choice(rng, pairs):
    total = sum(w for _, w in pairs)
    x = rng.uniform(0, total)
    acc = 0.0
    for item, w in pairs:
        acc += w
        if x <= acc:
            return item
    return pairs[-1][0]


def random_dim(rng):
    r = rng.random()
    if r < 0.05:
        return 0
    if r < 0.20:
        return 1
    if r < 0.25:
        return None  # dynamic
    if r < 0.35:
        return rng.choice([2, 3, 4, 8, 16, 32, 64])
    return rng.randint(1, 70)


def random_type(rng):
    elem = weighted_choice(rng, ELEMENT_WEIGHTS)
    r = rng.random()
    if r < 0.10:
        # A large-ish matrix, the kind PowerSGD actually compresses.
        shape = [rng.choice([300, 256, 512, 128]), rng.choice([200, 128, 300, 64])]
        if rng.random() < 0.5:
            shape.reverse()
        return TensorType(shape, elem)
    rank = weighted_choice(rng, [(0, 8), (1, 22), (2, 40), (3, 15), (4, 15)])
    shape = [random_dim(rng) for _ in range(rank)]
    # Keep dynamic dims occasional: at most one in most tensors.
    dyn = [i for i, d in enumerate(shape) if d is None]
    if len(dyn) > 1 and rng.random() < 0.7:
        for i in dyn[1:]:
            shape[i] = rng.randint(1, 70)
    return TensorType(shape, elem)


class FuncBuilder(object):
    def __init__(self, rng, name):
        self.rng = rng
        self.name = name
        self.lines = []
        self.counter = 0
        self.iv_counter = 0
        self.needs_cond = False
        self.needs_consts = False
        self.needs_grid = False

    def fresh(self, prefix="v"):
        self.counter += 1
        return "%%%s%d" % (prefix, self.counter)

    def emit(self, depth, text):
        self.lines.append("  " * (depth + 1) + text)

    # -- single constructs -------------------------------------------------

    def reduce_kind(self, values):
        if all(v.type.is_float for v in values) and self.rng.random() < 0.7:
            return "mean"
        return "sum"

    def emit_allreduce(self, values, depth):
        # ddp.allreduce takes the runtime's float types only (ddprt.h's list);
        # integer tensors go through shard.all_reduce, which
        # convert-shard-to-ddp leaves as it is, saying why.
        floats = [v for v in values if v.type.is_float]
        if len(floats) != len(values):
            reduced = iter(self.emit_float_allreduce(floats, depth) if floats else [])
            return [next(reduced) if v.type.is_float else self.emit_shard(v, depth)
                    for v in values]
        return self.emit_float_allreduce(values, depth)

    def emit_float_allreduce(self, values, depth):
        kind = self.reduce_kind(values)
        name = self.fresh("r")
        operands = list(values)
        # Rarely, the same tensor twice in one op (its extra result unused).
        if self.rng.random() < 0.04:
            operands.append(self.rng.choice(values))
        names = ", ".join(v.name for v in operands)
        types = ", ".join(str(v.type) for v in operands)
        if len(operands) == 1:
            self.emit(depth, "%s = ddp.allreduce %s %s : %s" % (name, kind, names, types))
            return [Value(name, values[0].type)]
        self.emit(
            depth,
            "%s:%d = ddp.allreduce %s %s : %s" % (name, len(operands), kind, names, types),
        )
        return [Value("%s#%d" % (name, i), v.type) for i, v in enumerate(values)]

    def emit_shard(self, value, depth):
        self.needs_grid = True
        if value.type.is_float and self.rng.random() < 0.7:
            red = "average"
        else:
            red = "sum"
        name = self.fresh("s")
        t = str(value.type)
        self.emit(
            depth,
            "%s = shard.all_reduce %s on @grid0 grid_axes = [0] reduction = %s : %s -> %s"
            % (name, value.name, red, t, t),
        )
        return Value(name, value.type)

    def emit_arith(self, value, depth):
        """An unrelated elementwise op on one tensor; same type out."""
        if value.type.is_float:
            op = self.rng.choice(["arith.addf", "arith.mulf", "arith.subf", "arith.maximumf"])
        else:
            op = self.rng.choice(["arith.addi", "arith.muli", "arith.subi"])
        name = self.fresh("x")
        other = value.name
        self.emit(depth, "%s = %s %s, %s : %s" % (name, op, value.name, other, value.type))
        return Value(name, value.type)

    def emit_if(self, values, depth):
        self.needs_cond = True
        name = self.fresh("i")
        types = ", ".join(str(v.type) for v in values)
        if len(values) == 1:
            self.emit(depth, "%s = scf.if %%cond -> (%s) {" % (name, types))
        else:
            self.emit(depth, "%s:%d = scf.if %%cond -> (%s) {" % (name, len(values), types))
        then_vals = self.transform(values, depth + 1)
        self.emit(depth + 1, "scf.yield %s : %s" % (", ".join(v.name for v in then_vals), types))
        self.emit(depth, "} else {")
        if self.rng.random() < 0.3:
            else_vals = self.transform(values, depth + 1)
        else:
            else_vals = values
        self.emit(depth + 1, "scf.yield %s : %s" % (", ".join(v.name for v in else_vals), types))
        self.emit(depth, "}")
        if len(values) == 1:
            return [Value(name, values[0].type)]
        return [Value("%s#%d" % (name, i), v.type) for i, v in enumerate(values)]

    def emit_for(self, values, depth):
        self.needs_consts = True
        name = self.fresh("l")
        self.iv_counter += 1
        iv = "%%iv%d" % self.iv_counter
        accs = [Value(self.fresh("acc"), v.type) for v in values]
        types = ", ".join(str(v.type) for v in values)
        iter_args = ", ".join("%s = %s" % (a.name, v.name) for a, v in zip(accs, values))
        if len(values) == 1:
            res = name
        else:
            res = "%s:%d" % (name, len(values))
        self.emit(
            depth,
            "%s = scf.for %s = %%c0 to %%c3 step %%c1 iter_args(%s) -> (%s) {"
            % (res, iv, iter_args, types),
        )
        body_vals = self.transform(accs, depth + 1)
        self.emit(depth + 1, "scf.yield %s : %s" % (", ".join(v.name for v in body_vals), types))
        self.emit(depth, "}")
        if len(values) == 1:
            return [Value(name, values[0].type)]
        return [Value("%s#%d" % (name, i), v.type) for i, v in enumerate(values)]

    # -- recursive driver --------------------------------------------------

    def partition(self, values):
        vals = list(values)
        self.rng.shuffle(vals)
        chunks = []
        while vals:
            r = self.rng.random()
            if r < 0.55:
                n = 1
            elif r < 0.85:
                n = 2
            else:
                n = self.rng.randint(3, 5)
            chunks.append(vals[:n])
            vals = vals[n:]
        return chunks

    def transform(self, values, depth):
        """Emit ops that reduce every value; return same-typed results in
        the order of `values`."""
        if not values:
            return []
        out = {}
        for chunk in self.partition(values):
            results = self.transform_chunk(chunk, depth)
            for v, r in zip(chunk, results):
                out[id(v)] = r
        return [out[id(v)] for v in values]

    def transform_chunk(self, chunk, depth):
        rng = self.rng
        choices = [("ar", 40), ("shard", 12), ("pre", 10), ("post", 6)]
        if depth < MAX_DEPTH:
            choices += [("if", 12), ("for", 12), ("chain", 5)]
        kind = weighted_choice(rng, choices)
        if kind == "ar":
            return self.emit_allreduce(chunk, depth)
        if kind == "shard":
            return [self.emit_shard(v, depth) for v in chunk]
        if kind == "pre":
            fed = [self.emit_arith(v, depth) if rng.random() < 0.8 else v for v in chunk]
            return self.emit_allreduce(fed, depth)
        if kind == "post":
            reduced = self.emit_allreduce(chunk, depth)
            return [self.emit_arith(v, depth) if rng.random() < 0.7 else v for v in reduced]
        if kind == "if":
            return self.emit_if(chunk, depth)
        if kind == "for":
            return self.emit_for(chunk, depth)
        if kind == "chain":
            first = self.emit_allreduce(chunk, depth)
            return self.transform(first, depth + 1)
        raise AssertionError(kind)

    def build(self):
        rng = self.rng
        r = rng.random()
        if r < 0.03:
            nargs = 0
        elif r < 0.35:
            nargs = 1
        else:
            nargs = rng.randint(2, 7)
        args = [Value("%%a%d" % i, random_type(rng)) for i in range(nargs)]
        results = self.transform(args, 0)
        # Occasionally also return an argument unchanged, or a result twice.
        if results and rng.random() < 0.1:
            results.append(rng.choice(results))
        if args and rng.random() < 0.05:
            results.append(rng.choice(args))

        params = ["%s: %s" % (a.name, a.type) for a in args]
        if self.needs_cond:
            params.insert(rng.randint(0, len(params)), "%cond: i1")
        ret_types = ", ".join(str(v.type) for v in results)
        header = "func.func @%s(%s)" % (self.name, ", ".join(params))
        if len(results) == 1:
            header += " -> %s" % ret_types
        elif results:
            header += " -> (%s)" % ret_types
        out = [header + " {"]
        if self.needs_consts:
            out.append("  %c0 = arith.constant 0 : index")
            out.append("  %c1 = arith.constant 1 : index")
            out.append("  %c3 = arith.constant 3 : index")
        out.extend(self.lines)
        if results:
            out.append(
                "  return %s : %s" % (", ".join(v.name for v in results), ret_types)
            )
        else:
            out.append("  return")
        out.append("}")
        return out


def gen_module(rng, index):
    nfuncs = weighted_choice(rng, [(1, 50), (2, 30), (3, 20)])
    funcs = []
    needs_grid = False
    for f in range(nfuncs):
        fb = FuncBuilder(rng, "m%d_f%d" % (index, f))
        funcs.append(fb.build())
        needs_grid = needs_grid or fb.needs_grid
    lines = ["// Module %d" % index]
    if needs_grid:
        lines.append("shard.grid @grid0(shape = 4)")
    for body in funcs:
        lines.extend(body)
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("-o", "--output", default="-")
    opts = parser.parse_args(argv)

    rng = random.Random(opts.seed)
    modules = [gen_module(rng, i) for i in range(opts.count)]
    text = "\n// -----\n\n".join(modules)
    if opts.output == "-":
        sys.stdout.write(text)
    else:
        with open(opts.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
