#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The main job: data-parallel training on 4 CPU ranks with the gradient
# allreduces compressed by ddp-opt and run by ddp-run.
#
# After the set-up and build (scripts/setup.sh, plus ddp-run and
# ddprt-calibrate, which the training script runs), it prints
# what ddp-opt's PowerSGD does to ResNet-18's gradient traffic (one line),
# then trains a 64-128-10 MLP on scikit-learn's digits on 4 MPI ranks once
# per way of averaging the gradients (exact, fp16, PowerSGD rank 1/2/4 with
# and without error feedback, quantization, a sign hook, top-k;
# examples/train/train.sh), checks every run
# against a numpy simulation, and prints the table of test accuracy,
# elements and bytes sent per step, and time per step. The loss curves go
# to build/train/loss.png. About a minute after the build on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
BUILD_DIR="${BUILD_DIR:-build}"
# Every program examples/train/train.sh runs (ddp-opt comes with setup.sh).
cmake --build "$BUILD_DIR" --target ddp-run ddprt-calibrate >/dev/null
# The example's Python: numpy, scikit-learn (its bundled digits data set)
# and matplotlib, from Debian.
if ! /usr/bin/python3 -c "import numpy, sklearn, matplotlib" 2>/dev/null; then
  echo "== installing python3-numpy, python3-sklearn, python3-matplotlib"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    python3-numpy python3-sklearn python3-matplotlib >/dev/null
fi
OPT="$BUILD_DIR/bin/ddp-opt"

echo "== ResNet-18's 62 gradient allreduces (examples/resnet18_grads.mlir), PowerSGD rank 2:"
"$OPT" examples/resnet18_grads.mlir --ddp-compress="powersgd-rank=2 narrow=none" \
  --ddp-compression-report=output=- -o /dev/null | tail -n 1
echo

DDP_OPT="$OPT" DDP_RUN="$BUILD_DIR/bin/ddp-run" \
  DDPRT_CALIBRATE="$BUILD_DIR/runtime/ddprt-calibrate" WORK_DIR="$BUILD_DIR/train" \
  bash examples/train/train.sh
echo
echo "Accuracy is on the 360 held-out digits; elements and bytes are what each"
echo "rank sends per step after PowerSGD's 10 warm-up steps; time is the median"
echo "step of the slowest rank. Loss curves: $BUILD_DIR/train/loss.png; the"
echo "figures and what they mean: docs/training.md."
