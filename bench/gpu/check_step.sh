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
exit $status
