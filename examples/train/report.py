#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Summarizes the demo's training runs: accuracy, traffic, speed, loss curves.

    report.py RUNDIR --data DIR [--plot PNG] [--losses CSV]

RUNDIR holds one directory per configuration with what train.sh asks
ddp-run to write:

    loss.r{rank}.s{step}.npy     the rank's local loss at every step
                                 (--output=... --output-results=4)
    final.r{rank}.o{result}.npy  every result of the last step: the new w1,
                                 b1, w2, b2 and the loss (--final-output)
    summary.json                 rank 0's time and traffic figures
                                 (--summary-json; optional)

DIR is prepare_digits.py's output (the test set).

Prints a Markdown table, one row per configuration: the test accuracy of the
final weights (rank 0's; a warning goes to stderr if another rank's weights
are not bitwise the same), the elements and bytes each rank sends per step
once PowerSGD's warm-up is over (summary.json's elements_sent_per_step and
bytes_sent_per_step: the last step's), the compression ratio against the
`exact` configuration, the time per step (ms_per_step: median over the
steps of the slowest rank's step call), and the loss averaged over the ranks
and the last epoch; "n/a" where summary.json is missing. --plot draws the
loss curves (mean over the ranks, moving average over one epoch); --losses
writes the per-step mean losses as CSV.
"""

import argparse
import csv
import json
import os
import re
import sys

import numpy as np

import mlp

LOSS_FILE = re.compile(r"loss\.r(\d+)\.s(\d+)\.npy$")
FINAL_FILE = re.compile(r"final\.r(\d+)\.o(\d+)\.npy$")


class Run:
    """One configuration's outputs."""

    def __init__(self, directory):
        self.name = os.path.basename(directory)
        losses = {}  # (rank, step) -> path
        finals = {}  # (rank, result) -> path
        for entry in os.listdir(directory):
            path = os.path.join(directory, entry)
            if match := LOSS_FILE.match(entry):
                losses[tuple(map(int, match.groups()))] = path
            elif match := FINAL_FILE.match(entry):
                finals[tuple(map(int, match.groups()))] = path
        ranks = sorted({rank for rank, _ in finals})
        if not losses or not ranks or not all((0, i) in finals for i in range(len(mlp.PARAMS))):
            raise ValueError(f"{directory}: no complete ddp-run outputs "
                             "(loss.r*.s*.npy and final.r*.o*.npy)")

        # Mean over the ranks that wrote a loss at that step.
        loss_ranks = sorted({rank for rank, _ in losses})
        self.steps = np.array(sorted({step for _, step in losses}))
        self.losses = np.array([
            np.mean([np.load(losses[r, s]) for r in loss_ranks if (r, s) in losses])
            for s in self.steps])

        self.weights = {k: np.load(finals[0, i]) for i, k in enumerate(mlp.PARAMS)}
        for rank in ranks[1:]:
            for i, k in enumerate(mlp.PARAMS):
                path = finals.get((rank, i))
                if path is not None and not np.array_equal(np.load(path), self.weights[k]):
                    print(f"warning: {self.name}: rank {rank}'s final {k} differs from rank 0's",
                          file=sys.stderr)

        self.stats = {}
        stats_path = os.path.join(directory, "summary.json")
        if os.path.exists(stats_path):
            with open(stats_path) as f:
                self.stats = json.load(f)


def ordered_runs(run_dir):
    """The configurations under run_dir: mlp.CONFIGS' order first, then the others by name."""
    names = [n for n in os.listdir(run_dir) if os.path.isdir(os.path.join(run_dir, n))]
    known = [n for n in mlp.CONFIGS if n in names]
    return [Run(os.path.join(run_dir, n)) for n in known + sorted(set(names) - set(known))]


def moving_average(values, window):
    """Mean of each window of `window` consecutive values (shorter at the start)."""
    sums = np.cumsum(np.insert(values, 0, 0.0))
    starts = np.maximum(np.arange(1, len(values) + 1) - window, 0)
    return (sums[1:] - sums[starts]) / (np.arange(1, len(values) + 1) - starts)


def number(value, fmt):
    return "n/a" if value is None else format(value, fmt)


def table(runs, x_test, y_test, epoch):
    exact = next((r for r in runs if r.name == "exact"), None)
    exact_sent = exact.stats.get("elements_sent_per_step") if exact else None
    exact_bytes = exact.stats.get("bytes_sent_per_step") if exact else None
    lines = ["| config | test accuracy % | elements sent per step per rank "
             "| ratio vs exact | bytes sent per step per rank | bytes ratio vs exact "
             "| time per step (ms) | loss, last epoch |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]

    def ratio(reference, value):
        return f"{reference / value:.2f}x" if reference and value else "n/a"

    for run in runs:
        sent = run.stats.get("elements_sent_per_step")
        sent_bytes = run.stats.get("bytes_sent_per_step")
        accuracy = 100 * mlp.accuracy(run.weights, x_test, y_test)
        lines.append(f"| {run.name} | {accuracy:.2f} | {number(sent, ',')} | "
                     f"{ratio(exact_sent, sent)} | {number(sent_bytes, ',')} | "
                     f"{ratio(exact_bytes, sent_bytes)} | "
                     f"{number(run.stats.get('ms_per_step'), '.2f')} | "
                     f"{run.losses[-epoch:].mean():.4f} |")
    return "\n".join(lines)


def line_style(name):
    """exact black, fp16 dotted grey; PowerSGD one colour per rank, solid
    with error feedback and dashed without."""
    if name == "exact":
        return dict(color="black", linewidth=2.0)
    if name == "fp16":
        return dict(color="0.55", linestyle=":", linewidth=2.0)
    if name.startswith("quant-"):
        return dict(color="tab:purple", linestyle="-" if name.endswith("pertensor") else "--",
                    linewidth=1.3)
    if name == "sign-ef":
        return dict(color="tab:orange", linewidth=1.3)
    if name == "topk":
        return dict(color="tab:brown", linewidth=1.3)
    match = re.match(r"powersgd-r(\d+)(-noef)?$", name)
    if not match:
        return {}
    colours = {"1": "tab:red", "2": "tab:blue", "4": "tab:green"}
    return dict(color=colours.get(match.group(1)), linestyle="--" if match.group(2) else "-",
                linewidth=1.3)


def plot(runs, epoch, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    for run in runs:
        axes.plot(run.steps, moving_average(run.losses, epoch), label=run.name,
                  **line_style(run.name))
    axes.axvline(mlp.POWERSGD_START_ITER, color="0.7", linewidth=0.8)
    axes.text(mlp.POWERSGD_START_ITER + 3, 0.98, "PowerSGD starts", color="0.4", fontsize=8,
              transform=axes.get_xaxis_transform(), va="top")
    axes.set_yscale("log")
    axes.set_xlabel("step (4 ranks x 32 examples)")
    axes.set_ylabel(f"training loss (mean over ranks, {epoch}-step moving average)")
    axes.set_title("Digits MLP, 4 data-parallel ranks: how the gradients are averaged")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def write_losses(runs, path):
    steps = sorted(set().union(*(r.steps.tolist() for r in runs)))
    by_run = [dict(zip(r.steps.tolist(), r.losses.tolist())) for r in runs]
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["step"] + [r.name for r in runs])
        for step in steps:
            writer.writerow([step] + [f"{losses[step]:.6g}" if step in losses else ""
                                      for losses in by_run])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", metavar="RUNDIR", help="one directory of ddp-run outputs per config")
    parser.add_argument("--data", required=True, help="directory written by prepare_digits.py")
    parser.add_argument("--plot", metavar="PNG", help="draw the loss curves into this file")
    parser.add_argument("--losses", metavar="CSV", help="write the per-step mean losses")
    args = parser.parse_args()

    meta, _, x_test, y_test = mlp.load_data(args.data)
    runs = ordered_runs(args.run_dir)
    if not runs:
        sys.exit(f"report.py: no configuration directories in {args.run_dir}")
    epoch = meta["num_batches"]
    print(table(runs, x_test, y_test, epoch))
    if args.plot:
        plot(runs, epoch, args.plot)
    if args.losses:
        write_losses(runs, args.losses)


if __name__ == "__main__":
    main()
