#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Import and plan ResNet-50 from ONNX: exports torchvision's ResNet-50 with
# Debian's torch, then times ddp-import-onnx and ddp-opt's PowerSGD plan
# (median of 5 runs each) and prints the compression at ranks 1, 2 and 4.
#   bash bench/onnx_import_bench.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
/usr/bin/python3 - "$TMP/r50.onnx" <<'PY' 2>/dev/null
import sys, torch, torchvision
torch.onnx.export(torchvision.models.resnet50(), torch.randn(1, 3, 224, 224),
                  sys.argv[1], training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, opset_version=13)
PY
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_it() {
  for _ in 1 2 3 4 5; do
    /usr/bin/time -f "%e" "$@" 2>&1 >/dev/null | tail -n 1
  done | median
}
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), ResNet-50 ONNX $(du -h "$TMP/r50.onnx" | cut -f1)"
"$BUILD/bin/ddp-import-onnx" "$TMP/r50.onnx" -o "$TMP/r50.mlir"
echo "import s: $(time_it "$BUILD/bin/ddp-import-onnx" "$TMP/r50.onnx" -o "$TMP/r50.mlir")"
echo "plan s:   $(time_it "$BUILD/bin/ddp-opt" "$TMP/r50.mlir" --insert-powersgd=rank=2 --ddp-compression-report=output="$TMP/r.txt" -o /dev/null)"
for rank in 1 2 4; do
  echo "rank $rank: $("$BUILD/bin/ddp-opt" "$TMP/r50.mlir" --insert-powersgd=rank=$rank \
    --ddp-compression-report=output=- -o /dev/null | tail -n 1)"
done
