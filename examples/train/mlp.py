# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The training example's model in numpy, shared by the example's scripts.

A two-layer perceptron on scikit-learn's 8x8 digits:

    logits = relu(x @ w1 + b1) @ w2 + b2,  loss = mean softmax cross-entropy

`local_step` computes the loss and gradients in float32 with the same
formulas, in the same order, as the MLIR step that gen_mlp_step.py writes,
so that the compiled step can be checked against it and reference.py
predicts what the compiled run does.
"""

import json
import os

import numpy as np

INPUTS = 64
CLASSES = 10

# Defaults shared by gen_mlp_step.py, prepare_digits.py and reference.py;
# train.sh passes the same values explicitly.
HIDDEN = 128
BATCH = 32      # per rank
LR = 0.3
RANKS = 4
STEPS = 440   # 40 epochs of the default 11 steps of 4 x 32 examples
SEED = 0

# Parameter and gradient order: the step function's arguments 0-3 and
# results 0-3.
PARAMS = ("w1", "b1", "w2", "b2")

# The order of the step's allreduces (the order backward produces the
# gradients): PowerSGD numbers the compressed ones in this order, and the
# k-th draws its initial Q from the runtime's random stream k.
ALLREDUCE_ORDER = ("w2", "b2", "w1", "b1")

# The configurations of the demo: name -> how the gradients are averaged.
# train.sh maps the same names to ddp-opt passes.
CONFIGS = {
    "exact": dict(method="exact"),
    "fp16": dict(method="fp16"),
    "powersgd-r1": dict(method="powersgd", rank=1, error_feedback=True),
    "powersgd-r2": dict(method="powersgd", rank=2, error_feedback=True),
    "powersgd-r4": dict(method="powersgd", rank=4, error_feedback=True),
    "powersgd-r1-noef": dict(method="powersgd", rank=1, error_feedback=False),
    "powersgd-r2-noef": dict(method="powersgd", rank=2, error_feedback=False),
    "powersgd-r4-noef": dict(method="powersgd", rank=4, error_feedback=False),
    # The 4 ranks as 2 nodes of 2 (ddp-compress two-level=...): PowerSGD
    # rank 2 with each collective summed within the node and one copy per
    # node across (two-level-r2: flat PowerSGD's numbers), or compressing
    # each node's exact mean across the nodes (two-level-r2-node-mean).
    "two-level-r2": dict(method="powersgd", rank=2, error_feedback=True),
    "two-level-r2-node-mean": dict(method="powersgd", rank=2, error_feedback=True,
                                   ranks_per_node=2),
    # PyTorch's quantization hooks (ddp-opt --insert-quantization): uint8
    # with a min-max scale per bucket, or per channel of 512 elements.
    "quant-pertensor": dict(method="quantization", channel_size=None),
    "quant-perchannel": dict(method="quantization", channel_size=512),
    # A user's own hook, written in MLIR (examples/hooks/sign_ef_hook.mlir,
    # ddp-opt --ddp-apply-hook): error-feedback scaled sign.
    "sign-ef": dict(method="sign-ef"),
    # Top-k sparsification with error feedback (ddp-opt --insert-topk):
    # each rank sends its bucket's largest 1% and their indices.
    "topk": dict(method="topk", ratio=0.01),
}

# PowerSGD's warm-up: plain averaged allreduces before this step
# (ddp-opt's `start-iter`; train.sh passes the same value).
POWERSGD_START_ITER = 10

# reference.py --compare: how close ddp-run must be to the numpy simulation
# (largest absolute difference over the largest magnitude). The two sum in
# different orders, so they differ by float32 roundings, and training
# amplifies those: every configuration's losses must agree over the first
# COMPARE_EARLY_STEPS steps (the warm-up and 15 compressed steps), and the
# methods in COMPARE_FINAL_RTOL also over the whole run, final weights
# included. fp16 (a different order of fp16 roundings) and PowerSGD (power
# iteration) amplify a rounding to 1e-3-1e-2 over 440 steps: numpy alone,
# started from weights perturbed by 1e-7, drifts as far.
# fp16's early losses get the size of one fp16 rounding step, 2^-11 of a
# value (4.9e-4), and some room: ddp-run multiplies with BLAS and adds its
# sums in vector lanes (docs/user-guide.md, "Floating-point results"), so
# its f32 gradients differ from numpy's in the last bits, and a gradient
# element that lies next to an fp16 rounding boundary then rounds to the
# neighbouring fp16 value on one side only.
COMPARE_EARLY_STEPS = 25
COMPARE_EARLY_RTOL = 2e-5
COMPARE_EARLY_RTOL_BY_METHOD = {"fp16": 1e-3}
COMPARE_FINAL_RTOL = {"exact": 1e-4}


def init_weights(hidden, seed):
    """He-normal weights for both layers, zero biases (float32)."""
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.standard_normal((INPUTS, hidden)) * np.sqrt(2.0 / INPUTS)).astype(np.float32),
        "b1": np.zeros(hidden, np.float32),
        "w2": (rng.standard_normal((hidden, CLASSES)) * np.sqrt(2.0 / hidden)).astype(np.float32),
        "b2": np.zeros(CLASSES, np.float32),
    }


def logits(params, x):
    """The forward pass up to the logits."""
    hidden = np.maximum(x @ params["w1"] + params["b1"], np.float32(0))
    return hidden @ params["w2"] + params["b2"]


def local_step(params, x, y):
    """Loss and gradients of one rank's batch, as the MLIR step computes them.

    x is B x 64, y is one-hot B x 10. Returns (loss, {name: gradient}), all
    float32.
    """
    f32 = np.float32
    batch = x.shape[0]
    hidden = np.maximum(x @ params["w1"] + params["b1"], f32(0))
    z = hidden @ params["w2"] + params["b2"]
    shifted = z - z.max(axis=1, keepdims=True)
    exps = np.exp(shifted)
    sums = exps.sum(axis=1, keepdims=True)
    log_probs = shifted - np.log(sums)
    loss = -(y * log_probs).sum(dtype=f32) / f32(batch)
    dz = (exps / sums - y) / f32(batch)
    dhidden = np.where(hidden > 0, dz @ params["w2"].T, f32(0))
    grads = {
        "w2": hidden.T @ dz,
        "b2": dz.sum(axis=0),
        "w1": x.T @ dhidden,
        "b1": dhidden.sum(axis=0),
    }
    return f32(loss), grads


def sgd(params, grads, lr):
    """w - lr * g for every parameter."""
    return {k: (params[k] - np.float32(lr) * grads[k]).astype(np.float32) for k in PARAMS}


def accuracy(params, x, labels):
    """Fraction of examples whose largest logit is the label."""
    return float((logits(params, x).argmax(axis=1) == labels).mean())


def load_data(data_dir):
    """What prepare_digits.py wrote: (meta, initial weights, test set)."""
    with open(os.path.join(data_dir, "meta.json")) as f:
        meta = json.load(f)
    params = {k: np.load(os.path.join(data_dir, f"{k}.npy")) for k in PARAMS}
    x_test = np.load(os.path.join(data_dir, "x_test.npy"))
    y_test = np.load(os.path.join(data_dir, "y_test.npy"))
    return meta, params, x_test, y_test


def batch_paths(data_dir, rank, index):
    """Paths of rank `rank`'s batch `index` (inputs and one-hot labels)."""
    return (os.path.join(data_dir, f"x.r{rank}.b{index}.npy"),
            os.path.join(data_dir, f"y.r{rank}.b{index}.npy"))
