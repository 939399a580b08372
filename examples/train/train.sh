#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The data-parallel training demo: a 64-128-10 MLP learns scikit-learn's
# digits on 4 MPI ranks, once per way of averaging the gradients (exact,
# fp16, PowerSGD rank 1/2/4 with and without error feedback); reference.py
# checks every run against a numpy simulation, then report.py compares test
# accuracy, traffic and speed and plots the losses.
#
#   bash examples/train/train.sh [--dry-run] [CONFIG...]
#
# CONFIG: exact fp16 powersgd-r{1,2,4} powersgd-r{1,2,4}-noef quant-pertensor
# quant-perchannel sign-ef topk two-level-r2 two-level-r2-node-mean auto
# (default: all fifteen). The two-level rows see the 4 ranks as 2 nodes of
# 2 (DDPRT_RANKS_PER_NODE=2). auto is ddp-plan's
# choice among exact, fp16 and PowerSGD rank 1/2/4 for this machine, from a
# profile ddprt-calibrate measures first on the same ranks (loopback MPI).
# --dry-run prepares the data and compiles every step function but prints
# the ddp-run commands instead of running them.
# Environment: DDP_OPT (default build/bin/ddp-opt), DDP_RUN (default
# build/bin/ddp-run), DDPRT_CALIBRATE (default build/runtime/ddprt-calibrate),
# PYTHON (default /usr/bin/python3, with numpy,
# scikit-learn, matplotlib), WORK_DIR (default build/train: data, step
# functions, run outputs, compare.txt, report.md, loss.png, losses.csv).
#
# Every configuration compiles the same step (gen_mlp_step.py) with
# ddp-opt's default pipeline, --ddp-compress: exact buckets the four
# gradient allreduces, fp16 sends them in fp16, PowerSGD compresses w1
# (64x128) and w2 (128x10) after a warm-up of START_ITER exact steps.
# ddp-run --np starts mpirun itself (adding --oversubscribe, and
# --allow-run-as-root as root).
set -euo pipefail
cd "$(dirname "$0")/../.."

DDP_OPT="${DDP_OPT:-build/bin/ddp-opt}"
DDP_RUN="${DDP_RUN:-build/bin/ddp-run}"
DDPRT_CALIBRATE="${DDPRT_CALIBRATE:-build/runtime/ddprt-calibrate}"
PYTHON="${PYTHON:-/usr/bin/python3}"
WORK_DIR="${WORK_DIR:-build/train}"
HERE=examples/train

# The hyperparameters; reference.py's defaults (mlp.py) are the same.
RANKS=4
HIDDEN=128
BATCH=32     # per rank
LR=0.3
STEPS=440    # 40 epochs
START_ITER=10
SEED=0

DRY_RUN=0
if [ "${1:-}" = "--dry-run" ]; then
  DRY_RUN=1
  shift
fi
CONFIGS=("$@")
if ((${#CONFIGS[@]} == 0)); then
  CONFIGS=(exact fp16 powersgd-r1 powersgd-r2 powersgd-r4
           powersgd-r1-noef powersgd-r2-noef powersgd-r4-noef
           quant-pertensor quant-perchannel sign-ef topk
           two-level-r2 two-level-r2-node-mean auto)
fi

# compile_args CONFIG: ddp-opt's passes for a configuration, one per line.
# PowerSGD and fp16 are options of --ddp-compress; the bucket schemes
# (quantization, the user's hook) rewrite the bucket first, then
# --ddp-compress fuses and schedules.
compile_args() {
  case "$1" in
    exact) echo "--ddp-compress=narrow=none" ;;
    fp16) echo "--ddp-compress=narrow=fp16" ;;
    quant-pertensor | quant-perchannel)
      printf '%s\n' --ddp-bucketize "--insert-quantization=granularity=${1#quant-}" \
        | sed 's/granularity=pertensor/granularity=per-tensor/; s/granularity=perchannel/granularity=per-channel/'
      echo "--ddp-compress=narrow=none"
      ;;
    auto)
      # Among the choices the demo checks against numpy (no bf16), with
      # the PowerSGD rows' warm-up and seed.
      echo "--ddp-compress=plan=$WORK_DIR/profile.json plan-choices=plain,fp16,powersgd start-iter=$START_ITER seed=$SEED"
      ;;
    topk)
      # The largest 1% of the bucket and their indices.
      printf '%s\n' --ddp-bucketize --insert-topk=ratio=0.01 "--ddp-compress=narrow=none"
      ;;
    two-level-r2)
      echo "--ddp-compress=powersgd-rank=2 start-iter=$START_ITER seed=$SEED two-level=collectives"
      ;;
    two-level-r2-node-mean)
      echo "--ddp-compress=powersgd-rank=2 start-iter=$START_ITER seed=$SEED two-level=node-mean"
      ;;
    sign-ef)
      printf '%s\n' --ddp-bucketize \
        "--ddp-apply-hook=hook=sign_ef_hook from=examples/hooks/sign_ef_hook.mlir" \
        "--ddp-compress=narrow=none"
      ;;
    *)
      if [[ "$1" =~ ^powersgd-r([0-9]+)(-noef)?$ ]]; then
        local options="powersgd-rank=${BASH_REMATCH[1]} start-iter=$START_ITER seed=$SEED"
        [ -n "${BASH_REMATCH[2]}" ] && options+=" error-feedback=false"
        echo "--ddp-compress=$options"
      else
        echo "train.sh: unknown configuration '$1'" >&2
        return 1
      fi
      ;;
  esac
}

