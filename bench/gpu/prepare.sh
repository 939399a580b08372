#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Prepares the compiled-step check of bench/gpu/run.sh. Run it here, where
# MLIR is, before calling the GPU machine (which has no LLVM, MLIR or MPI):
#
#   bash bench/gpu/prepare.sh       # writes .gpu-step/ (git-ignored)
#
# then carry .gpu-step to the GPU machine with the tree and run
# `bash bench/gpu/run.sh` there. It writes, for three step functions of
# steps.py's three gradients (64x32, 32, 48x24) on one rank:
#   .gpu-step/{plain,fp16,powersgd}/  libstep.so + step.json, compiled ahead
#       of time by `ddp-run --emit-step` (plain allreduce mean; fp16
#       compression; PowerSGD rank 2, start-iter 1, error feedback)
#   .gpu-step/data/   the gradients of STEPS steps (rank-2 matrices)
#   .gpu-step/ref/    what ddp-run (JIT, CPU backend) makes of them: every
#       step's results, the final states and the counters
# and then runs bench/gpu/check_step.sh with this build's ddprt-step-runner
# on the CPU backend, which must reproduce the references bitwise. It also
# copies what the GPU machine lacks to build the runtime and its tests into
# .gtest/ (git-ignored): GoogleTest's sources, and nlohmann-json's headers
# (step.json's reader) in .gtest/nlohmann-json/. Carry both: the device
# tool's `carry: [".gpu-step", ".gtest"]`.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR="${BUILD_DIR:-build}"
PYTHON="${PYTHON:-/usr/bin/python3}"
STEPS="${STEPS:-6}"
STEP=.gpu-step

cmake --build "$BUILD_DIR" --target ddp-opt ddp-run ddprt-step-runner >/dev/null
BIN="$BUILD_DIR/bin"
rm -rf "$STEP"
mkdir -p "$STEP/ref"
"$PYTHON" test/Integration/ddp-run/Inputs/steps.py gen "$STEP/data" \
  --ranks 1 --steps "$STEPS" --low-rank 2 --seed 11
echo "$STEPS" > "$STEP/steps.txt"

inputs=()
for i in 0 1 2; do
  inputs+=("--input=$STEP/data/in.r{rank}.s{step}.a$i.npy")
done
cp "$STEP/data/step.mlir" "$STEP/plain.mlir"
"$BIN/ddp-opt" --insert-fp16-compression "$STEP/data/step.mlir" -o "$STEP/fp16.mlir"
"$BIN/ddp-opt" --insert-powersgd="rank=2 start-iter=1" "$STEP/data/step.mlir" \
  -o "$STEP/powersgd.mlir"
"$BIN/ddp-opt" --ddp-bucketize --insert-quantization "$STEP/data/step.mlir" -o "$STEP/quant.mlir"
"$BIN/ddp-opt" --ddp-bucketize --insert-quantization="granularity=per-channel channel-size=64" \
  "$STEP/data/step.mlir" -o "$STEP/quantpc.mlir"
"$BIN/ddp-opt" --ddp-bucketize \
  --ddp-apply-hook="hook=sign_ef_hook from=examples/hooks/sign_ef_hook.mlir" \
  "$STEP/data/step.mlir" -o "$STEP/hook.mlir"
# The GPU machine's runtime is built alone, without LLVM's libomp: the
# libraries keep every loop on one host thread (--parallel-loops=false).
# The reference is the library itself, run here: a JIT-compiled step is
# compiled for this machine's CPU (FMA contractions), the library for any
# x86-64, and the sign hook's scale then differs in its last bits.
for kind in plain fp16 powersgd quant quantpc hook; do
  "$BIN/ddp-run" "$STEP/$kind.mlir" --emit-step="$STEP/$kind" --parallel-loops=false
  "$BIN/ddprt-step-runner" "$STEP/$kind" --steps="$STEPS" --quiet "${inputs[@]}" \
    --output="$STEP/ref/$kind/s{step}.o{result}.npy" \
    --dump-state="$STEP/ref/$kind/state.{name}.npy" \
    --summary-json="$STEP/ref/$kind.json" >/dev/null
done
# The same schemes lowered for the GPU (--target=cuda): their loops are
# kernels the runtime launches. check_step.sh compares their results on
# the GPU bit for bit with the CPU library's, both with every sum in source
# order (the CPU's vector lanes would add in another order; a kernel adds
# in its loop's order and contracts nothing).
for kind in quant quantpc hook; do
  "$BIN/ddp-run" "$STEP/$kind.mlir" --emit-step="$STEP/$kind-source" \
    --parallel-loops=false --sum-order=source
  "$BIN/ddprt-step-runner" "$STEP/$kind-source" --steps="$STEPS" --quiet "${inputs[@]}" \
    --output="$STEP/ref/$kind-source/s{step}.o{result}.npy" \
    --dump-state="$STEP/ref/$kind-source/state.{name}.npy" >/dev/null
  "$BIN/ddp-run" "$STEP/$kind.mlir" --emit-step="$STEP/$kind-kernels" --target=cuda \
    --sum-order=source
  rm -rf "$STEP/$kind-source"
done
# The overlap benchmark's MLP step (issue 13), 4 layers of 1024, PowerSGD
# rank 2, scheduled (ddp-schedule-overlap) and not: run.sh times both on
# the GPU, with the host barriers and with a wait after every runtime call.
"$PYTHON" bench/overlap/gen_mlp_step.py --layers 4 --hidden 1024 --batch 16 \
  -o "$STEP/mlp.mlir"
"$PYTHON" bench/overlap/gen_mlp_step.py --layers 4 --hidden 1024 --batch 16 \
  --prepare "$STEP/mlp-data" --ranks 1
for overlap in true false; do
  "$BIN/ddp-opt" "$STEP/mlp.mlir" --mlir-print-debuginfo \
    --ddp-compress="powersgd-rank=2 start-iter=1 overlap=$overlap" \
    -o "$STEP/mlp.$overlap.mlir" 2>/dev/null
  "$BIN/ddp-run" "$STEP/mlp.$overlap.mlir" --emit-step="$STEP/mlp-overlap-$overlap" \
    --parallel-loops=false
done
# What travels does not need the objects.
rm -f "$STEP"/*/step.o
# ddp_opt.torch's hook on the GPU: its buckets compiled here (the GPU
# machine has no compiler) into a cache carried along, with the CPU's
# results to compare with.
cmake --build "$BUILD_DIR" --target ddp-python >/dev/null
PYTHONPATH="$BUILD_DIR/python" "$PYTHON" bench/gpu/hook_check.py --prepare "$STEP/torch-hook"
rm -f "$STEP"/torch-hook/cache/*/step.o "$STEP"/torch-hook/cache/*.lock

echo "== the prepared steps, run here by ddprt-step-runner on the CPU"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PYTHON="$PYTHON" bash bench/gpu/check_step.sh "$BIN/ddprt-step-runner" cpu "$WORK"
rm -rf .gtest
if [ -d /usr/src/googletest ]; then
  cp -r /usr/src/googletest .gtest
fi
if [ -f /usr/include/nlohmann/json.hpp ]; then
  mkdir -p .gtest/nlohmann-json
  cp -r /usr/include/nlohmann .gtest/nlohmann-json/
else
  echo "prepare: no /usr/include/nlohmann (nlohmann-json3-dev): the GPU machine cannot build ddprt-host" >&2
  exit 1
fi
echo "== $STEP/ ($(du -sh "$STEP" | cut -f1)) and .gtest/ are ready; carry them to the GPU machine"
