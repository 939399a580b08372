#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Bucket schemes side by side: ResNet-18's gradient sync (62 tensors, 11.7 M
# f32 elements, DDP's 25 MiB buckets) on 2 ranks, time per step with plain
# allreduce, fp16, PyTorch's per-tensor quantization hook (our default
# one-allgather exchange and PyTorch's two-allgather one), the user
# guide's sign hook and top-k sparsification (1% of each bucket, with error
# feedback), on loopback and on simulated 1 and 10 Gb/s links (a
# model of a link in the runtime, not a network: ddp-run --simulated-link),
# or on real links: LINKS="net:1gbit net:100mbit" runs the 2 ranks on 2
# hosts of bench/net/hosts.sh (network namespaces, root) with --hostfile.
# PyTorch 1.13's own hooks on the same gradient shapes (DDP, gloo: its
# allreduce_hook, fp16_compress_hook and quantization_pertensor_hook,
# bench/cpu/torch_hooks.py) follow on loopback and on the real links, the
# same hosts; not on the simulated ones, which only our runtime models.
#   [LINKS="loopback 10 1 net:1gbit ..."] bash bench/hooks/run.sh [steps]
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS="${1:-5}"
BUILD_DIR="${BUILD_DIR:-build}"
OPT="$BUILD_DIR/bin/ddp-opt"
RUN="$BUILD_DIR/bin/ddp-run"
WORK="$BUILD_DIR/bench-hooks"
LINKS="${LINKS:-loopback 10 1}"
# Latency of each simulated link (us).
declare -A LATENCY=([100]=10 [10]=20 [1]=50)
rm -rf "$WORK" && mkdir -p "$WORK/data"
WORK="$(cd "$WORK" && pwd)"
MODEL=examples/resnet18_grads.mlir
HOSTS_SH=bench/net/hosts.sh
NET_HOSTS=()
trap 'for d in "${NET_HOSTS[@]}"; do bash "$HOSTS_SH" down "$d" || true; done' EXIT
for link in $LINKS; do
  case "$link" in
    loopback) ;;
    net:*)
      bash "$HOSTS_SH" up "$WORK/hosts-${link#net:}" 2 "${link#net:}"
      NET_HOSTS+=("$WORK/hosts-${link#net:}") ;;
    *) [ -n "${LATENCY[$link]:-}" ] ||
         { echo "run.sh: unknown link '$link' (loopback, 100, 10, 1, net:RATE)" >&2; exit 1; } ;;
  esac
done

# Gradients: one standard-normal tensor per argument and rank.
/usr/bin/python3 - "$MODEL" "$WORK/data" <<'PY'
import re, sys
import numpy as np
text = open(sys.argv[1]).read()
for r in range(2):
    rng = np.random.default_rng(r)
    for shape, name in re.findall(r'tensor<([0-9x]+)xf32> loc\("([^"]+)"\)', text):
        dims = [int(d) for d in shape.split("x")]
        np.save(f"{sys.argv[2]}/{name}.r{r}.npy", rng.standard_normal(dims).astype(np.float32))
PY

declare -A PASSES=(
  [plain]="--ddp-compress=narrow=none"
  [fp16]="--ddp-compress=narrow=fp16"
  [quant-fused]="--ddp-bucketize --insert-quantization --ddp-compress=narrow=none"
  [quant-pytorch]="--ddp-bucketize --insert-quantization=exchange=pytorch --ddp-compress=narrow=none"
  [sign-ef]="--ddp-bucketize --ddp-apply-hook=hook=sign_ef_hook%from=examples/hooks/sign_ef_hook.mlir --ddp-compress=narrow=none"
  [topk]="--ddp-bucketize --insert-topk=ratio=0.01 --ddp-compress=narrow=none"
)
CONFIGS=(plain fp16 quant-fused quant-pytorch sign-ef topk)
for config in "${CONFIGS[@]}"; do
  read -r -a args <<<"${PASSES[$config]}"
  args=("${args[@]//%/ }")
  "$OPT" "$MODEL" "${args[@]}" --mlir-print-debuginfo -o "$WORK/$config.mlir"
done

echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), source $(git rev-parse --short HEAD)"
header="| config | bytes per rank and step |"
rule="|---|---:|"
for link in $LINKS; do
  case "$link" in
    loopback) header+=" loopback ms |" ;;
    net:*) header+=" ${link#net:} (real link) ms |" ;;
    *) header+=" $link Gb/s (sim) ms |" ;;
  esac
  rule+="---:|"
done
echo "$header"
echo "$rule"
for config in "${CONFIGS[@]}"; do
  row="| $config"
  first=1
  for link in $LINKS; do
    json="$WORK/$config.${link#net:}.json"
    command=("$RUN" --np=2 "$WORK/$config.mlir" --steps="$STEPS" --quiet
             --input="$WORK/data/{name}.r{rank}.npy" --summary-json="$json")
    case "$link" in
      loopback) ;;
      net:*)
        hosts="$WORK/hosts-${link#net:}"
        command=(bash "$HOSTS_SH" exec "$hosts" 0 env $(cat "$hosts/mpi.env")
                 "${command[@]}" --hostfile="$hosts/hostfile") ;;
      *) command+=(--simulated-link="$link,${LATENCY[$link]}") ;;
    esac
    "${command[@]}" >/dev/null
    read -r bytes ms < <(/usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); \
print(d['bytes_sent_per_step'], d['ms_per_step'])" "$json")
    ((first)) && row+=" | $bytes"
    first=0
    row+=" | $ms"
  done
  echo "$row |"
done

# PyTorch's hooks, the same shapes and ranks, on the same links.
TORCH_KINDS=(allreduce fp16 quant-per-tensor)
declare -A TORCH_NAME=([allreduce]=allreduce_hook [fp16]=fp16_compress_hook
                       [quant-per-tensor]=quantization_pertensor_hook)
declare -A TORCH_MS=()
torch_args=(bench/cpu/torch_hooks.py --shapes-from "$MODEL" --world 2
            --steps "$STEPS" --kinds "$(IFS=,; echo "${TORCH_KINDS[*]}")")
for link in $LINKS; do
  case "$link" in
    loopback) out=$(/usr/bin/python3 "${torch_args[@]}") ;;
    net:*)
      hosts="$WORK/hosts-${link#net:}"
      master="$(head -n 1 "$hosts/hosts" | cut -d' ' -f1)"
      GLOO_SOCKET_IFNAME=eth0 bash "$HOSTS_SH" exec "$hosts" 1 /usr/bin/python3 \
        "${torch_args[@]}" --process-rank 1 --master-addr "$master" >/dev/null &
      out=$(GLOO_SOCKET_IFNAME=eth0 bash "$HOSTS_SH" exec "$hosts" 0 /usr/bin/python3 \
        "${torch_args[@]}" --process-rank 0 --master-addr "$master")
      wait ;;
    *) out="" ;;
  esac
  for kind in "${TORCH_KINDS[@]}"; do
    TORCH_MS[$kind.$link]=$(awk -v k="$kind" '$1=="torch" && $2==k && $3=="median" {print $4}' <<<"$out")
  done
done
for kind in "${TORCH_KINDS[@]}"; do
  row="| PyTorch ${TORCH_NAME[$kind]} | -"
  for link in $LINKS; do
    row+=" | ${TORCH_MS[$kind.$link]:--}"
  done
  echo "$row |"
done
echo
echo "PyTorch's rows: its hooks' span per step (bench/cpu/torch_hooks.py, one thread per rank); '-' on simulated links, which only our runtime models."
