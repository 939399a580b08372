#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The planning table: for the bundled models (the digits demo's MLP,
# examples/resnet18_grads.mlir, ResNet-50's and GPT-2 medium's gradient
# shapes) and links from 1 Gb/s to NVLink-class, what ddp-plan makes of
# each bucket and the predicted exchange per step, against plain allreduce.
# Link figures are written by hand (ddprt-calibrate --hand: the link's
# bandwidth and latency, W ranks); kernel times are this machine's CPU
# (ddprt-calibrate --kernels-only on one rank): a GPU's kernels are one to
# two orders of magnitude faster, which moves the break-even towards
# compression on fast links.
#   bash bench/plan/table.sh [world]
set -euo pipefail
cd "$(dirname "$0")/../.."
WORLD="${1:-8}"
BUILD_DIR="${BUILD_DIR:-build}"
PYTHON=/usr/bin/python3
# Gb/s and latency (us): Ethernet, datacenter Ethernet/InfiniBand, NDR
# InfiniBand, NVLink 4 (one direction).
LINKS=("1 50" "10 20" "100 10" "400 5" "3600 3")

cmake --build "$BUILD_DIR" --target ddp-opt ddprt-calibrate >/dev/null
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$BUILD_DIR/runtime/ddprt-calibrate" --kernels-only --out="$WORK/kernels.json" >/dev/null
"$PYTHON" examples/train/gen_mlp_step.py -o "$WORK/mlp.mlir" >/dev/null
"$PYTHON" bench/cpu/gen_step.py "$WORK/resnet50" --model resnet50 --no-data >/dev/null
"$PYTHON" bench/cpu/gen_step.py "$WORK/gpt2" --model gpt2-medium --no-data >/dev/null
declare -A MODELS=([digits-mlp]="$WORK/mlp.mlir" [resnet18]=examples/resnet18_grads.mlir
                   [resnet50]="$WORK/resnet50/step.mlir" [gpt2-medium]="$WORK/gpt2/step.mlir")

echo "== $(date -u '+%Y-%m-%d'), $WORLD ranks, kernels of this machine's CPU ($(nproc) cores), source $(git rev-parse --short HEAD)"
echo "| model | link | buckets | plain ms | planned ms | planned vs plain | what the buckets became |"
echo "|---|---|---:|---:|---:|---:|---|"
for model in digits-mlp resnet18 resnet50 gpt2-medium; do
  for link in "${LINKS[@]}"; do
    read -r gbps latency <<<"$link"
    "$BUILD_DIR/runtime/ddprt-calibrate" --hand --link-gbps="$gbps" --latency-us="$latency" \
      --world="$WORLD" --out="$WORK/link.json" >/dev/null
    "$BUILD_DIR/bin/ddp-opt" "${MODELS[$model]}" \
      --ddp-plan="profile=$WORK/link.json kernels=$WORK/kernels.json" \
      --ddp-compression-report="output=/dev/null json=$WORK/report.json" -o /dev/null
    "$PYTHON" - "$model" "$gbps" "$WORK/report.json" <<'PY'
import collections, json, sys
model, gbps, path = sys.argv[1:]
plan = json.load(open(path))["plan"]
became = collections.Counter(b["choice"] for b in plan["buckets"])
total = plan["total_us"]
name = f"{int(gbps) // 8 * 8 / 8:g} GB/s NVLink-class" if int(gbps) > 1000 else f"{gbps} Gb/s"
print(f"| {model} | {name} | {len(plan['buckets'])} | {total['plain'] / 1e3:.2f} | "
      f"{total['planned'] / 1e3:.2f} | {total['plain'] / total['planned']:.2f}x | "
      + ", ".join(f"{n} {c}" for c, n in sorted(became.items())) + " |")
PY
  done
done
