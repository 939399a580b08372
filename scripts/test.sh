#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The whole test suite: installs and builds what is missing, then runs every
# lit test (dialect, passes, pipelines, bad input, random modules) and the
# runtime's GoogleTest tests (on 1 rank and on 4 MPI ranks), and builds the
# embedding example and the compression plugin against a fresh install of
# the package.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Debian's PyTorch 1.13 (CPU), torchvision and onnx: the tests that compare
# with PyTorch's hooks and rule, and export real models to ONNX, use them;
# scikit-learn (the digits) and matplotlib: the training example's test.
# mpi4py: the Python package's runtime joining a communicator the script made.
if ! /usr/bin/python3 -c "import torch, torchvision, onnx, sklearn, matplotlib, mpi4py" 2>/dev/null; then
  echo "== installing python3-torch, python3-torchvision, python3-onnx, python3-sklearn, python3-matplotlib, python3-mpi4py"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
    python3-torch python3-torchvision python3-onnx python3-sklearn \
    python3-matplotlib python3-mpi4py >/dev/null
fi
# iproute2 (ip, tc): the tests across hosts make them as network
# namespaces (bench/net/hosts.sh; as root only).
if [ "$(id -u)" = 0 ] && ! command -v tc >/dev/null; then
  echo "== installing iproute2"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
fi
BUILD_DIR="${BUILD_DIR:-build}"
# CMake finds the optional test features (torch, numpy, sklearn) when it
# configures; configure again now that they are installed.
cmake "$BUILD_DIR" >/dev/null
cmake --build "$BUILD_DIR" --target check-ddp
# An out-of-tree compiler built against the installed package only, and a
# pass plugin that ddp-opt loads (run on 2 MPI ranks).
bash examples/embed/test.sh
bash examples/compression-plugin/test.sh
cmake --build "$BUILD_DIR" --target check-runtime
# The runtime again under ASan+UBSan (scripts/sanitize.sh --all adds the
# compiler and the lit suite; too slow for every run).
bash scripts/sanitize.sh
