#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The compiled gradient-sync step against the runtime called by hand and
# against PyTorch's hooks, side by side in one run: ResNet-50's parameter
# shapes (or GPT-2 medium's), 2 MPI ranks on this machine's CPUs.
#   bash bench/cpu/compiled_step.sh [resnet50|gpt2-medium] [steps]
# "compiled" is ddp-run's median step (the slowest rank's): the step
# function with one ddp.allreduce per gradient, compiled by ddp-opt
# --ddp-compress (bucketing, then fp16 or PowerSGD rank 2) and JIT-run;
# "by hand" is ddprt-step-bench, the same runtime calls written in C++;
# PyTorch is torch_hooks.py (Debian's PyTorch 1.13, gloo).
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL="${1:-resnet50}"
STEPS="${2:-10}"
WORLD=2
BUILD_DIR="${BUILD_DIR:-build}"
PYTHON=/usr/bin/python3

bash scripts/setup.sh >/dev/null
cmake --build "$BUILD_DIR" --target ddp-opt ddp-run ddprt-step-bench >/dev/null
MPIRUN=(mpirun --oversubscribe -np "$WORLD")
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
count=$("$PYTHON" bench/cpu/gen_step.py "$WORK" --world "$WORLD" --model "$MODEL")
# Each step's results are the next step's gradients (--carry), so that no
# file is read between steps: in training the gradients come from the
# backward pass, and reading 100 MB per rank and step disturbs the timing.
inputs=()
carry=""
for ((i = 0; i < count; ++i)); do
  inputs+=("--input=$WORK/g.r{rank}.a$i.npy")
  carry+="${carry:+,}$i:$i"
done

echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $MODEL ($count gradients), $WORLD ranks, $STEPS steps"
declare -A compiled
for kind in allreduce fp16 powersgd; do
  case "$kind" in
    allreduce) options="narrow=none" ;;
    fp16) options="narrow=fp16" ;;
    powersgd) options="powersgd-rank=2 start-iter=0" ;;
  esac
  "$BUILD_DIR/bin/ddp-opt" "$WORK/step.mlir" --ddp-compress="$options" -o "$WORK/$kind.mlir"
  "${MPIRUN[@]}" "$BUILD_DIR/bin/ddp-run" "$WORK/$kind.mlir" --steps="$STEPS" --quiet \
    "${inputs[@]}" --carry="$carry" --summary-json="$WORK/$kind.json" >/dev/null
  compiled[$kind]=$("$PYTHON" -c "import json; print('%.1f' % json.load(open('$WORK/$kind.json'))['ms_per_step'])")
done
ours=$("${MPIRUN[@]}" "$BUILD_DIR/runtime/ddprt-step-bench" "$MODEL" "$STEPS" 2 cpu)
theirs=$("$PYTHON" bench/cpu/torch_hooks.py --model "$MODEL" --world "$WORLD" --steps "$STEPS")

printf '%-10s %14s %12s %12s %10s\n' hook "compiled ms" "by hand ms" "PyTorch ms" "vs PyTorch"
for kind in allreduce fp16 powersgd; do
  a=${compiled[$kind]}
  b=$(awk -v k="$kind" '$1=="ddprt" && $2==k && $3=="median" {print $4}' <<<"$ours")
  c=$(awk -v k="$kind" '$1=="torch" && $2==k && $3=="median" {print $4}' <<<"$theirs")
  printf '%-10s %14s %12s %12s %9.1fx\n' "$kind" "$a" "$b" "$c" "$(echo "$c / $a" | bc -l)"
done
