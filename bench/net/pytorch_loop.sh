#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# bench/pytorch/hook_loop.py across real links: a PyTorch DDP training loop
# with ResNet-50's gradients on HOSTS hosts (network namespaces of
# bench/net/hosts.sh, one rank each), each host's link limited to RATE,
# with ddp-opt's compiled hook (ddp_opt.torch) and PyTorch's hooks side by
# side in one job: mpirun starts the ranks on the hosts (our runtime's MPI),
# PyTorch's gloo group meets at host 0's address.
#
#   RATES="1gbit 100mbit" HOSTS=2 STEPS=6 bash bench/net/pytorch_loop.sh
#
# Needs root (namespaces), PyTorch, and the build (the Python package in
# build/python). Prints hook_loop.py's table for each rate.
set -euo pipefail
cd "$(dirname "$0")/../.."
RATES="${RATES:-1gbit 100mbit}"
HOSTS="${HOSTS:-2}"
STEPS="${STEPS:-6}"
BUILD_DIR="${BUILD_DIR:-build}"
PYTHON=/usr/bin/python3
HOSTS_SH=bench/net/hosts.sh
bash "$HOSTS_SH" check
if ! "$PYTHON" -c "import torch" 2>/dev/null; then
  echo "pytorch_loop.sh: PyTorch is needed (apt-get install python3-torch)" >&2
  exit 1
fi
cmake --build "$BUILD_DIR" --target ddp-python >/dev/null
WORK=$(mktemp -d)
NET=()
trap 'for d in "${NET[@]}"; do bash "$HOSTS_SH" down "$d" || true; done; rm -rf "$WORK"' EXIT
PYTHONPATH_DIR="$(cd "$BUILD_DIR" && pwd)/python"

echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $HOSTS hosts x 1 rank, source $(git rev-parse --short HEAD)"
for rate in $RATES; do
  dir="$WORK/hosts-$rate"
  bash "$HOSTS_SH" up "$dir" "$HOSTS" "$rate"
  NET+=("$dir")
  master="$(head -n 1 "$dir/hosts" | cut -d' ' -f1)"
  echo "-- every host's link at $rate (real link, tbf)"
  # The compiled buckets are cached per run: every rank reads them from
  # this machine's disk, one compiles.
  bash "$HOSTS_SH" exec "$dir" 0 env $(cat "$dir/mpi.env") \
    mpirun --allow-run-as-root --oversubscribe -np "$HOSTS" --hostfile "$dir/hostfile" \
    -x PYTHONPATH="$PYTHONPATH_DIR" -x DDP_OPT_CACHE_DIR="$WORK/cache" \
    -x MASTER_ADDR="$master" -x GLOO_SOCKET_IFNAME=eth0 \
    "$PYTHON" bench/pytorch/hook_loop.py --steps "$STEPS"
  bash "$HOSTS_SH" down "$dir"
done
