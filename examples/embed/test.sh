#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Installs ddp-opt into a fresh prefix, builds the CMake project that
# docs/user-guide.md shows ("In your own compiler", exactly as written, with
# examples/embed/ddp-embed.cpp) against that prefix only, and checks what it
# prints: the compressed step, the lowered step, and the error a host gets
# without the bufferization models. Part of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR="${BUILD_DIR:-build}"
PREFIX="$BUILD_DIR/embed-prefix"
PROJECT="$BUILD_DIR/embed-project"
FILECHECK="/usr/lib/llvm-22/bin/FileCheck --dump-input=never"
rm -rf "$PREFIX" "$PROJECT" "$BUILD_DIR/embed"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" >/dev/null

# The guide's block, as written; it must also be the example's file.
mkdir -p "$PROJECT"
awk '/<!-- embed-cmake/ { marked = 1; next }
     marked && /^```cmake/ { inside = 1; next }
     inside && /^```/ { exit }
     inside { print }' docs/user-guide.md > "$PROJECT/CMakeLists.txt"
[ -s "$PROJECT/CMakeLists.txt" ] || { echo "embed: no CMake block in docs/user-guide.md" >&2; exit 1; }
diff -u examples/embed/CMakeLists.txt "$PROJECT/CMakeLists.txt" ||
  { echo "embed: docs/user-guide.md's CMake block differs from examples/embed/CMakeLists.txt" >&2; exit 1; }
cp examples/embed/ddp-embed.cpp "$PROJECT/"
cmake -G Ninja -S "$PROJECT" -B "$BUILD_DIR/embed" \
  -DCMAKE_PREFIX_PATH="$PWD/$PREFIX" >/dev/null
cmake --build "$BUILD_DIR/embed" >/dev/null

embed="$BUILD_DIR/embed/ddp-embed"
"$embed" examples/resnet18_grads.mlir 2 | $FILECHECK examples/embed/expected.txt
"$embed" examples/resnet18_grads.mlir 2 --lower |
  $FILECHECK --check-prefix=LOWER examples/embed/expected.txt
if "$embed" examples/resnet18_grads.mlir 2 --lower --without-models \
    >/dev/null 2>"$BUILD_DIR/embed/without-models.txt"; then
  echo "embed: lowering without the bufferization models did not fail" >&2
  exit 1
fi
$FILECHECK --check-prefix=NOMODELS examples/embed/expected.txt \
  < "$BUILD_DIR/embed/without-models.txt"
# Every tool is installed, says its version and the LLVM it was built
# with, and runs from the prefix (its libraries found through its RPATH).
version="$(head -n 1 VERSION)"
tools=(ddp-opt ddp-run ddprt-step-runner ddprt-calibrate)
[ -x "$BUILD_DIR/bin/ddp-import-onnx" ] && tools+=(ddp-import-onnx)
for tool in "${tools[@]}"; do
  [ -x "$PREFIX/bin/$tool" ] || { echo "embed: $tool is not installed" >&2; exit 1; }
  "$PREFIX/bin/$tool" --version | grep -q "^$tool (ddp-opt $version)" ||
    { echo "embed: $tool --version does not say ddp-opt $version" >&2; exit 1; }
done
"$PREFIX/bin/ddp-opt" --version | grep -q "built with LLVM and MLIR 22\." ||
  { echo "embed: ddp-opt --version does not name its LLVM" >&2; exit 1; }
for file in lib/libddprt-host.a include/ddprt-host/StepHost.h include/ddp/Version.h \
    lib/libDDPStepCompiler.a include/ddp/Target/StepCompiler.h include/ddprt-host/MemRef.h; do
  [ -f "$PREFIX/$file" ] || { echo "embed: $file is not installed" >&2; exit 1; }
done
printf 'func.func @step(%%g: tensor<4xf32>) -> tensor<4xf32> {\n  %%r = ddp.allreduce mean %%g : tensor<4xf32>\n  return %%r : tensor<4xf32>\n}\n' \
  > "$BUILD_DIR/embed/step.mlir"
"$PREFIX/bin/ddp-run" "$BUILD_DIR/embed/step.mlir" --emit-step="$BUILD_DIR/embed/step" --quiet
# The installed Python package finds the installed libraries: it compiles
# a step and runs it (one rank).
PYTHONPATH="$PWD/$PREFIX/lib/python3/dist-packages" /usr/bin/python3 - "$BUILD_DIR/embed/py-step" <<'PY' |
import sys
import numpy as np
import ddp_opt
ddp_opt.compile_step(open(sys.argv[1].rsplit("/", 1)[0] + "/step.mlir").read(), sys.argv[1],
                     pipeline="builtin.module(ddp-compress{narrow=fp16})")
runtime = ddp_opt.Runtime()
g = np.arange(4, dtype=np.float32)
ddp_opt.Step(sys.argv[1]).run(runtime, [g.ctypes.data], [g.ctypes.data])
print("python:", ddp_opt.library_dir().endswith("embed-prefix/lib"), g.tolist())
PY
  grep -q "^python: True \[0.0, 1.0, 2.0, 3.0\]" ||
  { echo "embed: the installed Python package did not compile and run a step from the prefix" >&2; exit 1; }
# The installed calibration starts its own ranks and ends with a verdict.
"$PREFIX/bin/ddprt-calibrate" --np=2 --max-bytes=4K --reps=1 --kernel-shapes=8x8x1 \
  --kernel-elements=1K --kernel-working-set=4K --out="$BUILD_DIR/embed/profile.json" |
  grep -q "^verdict: " ||
  { echo "embed: the installed ddprt-calibrate --np=2 gave no verdict" >&2; exit 1; }
echo "embed: 6 passed, 0 failed"
