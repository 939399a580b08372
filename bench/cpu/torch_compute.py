# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch's side of bench/cpu/codegen.sh: one training step's compute
(forward, backward and the SGD update, no communication) of the models
ddp-run compiles, timed at every thread count from 1 to the machine's
cores; prints one line per model and thread count:

    torch MODEL THREADS median_ms

mlp:    bench/overlap's MLP (gen_mlp_step.py): LAYERS Linear(H, H) layers,
        ReLU between them, loss sum((z - y)^2) / (2 B H), plain SGD.
digits: the training demo's 64-H-10 perceptron (examples/train/mlp.py),
        mean softmax cross-entropy, plain SGD.

    /usr/bin/python3 bench/cpu/torch_compute.py --model mlp --layers 8 \\
        --hidden 1024 --batch 4 --steps 30
"""

import argparse
import os
import statistics
import time

import torch


def mlp_step(args):
    torch.manual_seed(0)
    h, b = args.hidden, args.batch
    weights = [torch.randn(h, h) * (2.0 / h) ** 0.5 for _ in range(args.layers)]
    biases = [torch.zeros(h) for _ in range(args.layers)]
    for p in weights + biases:
        p.requires_grad_(True)
    x, y = torch.randn(b, h), torch.randn(b, h)
    scale = 1.0 / (2 * b * h)

    def step():
        a = x
        for i in range(args.layers):
            a = a @ weights[i] + biases[i]
            if i + 1 < args.layers:
                a = torch.relu(a)
        loss = ((a - y) ** 2).sum() * scale
        loss.backward()
        with torch.no_grad():
            for p in weights + biases:
                p -= args.lr * p.grad
                p.grad = None
    return step


def digits_step(args):
    torch.manual_seed(0)
    h, b = args.hidden, args.batch
    w1 = (torch.randn(64, h) * (2.0 / 64) ** 0.5).requires_grad_(True)
    b1 = torch.zeros(h, requires_grad=True)
    w2 = (torch.randn(h, 10) * (2.0 / h) ** 0.5).requires_grad_(True)
    b2 = torch.zeros(10, requires_grad=True)
    x = torch.rand(b, 64)
    labels = torch.randint(0, 10, (b,))
    params = [w1, b1, w2, b2]

    def step():
        logits = torch.relu(x @ w1 + b1) @ w2 + b2
        loss = torch.nn.functional.cross_entropy(logits, labels)
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= args.lr * p.grad
                p.grad = None
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["mlp", "digits"], required=True)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", default="",
                        help="comma-separated thread counts (default: 1 to "
                             "the cores this process may use)")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    counts = ([int(t) for t in args.threads.split(",")] if args.threads
              else list(range(1, cores + 1)))
    step = mlp_step(args) if args.model == "mlp" else digits_step(args)
    for threads in counts:
        torch.set_num_threads(threads)
        for _ in range(args.warmup):
            step()
        times = []
        for _ in range(args.steps):
            start = time.perf_counter()
            step()
            times.append((time.perf_counter() - start) * 1e3)
        print(f"torch {args.model} {threads} {statistics.median(times):.3f}")


if __name__ == "__main__":
    main()
