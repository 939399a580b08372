"""Inputs and checks for the ddp-run integration tests.

    steps.py gen DIR --ranks W --steps S [--low-rank K] [--seed N] [--shard]
        Writes DIR/step.mlir (one `ddp.allreduce mean` per gradient, or with
        --shard upstream's `shard.all_reduce ... reduction = average` over a
        `shard.grid` of W devices, as a module written for upstream MLIR) and the
        gradients DIR/in.r{rank}.s{step}.a{arg}.npy of three tensors: two
        matrices PowerSGD compresses at ranks 1, 2 and 4 (64x32, 48x24) and a
        bias it never compresses. With --low-rank K, every rank's matrices
        lie in one fixed K-dimensional row and column space, so their mean
        has rank <= K.

    steps.py check DIR OUT --mode plain|fp16|bf16|powersgd [--start-iter T]
                  [--first-compressed-exact] [--states PATTERN]
                  [--ranks-per-node K]
        Checks the outputs OUT (a pattern with {rank}, {step}, {result}):
        every rank bitwise equal; plain: the exact mean to f32 rounding;
        fp16/bf16: within the narrow type's rounding; powersgd: the plain
        mean before start-iter, the exact mean at the first compressed step
        when the data are low-rank, and the error-feedback identity
        sum(outputs) + error == sum(inputs) per rank, with the error from
        --states ({rank}, {name}). With --ranks-per-node K (a two-level
        allreduce: the mean within each node of K ranks, then across nodes)
        PowerSGD compresses the node's mean, so the identity holds per node,
        with the node's mean input.

    steps.py same A B --ranks W --steps S --first F --results N
        Asserts outputs A and B are bitwise equal for steps F..S-1.
"""

import argparse
import glob
import os
import sys

import numpy as np

SHAPES = [(64, 32), (32,), (48, 24)]


