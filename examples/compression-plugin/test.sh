#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Installs ddp-opt into a fresh prefix, builds the pass plugin that
# docs/user-guide.md shows ("A compression scheme in C++ (a pass plugin)":
# its CMake block as written, with RandomK.cpp) against that prefix only, and
# uses it as the guide does: ddp-opt --load-pass-plugin compresses step.mlir
# (the report's rows, the IR), ddp-plan chooses it by its cost hook, lowers it, upstream mlir-opt runs it after the
# installed DDPPlugin.so, and ddp-run runs the compressed module on 2 MPI
# ranks for 3 steps, checked against a NumPy model of random-k (check.py);
# bad options and a missing plugin fail with a message. Part of
# scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR="${BUILD_DIR:-build}"
HERE=examples/compression-plugin
WORK="$BUILD_DIR/compression-plugin"
PREFIX="$WORK/prefix"
PROJECT="$WORK/project"
FILECHECK="/usr/lib/llvm-22/bin/FileCheck --dump-input=never"
PYTHON=/usr/bin/python3
rm -rf "$WORK"
mkdir -p "$PROJECT" "$WORK/run"
cmake --install "$BUILD_DIR" --prefix "$PREFIX" >/dev/null
passed=0
pass() { passed=$((passed + 1)); }
fail() { echo "compression-plugin: $*" >&2; exit 1; }

# The guide's block, as written; it must also be the example's file.
awk '/<!-- plugin-cmake/ { marked = 1; next }
     marked && /^```cmake/ { inside = 1; next }
     inside && /^```/ { exit }
     inside { print }' docs/user-guide.md > "$PROJECT/CMakeLists.txt"
[ -s "$PROJECT/CMakeLists.txt" ] || fail "no plugin CMake block in docs/user-guide.md"
diff -u "$HERE/CMakeLists.txt" "$PROJECT/CMakeLists.txt" ||
  fail "docs/user-guide.md's plugin CMake block differs from $HERE/CMakeLists.txt"
cp "$HERE/RandomK.cpp" "$PROJECT/"
cmake -G Ninja -S "$PROJECT" -B "$WORK/build" \
  -DCMAKE_PREFIX_PATH="$PWD/$PREFIX" >/dev/null
cmake --build "$WORK/build" >/dev/null
plugin="$PWD/$WORK/build/DDPRandomK.so"
pass

# The plugin has no ddp code of its own: the dialect (its constructor and
# TypeID) and the scheme machinery are ddp-opt's, undefined here.
ddp_code='DDPDialectC[12]E|TypeIDResolverINS_3ddp10DDPDialectEvE2idE|applyCompressionScheme'
nm -D --defined-only "$plugin" | grep -q 'mlirGetPassPluginInfo' ||
  fail "the plugin does not define mlirGetPassPluginInfo"
if nm -D --defined-only "$plugin" | grep -E "$ddp_code"; then
  fail "the plugin has its own copy of ddp code"
fi
[ "$(nm -D --undefined-only "$plugin" | grep -cE "$ddp_code")" = 3 ] ||
  fail "the plugin does not use ddp-opt's dialect and applyCompressionScheme"
pass

# The guide's commands. Its passes are flags (and in -p pipelines).
opt=("$PREFIX/bin/ddp-opt" "--load-pass-plugin=$plugin")
"${opt[@]}" --help >"$WORK/help.txt"
grep -q -- '--insert-random-k ' "$WORK/help.txt" ||
  fail "ddp-opt --help does not list the plugin's pass"
"${opt[@]}" --insert-random-k=ratio=0.25 "$HERE/step.mlir" --ddp-compression-report \
  -o "$WORK/step.rk.mlir" 2>"$WORK/report.txt"
$FILECHECK --check-prefix=REPORT "$HERE/expected.txt" < "$WORK/report.txt"
"${opt[@]}" --insert-random-k=ratio=0.25 "$HERE/step.mlir" -o /dev/null \
  --ddp-compression-report="json=$WORK/report.json" 2>/dev/null
$FILECHECK --check-prefix=JSON "$HERE/expected.txt" < "$WORK/report.json"
$FILECHECK --check-prefix=IR "$HERE/expected.txt" < "$WORK/step.rk.mlir"
"${opt[@]}" -p 'builtin.module(insert-random-k{ratio=0.25})' "$HERE/step.mlir" 2>/dev/null |
  $FILECHECK --check-prefix=IR "$HERE/expected.txt"
