#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# CPU benchmark, side by side in one run: one DDP gradient-sync step on
# ResNet-50's parameter shapes (or GPT-2 medium's), 2 MPI ranks, with our
# runtime and with PyTorch's hooks (Debian's python3-torch, gloo).
# LINK=net:RATE (net:1gbit, net:100mbit, net:veth) runs both sides' 2 ranks
# on 2 hosts of bench/net/hosts.sh (network namespaces, root) instead of
# this machine's loopback and shared memory: a real link.
#   [LINK=net:1gbit] bash bench/cpu/run.sh [resnet50|gpt2-medium] [steps]
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL="${1:-resnet50}"
STEPS="${2:-10}"
WORLD=2
BUILD_DIR="${BUILD_DIR:-build}"

bash scripts/setup.sh >/dev/null
cmake --build "$BUILD_DIR" --target ddprt-step-bench >/dev/null
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "== installing python3-torch (PyTorch 1.13, CPU) for the comparison"
  apt-get install -y -qq python3-torch >/dev/null
fi

MPIRUN=(mpirun --oversubscribe -np "$WORLD")
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)

LINK="${LINK:-loopback}"
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), link $LINK"
if [[ "$LINK" = net:* ]]; then
  HOSTS="$(mktemp -d)"
  trap 'bash bench/net/hosts.sh down "$HOSTS"; rm -rf "$HOSTS"' EXIT
  bash bench/net/hosts.sh up "$HOSTS" "$WORLD" "${LINK#net:}"
  ours=$(bash bench/net/hosts.sh exec "$HOSTS" 0 env $(cat "$HOSTS/mpi.env") \
    "${MPIRUN[@]}" --hostfile "$HOSTS/hostfile" \
    "$BUILD_DIR/runtime/ddprt-step-bench" "$MODEL" "$STEPS" 2 cpu)
  master="$(head -n 1 "$HOSTS/hosts" | cut -d' ' -f1)"
  for ((r = WORLD - 1; r >= 1; --r)); do
    GLOO_SOCKET_IFNAME=eth0 bash bench/net/hosts.sh exec "$HOSTS" "$r" \
      /usr/bin/python3 bench/cpu/torch_hooks.py --model "$MODEL" --world "$WORLD" \
      --steps "$STEPS" --process-rank "$r" --master-addr "$master" >/dev/null &
  done
  theirs=$(GLOO_SOCKET_IFNAME=eth0 bash bench/net/hosts.sh exec "$HOSTS" 0 \
    /usr/bin/python3 bench/cpu/torch_hooks.py --model "$MODEL" --world "$WORLD" \
    --steps "$STEPS" --process-rank 0 --master-addr "$master")
  wait
else
  ours=$("${MPIRUN[@]}" "$BUILD_DIR/runtime/ddprt-step-bench" "$MODEL" "$STEPS" 2 cpu)
  theirs=$(/usr/bin/python3 bench/cpu/torch_hooks.py --model "$MODEL" --world "$WORLD" --steps "$STEPS")
fi
echo "$ours"
echo "$theirs"
echo
echo "== per step, median over $STEPS steps, $WORLD ranks, $MODEL, link $LINK"
printf '%-10s %12s %12s %10s\n' hook "ddprt ms" "PyTorch ms" speedup
torch_plain=$(awk '$1=="torch" && $2=="allreduce" && $3=="median" {print $4}' <<<"$theirs")
for kind in allreduce fp16 powersgd; do
  a=$(awk -v k="$kind" '$1=="ddprt" && $2==k && $3=="median" {print $4}' <<<"$ours")
  b=$(awk -v k="$kind" '$1=="torch" && $2==k && $3=="median" {print $4}' <<<"$theirs")
  printf '%-10s %12s %12s %9.1fx\n' "$kind" "$a" "$b" "$(echo "$b / $a" | bc -l)"
done
echo "(PyTorch's plain allreduce: $torch_plain ms)"