# run_args CONFIG: ddp-run's options for a configuration beyond the common
# ones. The sign hook's scale is the mean of |m|: reference.py adds it up
# in loop order, and the hook's signs amplify any other rounding of it (an
# element near zero changes sign, and error feedback carries that on), so
# its run keeps the sums in source order (ddp-run's default adds them in
# vector lanes; docs/user-guide.md, "Floating-point results").
run_args() {
  case "$1" in
    sign-ef) echo "--sum-order=source" ;;
  esac
}

for config in "${CONFIGS[@]}"; do
  compile_args "$config" >/dev/null
done
# Every program a run needs, before anything is prepared.
require() { # PATH TARGET VARIABLE
  if ! command -v "$1" >/dev/null; then
    echo "train.sh: $1 not found; build it (ninja -C build $2) or set $3" >&2
    exit 1
  fi
}
require "$DDP_OPT" ddp-opt DDP_OPT
if ((!DRY_RUN)); then
  require "$DDP_RUN" ddp-run DDP_RUN
fi
if [[ " ${CONFIGS[*]} " == *" auto "* ]]; then
  require "$DDPRT_CALIBRATE" ddprt-calibrate DDPRT_CALIBRATE
fi

DATA="$WORK_DIR/data"
RUNS="$WORK_DIR/runs"
rm -rf "$DATA" "$RUNS"
mkdir -p "$DATA" "$RUNS"

echo "== data: digits, $RANKS ranks x $BATCH examples per step"
NB="$("$PYTHON" "$HERE/prepare_digits.py" --out "$DATA" --ranks "$RANKS" --batch "$BATCH" \
        --hidden "$HIDDEN" --seed "$SEED")"
echo "   $NB steps per epoch, $STEPS steps"

"$PYTHON" "$HERE/gen_mlp_step.py" --hidden "$HIDDEN" --batch "$BATCH" --lr "$LR" \
  -o "$WORK_DIR/step.mlir"

if [[ " ${CONFIGS[*]} " == *" auto "* ]]; then
  echo "== calibrate: ddprt-calibrate on $RANKS ranks (for auto; $WORK_DIR/profile.json)"
  # The MLP's matrices (64x128, 128x10) stay in cache: kernels timed hot.
  "$DDPRT_CALIBRATE" --np="$RANKS" --out="$WORK_DIR/profile.json" --max-bytes=1M --reps=3 \
    --kernel-shapes=64x128x1,64x128x2,64x128x4 --kernel-working-set=64K >/dev/null
fi

