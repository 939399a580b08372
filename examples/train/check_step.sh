#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Checks the training example's step function (gen_mlp_step.py):
#  1. ddp-opt parses it, and every compression the demo uses (train.sh)
#     accepts it: PowerSGD compresses w1 and w2 of the 4 gradients, fp16
#     sends all 4 in fp16;
#  2. without its allreduces, upstream mlir-opt/mlir-runner run it and its
#     results match the numpy model (check_step.py), at the demo's sizes and
#     at odd small sizes with lr 1.
# Exits non-zero on any failure. Tools: DDP_OPT (default build/bin/ddp-opt),
# MLIR_OPT, MLIR_RUNNER, MLIR_LIB_DIR (default: LLVM 22's), PYTHON
# (default /usr/bin/python3, which needs numpy).
set -euo pipefail
cd "$(dirname "$0")/../.."

DDP_OPT="${DDP_OPT:-build/bin/ddp-opt}"
MLIR_OPT="${MLIR_OPT:-/usr/lib/llvm-22/bin/mlir-opt}"
MLIR_RUNNER="${MLIR_RUNNER:-/usr/lib/llvm-22/bin/mlir-runner}"
MLIR_LIB_DIR="${MLIR_LIB_DIR:-/usr/lib/llvm-22/lib}"
PYTHON="${PYTHON:-/usr/bin/python3}"
HERE=examples/train

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

"$PYTHON" "$HERE/gen_mlp_step.py" -o "$TMP/step.mlir"

# expect_report PASSES... -- TEXT: the compression report's total line
# after PASSES must contain TEXT.
expect_report() {
  local passes=() want
  while [ "$1" != "--" ]; do passes+=("$1"); shift; done
  want="$2"
  local total
  total="$("$DDP_OPT" "$TMP/step.mlir" "${passes[@]}" \
             --ddp-compression-report=output=- -o /dev/null | tail -n 1)"
  if [[ "$total" != *"$want"* ]]; then
    echo "FAIL: ddp-opt ${passes[*]}: expected '$want' in: $total" >&2
    exit 1
  fi
  echo "ok: ddp-opt ${passes[*]:-(no pass)}: $total"
}

expect_report -- "4 tensors, 0 compressed"
expect_report --insert-fp16-compression -- "bytes 38440 -> 19220"
for rank in 1 2 4; do
  for feedback in true false; do
    expect_report "--insert-powersgd=rank=$rank start-iter=10 error-feedback=$feedback" \
      -- "4 tensors, 2 compressed"
  done
done

for sizes in "" "--hidden 7 --batch 5 --lr 1"; do
  echo "== upstream lowering and run, numpy comparison ${sizes:-(defaults)}"
  # shellcheck disable=SC2086  # $sizes is a list of options
  "$PYTHON" "$HERE/check_step.py" --mlir-opt "$MLIR_OPT" --mlir-runner "$MLIR_RUNNER" \
    --lib-dir "$MLIR_LIB_DIR" $sizes
done
echo "check_step: all passed"