pass
"${opt[@]}" --insert-random-k=ratio=0.25 --ddp-lower-to-llvm "$HERE/step.mlir" 2>/dev/null |
  $FILECHECK --check-prefix=LOWER "$HERE/expected.txt"
pass
# ddp-plan weighs the plugin's scheme by its cost hook, beside plain;
# ddp-apply-planned-schemes compresses the buckets it chose the scheme for.
"${opt[@]}" --ddp-plan="profile=test/Dialect/DDP/Transforms/Inputs/plan-1gbps.json \
choices=plain,random-k{ratio=0.25} tolerance=0 bucket-cap-mb=0" --ddp-apply-planned-schemes \
  --ddp-compression-report "$HERE/step.mlir" -o /dev/null 2>"$WORK/plan.txt"
$FILECHECK --check-prefix=PLAN "$HERE/expected.txt" < "$WORK/plan.txt"
pass
# Upstream mlir-opt, the ddp code coming from the installed DDPPlugin.so.
/usr/lib/llvm-22/bin/mlir-opt --load-dialect-plugin="$PREFIX/lib/DDPPlugin.so" \
  --load-pass-plugin="$PREFIX/lib/DDPPlugin.so" --load-pass-plugin="$plugin" \
  -p 'builtin.module(insert-random-k{ratio=0.25},ddp-compression-report)' \
  "$HERE/step.mlir" -o /dev/null 2>"$WORK/mlir-opt.txt"
$FILECHECK --check-prefix=REPORT "$HERE/expected.txt" < "$WORK/mlir-opt.txt"
pass

# 3 steps on 2 ranks, with the installed ddp-run (no plugin needed: the
# module holds ddp and upstream ops only), against the NumPy model.
run="$WORK/run"
$PYTHON "$HERE/check.py" gen "$run" --ranks 2 --steps 3
"${opt[@]}" --insert-random-k="ratio=0.25 seed=5" \
  "$HERE/step.mlir" -o "$run/step.rk.mlir" 2>/dev/null
mpirun=(mpirun --oversubscribe -np 2)
[ "$(id -u)" = 0 ] && mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2)
"${mpirun[@]}" "$PREFIX/bin/ddp-run" "$run/step.rk.mlir" --steps=3 --quiet \
  --input="$run/in/r{rank}.s{step}.{name}.npy" \
  --output="$run/out/r{rank}.s{step}.o{result}.npy" \
  --dump-state="$run/state/r{rank}.{name}.npy" >"$run/ddp-run.txt"
$PYTHON "$HERE/check.py" check "$run" --ranks 2 --steps 3 --ratio 0.25 --seed 5
pass

# Bad input: a message naming the problem and a non-zero exit.
fails() {
  local prefix="$1"
  shift
  if "$@" >"$WORK/bad.txt" 2>&1; then
    fail "'$*' did not fail"
  fi
  $FILECHECK --check-prefix="$prefix" "$HERE/expected.txt" < "$WORK/bad.txt"
}
fails RATIO0 "${opt[@]}" --insert-random-k=ratio=0 "$HERE/step.mlir"
fails RATIO15 "${opt[@]}" --insert-random-k="ratio=1.5 seed=1" "$HERE/step.mlir"
fails RATIONAN "${opt[@]}" --insert-random-k=ratio=nan "$HERE/step.mlir"
fails RATIOTEXT "${opt[@]}" --insert-random-k=ratio=half "$HERE/step.mlir"
fails REGEX "${opt[@]}" --insert-random-k="buckets=fc(" "$HERE/step.mlir"
fails MISSING "$PREFIX/bin/ddp-opt" --load-pass-plugin="$WORK/missing.so" \
  --insert-random-k=ratio=0.25 "$HERE/step.mlir"
fails NOTAPLUGIN "$PREFIX/bin/ddp-opt" --load-pass-plugin="$PREFIX/lib/libddprt.so" \
  "$HERE/step.mlir"
fails UNLOADED "$PREFIX/bin/ddp-opt" --insert-random-k=ratio=0.25 "$HERE/step.mlir"
pass
echo "compression-plugin: $passed passed, 0 failed"
