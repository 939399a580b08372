#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The compiled-step check: runs the steps that bench/gpu/prepare.sh compiled
# ahead of time (.gpu-step/) with ddprt-step-runner on one rank and checks
# the results against the inputs and against ddp-run's CPU references
# (bench/gpu/check_step.py says what is bitwise and what is within
# rounding). Prints one line per check and "check_step: all passed".
#
#   bash bench/gpu/check_step.sh RUNNER cpu|cuda WORKDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
RUNNER="$1"
BACKEND="$2"
WORK="$3"
# A Python with numpy: $PYTHON, python3, or Debian's.
if [ -z "${PYTHON:-}" ]; then
  PYTHON=python3
  if ! python3 -c "import numpy" 2>/dev/null && [ -x /usr/bin/python3 ]; then
    PYTHON=/usr/bin/python3
  fi
fi
STEP=.gpu-step
if [ ! -f "$STEP/steps.txt" ]; then
  echo "check_step: no $STEP/ here: run 'bash bench/gpu/prepare.sh' where MLIR is, and carry $STEP"
  exit 2
fi
STEPS=$(cat "$STEP/steps.txt")
rm -rf "$WORK"
mkdir -p "$WORK"
inputs=()
for i in 0 1 2; do
  inputs+=("--input=$STEP/data/in.r{rank}.s{step}.a$i.npy")
done
status=0
for kind in plain fp16 powersgd quant quantpc hook; do
  echo "-- $kind: ddprt-step-runner --backend=$BACKEND --steps=$STEPS"
  "$RUNNER" "$STEP/$kind" --backend="$BACKEND" --steps="$STEPS" "${inputs[@]}" \
    --output="$WORK/$kind/s{step}.o{result}.npy" \
    --dump-state="$WORK/$kind/state.{name}.npy" \
    --summary-json="$WORK/$kind.json" || status=1
done
"$PYTHON" bench/gpu/check_step.py --data "$STEP/data" --ref "$STEP/ref" \
  --out "$WORK" --steps "$STEPS" --backend "$BACKEND" || status=1
# The schemes lowered for the GPU (ddp-lower-to-llvm{target=cuda}): on the
# GPU, bit for bit what the CPU library made with the same sum order
# (ref/KIND-source); on the CPU backend, a clear refusal.
for kind in quant quantpc hook; do
  [ -d "$STEP/$kind-kernels" ] || { echo "-- $kind-kernels: missing (rerun bench/gpu/prepare.sh)"; status=1; continue; }
  echo "-- $kind-kernels: ddprt-step-runner --backend=$BACKEND --steps=$STEPS"
  if [ "$BACKEND" != cuda ]; then
    if "$RUNNER" "$STEP/$kind-kernels" --backend="$BACKEND" --steps=1 "${inputs[@]}" \
        > "$WORK/$kind-kernels.log" 2>&1; then
      echo "FAIL: a step lowered for the GPU ran on the $BACKEND backend"; status=1
    elif grep -q "DDPRT_ERROR_UNSUPPORTED" "$WORK/$kind-kernels.log"; then
      echo "OK: refused on the $BACKEND backend (DDPRT_ERROR_UNSUPPORTED)"
    else
      echo "FAIL: refused without saying why:"; cat "$WORK/$kind-kernels.log"; status=1
    fi
    continue
  fi
  "$RUNNER" "$STEP/$kind-kernels" --backend="$BACKEND" --steps="$STEPS" "${inputs[@]}" \
    --output="$WORK/$kind-kernels/s{step}.o{result}.npy" \
    --dump-state="$WORK/$kind-kernels/state.{name}.npy" || { status=1; continue; }
  "$PYTHON" bench/gpu/compare_bitwise.py "$STEP/ref/$kind-source" "$WORK/$kind-kernels" || status=1
done
exit $status
