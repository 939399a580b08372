#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Two levels against one, on real links: HOSTS hosts of PER_HOST ranks each
# (bench/net/hosts.sh: network namespaces, root; the ranks of a host share
# memory, the hosts a rate-limited link each), ResNet-50's gradient shapes
# (bench/cpu/gen_step.py), one synchronous step: ours, compiled by ddp-opt
# --ddp-compress and run by ddp-run --hostfile, flat (every collective over
# all ranks) and two-level (two-level=collectives: each collective within
# the host, then one copy per host across; two-level=node-mean: each host's
# exact mean first, compressed across hosts), plain and PowerSGD rank 2;
# and PyTorch 1.13's DDP (gloo) on the same ranks and links, with its
# allreduce and powerSGD_hook (bench/cpu/torch_hooks.py, one process per
# rank, MASTER_ADDR on host 0). Median step time of each, and the speedups.
#   bash bench/net/two_level.sh
# RATES="100mbit 1gbit" HOSTS=2 PER_HOST=2 STEPS=8 PLAIN_STEPS=2 choose the
# runs (plain steps take seconds at 100 Mb/s); OUT=FILE also writes the
# table there.
set -euo pipefail
cd "$(dirname "$0")/../.."
RATES="${RATES:-100mbit 1gbit}"
HOSTS="${HOSTS:-2}"
PER_HOST="${PER_HOST:-2}"
STEPS="${STEPS:-8}"
PLAIN_STEPS="${PLAIN_STEPS:-2}"
BUILD_DIR="${BUILD_DIR:-build}"
PYTHON=/usr/bin/python3
WORLD=$((HOSTS * PER_HOST))
HOSTS_SH=bench/net/hosts.sh
bash "$HOSTS_SH" check
if ! "$PYTHON" -c "import torch" 2>/dev/null; then
  echo "two_level.sh: PyTorch is needed for the comparison (apt-get install python3-torch)" >&2
  exit 1
fi
cmake --build "$BUILD_DIR" --target ddp-opt ddp-run >/dev/null
WORK=$(mktemp -d)
NET=()
trap 'for d in "${NET[@]}"; do bash "$HOSTS_SH" down "$d" || true; done; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/bin" "$WORK/lib"
cp "$BUILD_DIR/bin/ddp-opt" "$BUILD_DIR/bin/ddp-run" "$WORK/bin/"
cp -P "$BUILD_DIR"/lib/libddprt.so* "$WORK/lib/"

count=$("$PYTHON" bench/cpu/gen_step.py "$WORK/model" --world "$WORLD" --model resnet50)
inputs=()
carry=""
for ((i = 0; i < count; ++i)); do
  inputs+=("--input=$WORK/model/g.r{rank}.a$i.npy")
  carry+="${carry:+,}$i:$i"
done
declare -A OPTIONS=(
  [flat-plain]=""
  [two-level-plain]="two-level=collectives"
  [flat-powersgd]="powersgd-rank=2 start-iter=0"
  [two-level-powersgd]="powersgd-rank=2 start-iter=0 two-level=collectives"
  [node-mean-powersgd]="powersgd-rank=2 start-iter=0 two-level=node-mean"
)
ORDER=(flat-powersgd two-level-powersgd node-mean-powersgd flat-plain two-level-plain)
for plan in "${ORDER[@]}"; do
  "$WORK/bin/ddp-opt" "$WORK/model/step.mlir" --ddp-compress="${OPTIONS[$plan]}" \
    -o "$WORK/$plan.mlir"
done

RESULTS="$WORK/results.txt"
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $HOSTS hosts x $PER_HOST ranks, ResNet-50 shapes, source $(git rev-parse --short HEAD)"
for rate in $RATES; do
  dir="$WORK/hosts-$rate"
  HOSTS_SLOTS="$PER_HOST" bash "$HOSTS_SH" up "$dir" "$HOSTS" "$rate"
  NET+=("$dir")
  for plan in "${ORDER[@]}"; do
    steps=$STEPS
    [[ "$plan" == *plain ]] && steps=$PLAIN_STEPS
    bash "$HOSTS_SH" exec "$dir" 0 env $(cat "$dir/mpi.env") \
      "$WORK/bin/ddp-run" --np="$WORLD" --hostfile="$dir/hostfile" "$WORK/$plan.mlir" \
      --steps="$steps" --quiet "${inputs[@]}" --carry="$carry" --timeout=600 \
      --summary-json="$WORK/$plan.$rate.json" >/dev/null
    ms=$("$PYTHON" -c 'import json, sys; print("%.1f" % json.load(open(sys.argv[1]))["ms_per_step"])' \
      "$WORK/$plan.$rate.json")
    echo "$rate ours $plan $ms" >>"$RESULTS"
  done
  # PyTorch: rank r on host r / PER_HOST; rank 0 prints.
  master="$(head -n 1 "$dir/hosts" | cut -d' ' -f1)"
  torch_run() { # KIND STEPS
    local r
    for ((r = WORLD - 1; r >= 1; --r)); do
      GLOO_SOCKET_IFNAME=eth0 bash "$HOSTS_SH" exec "$dir" $((r / PER_HOST)) \
        "$PYTHON" bench/cpu/torch_hooks.py --model resnet50 --world "$WORLD" --kinds "$1" \
        --steps "$2" --process-rank "$r" --master-addr "$master" >/dev/null &
    done
    GLOO_SOCKET_IFNAME=eth0 bash "$HOSTS_SH" exec "$dir" 0 \
      "$PYTHON" bench/cpu/torch_hooks.py --model resnet50 --world "$WORLD" --kinds "$1" \
      --steps "$2" --process-rank 0 --master-addr "$master"
    wait
  }
  torch_run powersgd "$STEPS" | awk -v r="$rate" '$1=="torch" && $3=="median" {print r, "pytorch", "powerSGD_hook", $4}' >>"$RESULTS"
  torch_run allreduce "$PLAIN_STEPS" | awk -v r="$rate" '$1=="torch" && $3=="median" {print r, "pytorch", "allreduce", $4}' >>"$RESULTS"
  bash "$HOSTS_SH" down "$dir"
done

"$PYTHON" - "$RESULTS" "$HOSTS" "$PER_HOST" <<'PY' | tee "${OUT:-/dev/null}"
import sys
rows = [line.split() for line in open(sys.argv[1])]
hosts, per_host = sys.argv[2], sys.argv[3]
ms = {(r, who, plan): float(v) for r, who, plan, v in rows}
print(f"| link ({hosts} hosts x {per_host} ranks) | who | step | ms per step | vs flat PowerSGD | vs PyTorch powerSGD_hook | vs PyTorch allreduce |")
print("|---|---|---|---:|---:|---:|---:|")
for (rate, who, plan), v in ms.items():
    flat = ms.get((rate, "ours", "flat-powersgd"))
    hook = ms.get((rate, "pytorch", "powerSGD_hook"))
    plain = ms.get((rate, "pytorch", "allreduce"))
    ratio = lambda peer: f"{peer / v:.2f}x" if peer else "-"
    print(f"| {rate} (real link) | {who} | {plan} | {v:.1f} | {ratio(flat)} | {ratio(hook)} | {ratio(plain)} |")
PY
