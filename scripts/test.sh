#!/usr/bin/env bash
# The whole test suite: installs and builds what is missing, then runs every
# lit test (dialect, passes, pipelines, bad input, random modules) and the
# runtime's GoogleTest tests (on 1 rank and on 4 MPI ranks).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR="${BUILD_DIR:-build}"
cmake --build "$BUILD_DIR" --target check-ddp
cmake --build "$BUILD_DIR" --target check-runtime