def gen(args):
    os.makedirs(args.dir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    spaces = {}
    for shape in SHAPES:
        if len(shape) == 2 and args.low_rank:
            u = rng.standard_normal((shape[0], args.low_rank))
            v = rng.standard_normal((shape[1], args.low_rank))
            spaces[shape] = (u, v)
    for step in range(args.steps):
        for rank in range(args.ranks):
            for i, shape in enumerate(SHAPES):
                if shape in spaces:
                    u, v = spaces[shape]
                    c = rng.standard_normal((args.low_rank, args.low_rank))
                    g = u @ c @ v.T / np.sqrt(shape[1])
                else:
                    g = rng.standard_normal(shape)
                np.save(os.path.join(args.dir, f"in.r{rank}.s{step}.a{i}.npy"),
                        g.astype(np.float32))
    types = [f"tensor<{'x'.join(map(str, s))}xf32>" for s in SHAPES]
    lines = [f"shard.grid @dp(shape = {args.ranks})"] if args.shard else []
    lines += ["func.func @step(" +
             ", ".join(f"%g{i}: {t} loc(\"g{i}\")" for i, t in enumerate(types)) +
             ") -> (" + ", ".join(types) + ") {"]
    for i, t in enumerate(types):
        if args.shard:
            lines.append(f"  %r{i} = shard.all_reduce %g{i} on @dp grid_axes = [0] "
                         f"reduction = average : {t} -> {t} loc(\"g{i}\")")
        else:
            lines.append(f"  %r{i} = ddp.allreduce mean %g{i} : {t} loc(\"g{i}\")")
    lines.append("  return " + ", ".join(f"%r{i}" for i in range(len(types))) +
                 " : " + ", ".join(types))
    lines.append("}")
    with open(os.path.join(args.dir, "step.mlir"), "w") as f:
        f.write("\n".join(lines) + "\n")


def load(pattern, rank, step, result):
    return np.load(pattern.format(rank=rank, step=step, result=result))


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check(args):
    inputs = sorted(glob.glob(os.path.join(args.dir, "in.r*.s*.a0.npy")))
    ranks = len({p.split(".r")[1].split(".")[0] for p in inputs})
    steps = len({p.split(".s")[-1].split(".")[0] for p in inputs})
    for step in range(steps):
        for i, shape in enumerate(SHAPES):
            local = [np.load(os.path.join(args.dir, f"in.r{r}.s{step}.a{i}.npy"))
                     for r in range(ranks)]
            mean = np.mean([g.astype(np.float64) for g in local], axis=0)
            scale = np.sum([np.abs(g.astype(np.float64)) for g in local],
                           axis=0) / ranks
            outs = [load(args.out, r, step, i) for r in range(ranks)]
            for r in range(1, ranks):
                if outs[r].tobytes() != outs[0].tobytes():
                    fail(f"step {step} result {i}: rank {r} differs from rank 0")
            out = outs[0].astype(np.float64)
            if out.shape != mean.shape or outs[0].dtype != np.float32:
                fail(f"step {step} result {i}: {outs[0].dtype} {out.shape}")
            compressed = args.mode == "powersgd" and len(shape) == 2
            plain = args.mode == "plain" or (
                args.mode == "powersgd" and
                (step < args.start_iter or not compressed))
            if plain:
                bound = (ranks + 1) * 2.0**-24 * scale + 1e-30
            elif args.mode in ("fp16", "bf16"):
                unit = 2.0**-11 if args.mode == "fp16" else 2.0**-8
                tiny = 2.0**-25 if args.mode == "fp16" else 0.0
                bound = (ranks + 1) * (unit * scale + tiny)
            elif step == args.start_iter and args.first_compressed_exact:
                bound = 1e-4 * np.linalg.norm(mean) * np.ones_like(mean)
            else:
                continue  # checked by the error-feedback identity below
            worst = np.max(np.abs(out - mean) / bound)
            if worst > 1.0:
                fail(f"step {step} result {i} ({args.mode}): off the exact mean "
                     f"by {worst:.3g} times the bound")
            print(f"step {step} result {i}: within {worst:.3g} of the bound")
    if args.mode != "powersgd" or not args.states:
        return
    # Error feedback: what a rank put in equals what came out plus what it
    # still holds, over the compressed steps.
    for r in range(ranks):
        states = {os.path.basename(p): np.load(p) for p in
                  glob.glob(args.states.format(rank=r, name="ddp.error.*"))}
        for i, shape in enumerate(SHAPES):
            if len(shape) != 2:
                continue
            errors = [e for e in states.values() if e.shape == shape]
            if len(errors) != 1:
                fail(f"rank {r}: {len(errors)} error states of shape {shape}")
            k = args.ranks_per_node or 1
            node = range(r // k * k, min(r // k * k + k, ranks))
            put = sum(np.load(os.path.join(args.dir, f"in.r{n}.s{s}.a{i}.npy"))
                      .astype(np.float64)
                      for s in range(args.start_iter, steps)
                      for n in node) / len(node)
            got = sum(load(args.out, r, s, i).astype(np.float64)
                      for s in range(args.start_iter, steps))
            gap = np.max(np.abs(got + errors[0] - put)) / np.max(np.abs(put))
            if gap > 1e-5:
                fail(f"rank {r} result {i}: error feedback loses {gap:.3g}")
            print(f"rank {r} result {i}: error feedback identity to {gap:.2g}")


def same(args):
    for step in range(args.first, args.steps):
        for rank in range(args.ranks):
            for i in range(args.results):
                a, b = (load(p, rank, step, i) for p in (args.a, args.b))
                if a.tobytes() != b.tobytes():
                    fail(f"step {step} rank {rank} result {i} differs")
    print(f"steps {args.first}..{args.steps - 1}: bitwise equal")


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("gen")
    g.add_argument("dir")
    g.add_argument("--ranks", type=int, default=4)
    g.add_argument("--steps", type=int, default=3)
    g.add_argument("--low-rank", type=int, default=0)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--shard", action="store_true")
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("out")
    c.add_argument("--mode", required=True,
                   choices=["plain", "fp16", "bf16", "powersgd"])
    c.add_argument("--start-iter", type=int, default=0)
    c.add_argument("--first-compressed-exact", action="store_true")
    c.add_argument("--states")
    c.add_argument("--ranks-per-node", type=int, default=0)
    s = sub.add_parser("same")
    s.add_argument("a")
    s.add_argument("b")
    s.add_argument("--ranks", type=int, required=True)
    s.add_argument("--steps", type=int, required=True)
    s.add_argument("--first", type=int, default=0)
    s.add_argument("--results", type=int, required=True)
    args = parser.parse_args()
    {"gen": gen, "check": check, "same": same}[args.command](args)


if __name__ == "__main__":
    main()
