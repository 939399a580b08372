#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Installs what ddp-opt needs on Debian 12 (only what is missing), then
# configures and builds it into build/ with ninja and ccache.
#   scripts/setup.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(cmake ninja-build g++ ccache python3
          llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
          openmpi-bin libopenmpi-dev libgtest-dev libonnx-dev libprotobuf-dev
          libzip-dev nlohmann-json3-dev libgoogle-perftools-dev
          libopenblas-dev pkgconf libomp-22-dev)

missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

BUILD_DIR="${BUILD_DIR:-build}"
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    "$@"
fi
cmake --build "$BUILD_DIR" --target ddp-opt ddp-import-onnx ddprt
