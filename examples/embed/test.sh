#!/usr/bin/env bash
# Installs ddp-opt into a fresh prefix, builds examples/embed against that
# prefix only, and checks what it prints. Part of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR="${BUILD_DIR:-build}"
PREFIX="$BUILD_DIR/embed-prefix"
rm -rf "$PREFIX" "$BUILD_DIR/embed"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" >/dev/null
cmake -G Ninja -S examples/embed -B "$BUILD_DIR/embed" \
  -DCMAKE_PREFIX_PATH="$PWD/$PREFIX" \
  >/dev/null
cmake --build "$BUILD_DIR/embed" >/dev/null
"$BUILD_DIR/embed/ddp-embed" examples/resnet18_grads.mlir 2 \
  | /usr/lib/llvm-22/bin/FileCheck examples/embed/expected.txt
"$PREFIX/bin/ddp-opt" --version >/dev/null
echo "embed: 1 passed, 0 failed"
