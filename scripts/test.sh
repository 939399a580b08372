#!/usr/bin/env bash
# The whole test suite: installs and builds what is missing, then runs every
# lit test (dialect, passes, pipelines, bad input, random modules).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR="${BUILD_DIR:-build}"
cmake --build "$BUILD_DIR" --target check-ddp