echo "== compile: ddp-opt (plans in $RUNS/<config>/plan.txt)"
# What reference.py simulates each run as: itself, but auto as its choice.
SIMULATED=()
for config in "${CONFIGS[@]}"; do
  mapfile -t args < <(compile_args "$config")
  mkdir -p "$RUNS/$config"
  "$DDP_OPT" "$WORK_DIR/step.mlir" "${args[@]}" \
    --ddp-compression-report="output=$RUNS/$config/plan.txt json=$RUNS/$config/plan.json" \
    -o "$RUNS/$config/step.mlir"
  options="${args[*]}"
  options="${options//--ddp-compress=/}"
  simulated=$config
  if [ "$config" = auto ]; then
    choice=$("$PYTHON" -c 'import json, sys
buckets = json.load(open(sys.argv[1]))["plan"]["buckets"]
choices = {b["choice"] for b in buckets}
if len(choices) != 1:
    sys.exit("train.sh: auto chose %s; the demo checks one choice for all buckets" % sorted(choices))
print(choices.pop())' "$RUNS/$config/plan.json")
    case "$choice" in
      plain) simulated=exact ;;
      *) simulated=$choice ;;
    esac
    options="ddp-plan chose $choice"
  fi
  SIMULATED+=("$config=$simulated")
  printf '   %-17s %-59s %s\n' "$config" "$options" "$(grep '^total:' "$RUNS/$config/plan.txt")"
done
grep -A 8 '^ddp plan' "$RUNS/auto/plan.txt" 2>/dev/null | sed 's/^/   /' || true

# Arguments: w1 b1 w2 b2 (read at step 0, then carried from results 0-3),
# x and y (this rank's batch step % NB). Results: w1 b1 w2 b2, local loss.
# Every step writes only the loss (result 4); the last step writes all five
# results; rank 0 writes the time and traffic figures. A collective that
# waits more than 60 s fails instead of hanging.
echo "== train: $RANKS ranks, $STEPS steps per configuration"
for config in "${CONFIGS[@]}"; do
  run="$RUNS/$config"
  command=("$DDP_RUN" --np="$RANKS" "$run/step.mlir" --entry=step --steps="$STEPS" --quiet
           --input="$DATA/w1.npy" --input="$DATA/b1.npy"
           --input="$DATA/w2.npy" --input="$DATA/b2.npy"
           --input="$DATA/x.r{rank}.b{step%$NB}.npy" --input="$DATA/y.r{rank}.b{step%$NB}.npy"
           "--carry=0:0,1:1,2:2,3:3"
           --output="$run/loss.r{rank}.s{step}.npy" --output-results=4
           --final-output="$run/final.r{rank}.o{result}.npy"
           --summary-json="$run/summary.json" --timeout=60)
  mapfile -t extra < <(run_args "$config")
  command+=("${extra[@]}")
  # Two nodes of two ranks (ddp-run passes DDPRT_* to every rank).
  [[ "$config" == two-level-* ]] && command=(env DDPRT_RANKS_PER_NODE=2 "${command[@]}")
  if ((DRY_RUN)); then
    echo "${command[*]}"
    continue
  fi
  start=$SECONDS
  "${command[@]}" >"$run/ddp-run.log" 2>&1 || {
    echo "train.sh: ddp-run failed for $config; its output:" >&2
    cat "$run/ddp-run.log" >&2
    exit 1
  }
  printf '   %-17s %3d s  %s\n' "$config" $((SECONDS - start)) \
    "$(tail -n 1 "$run/ddp-run.log" | sed 's/^ddp-run: //')"
done
((DRY_RUN)) && exit 0

echo "== check: ddp-run against reference.py's numpy simulation of the same runs"
"$PYTHON" "$HERE/reference.py" --data "$DATA" --steps "$STEPS" --lr "$LR" --seed "$SEED" \
  --config "${SIMULATED[@]}" --compare "$RUNS" --print-every -1 >"$WORK_DIR/compare.txt" || {
  cat "$WORK_DIR/compare.txt"
  echo "train.sh: ddp-run's results do not match the numpy simulation" >&2
  exit 1
}
grep '^compare' "$WORK_DIR/compare.txt" | cut -c 9-
echo
echo "== report (also in $WORK_DIR/report.md; loss curves in $WORK_DIR/loss.png)"
"$PYTHON" "$HERE/report.py" "$RUNS" --data "$DATA" --plot "$WORK_DIR/loss.png" \
  --losses "$WORK_DIR/losses.csv" | tee "$WORK_DIR/report.md"
