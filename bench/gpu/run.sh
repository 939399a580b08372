#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The GPU check: one prepared script for a machine with an NVIDIA GPU (CUDA,
# CMake, ninja, PyTorch; no MLIR, no network needed). In order, each step
# under `timeout`, its output kept under $OUT as it goes:
#   1. builds the runtime on its own (stops here, clearly, if the CUDA
#      backend did not configure);
#   2. runs its tests, the GPU ones included (with a GPU present, a CUDA or
#      NCCL that fails to start fails them);
#   3. runs the steps compiled ahead of time where MLIR is (.gpu-step/, from
#      bench/gpu/prepare.sh) with ddprt-step-runner on one rank, checked
#      against the inputs and ddp-run's CPU results (check_step.py), then
#      times the overlap benchmark's MLP step (4 x 1024, PowerSGD rank 2)
#      scheduled by ddp-schedule-overlap and not, each with the host
#      barriers and with a wait after every runtime call (issue 13:
#      $OUT/mlp-steps.txt);
#   4. times one gradient-sync step of ours against PyTorch's hooks on the
#      same card for ResNet-50 and GPT-2-medium shapes: plain allreduce,
#      fp16, PowerSGD rank 2 and 16; with a device-to-device copy's bandwidth
#      measured in the same run (the floor of the local passes) and the
#      memory each side keeps and needs;
#   5. times PowerSGD through the fused kernels and through cuBLAS at ranks
#      8, 16 and 32 (the crossover that sets ProjectorPolicy::fusedMaxRank);
# and, after step 3, runs ddp_opt.torch's hook in a PyTorch DDP loop on
# CUDA from the buckets prepare.sh compiled (bench/gpu/hook_check.py:
# fp16 bit for bit and PowerSGD within 1e-4 of the CPU's results);
# and prints a summary table last, even when a step failed or the script
# was stopped.
#
#   bash bench/gpu/prepare.sh            # here, where MLIR is: .gpu-step/, .gtest/
#   bash bench/gpu/run.sh                # there, carrying .gpu-step and .gtest
# (.gtest/ holds GoogleTest's sources and, in .gtest/nlohmann-json/, the
# nlohmann-json headers the runtime's step.json reader needs.)
# On 2026-11-30 the earlier, shorter version of this script (build, tests,
# two models, no crossover) took 63 s on an H200; this one runs about 30
# timed benchmarks more: allow 5 minutes and a limit of 7.
#   bash bench/gpu/run.sh --step-only    # only the build and the step check
#   LIMIT=400 bash bench/gpu/run.sh      # stop itself (with a summary) at 400 s
#
# Without a GPU (no `nvidia-smi -L`) the GPU tests skip, the step check runs
# on the CPU backend and the PyTorch timings are left out, so that every part
# but the GPU itself can be rehearsed anywhere. Environment: OUT (default
# ./gpu-results), STEPS (timed steps, default 20), JOBS (build jobs),
# STEP_BACKEND=cpu|cuda, RUNTIME_TIMEOUT (the runtime's own collective
# timeout, default 60 s, shorter than every step's limit), LIMIT (the
# script's own deadline in seconds, below).
set -uo pipefail
cd "$(dirname "$0")/../.."
STEP_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --step-only) STEP_ONLY=1 ;;
    *) echo "usage: bash bench/gpu/run.sh [--step-only]" >&2; exit 2 ;;
  esac
done
OUT="${OUT:-$PWD/gpu-results}"
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
export PYTHONUNBUFFERED=1
STEPS="${STEPS:-20}"
RUNTIME_TIMEOUT="${RUNTIME_TIMEOUT:-60}"
BENCH="$OUT/bench.txt"
: > "$BENCH"
if nvidia-smi -L >/dev/null 2>&1; then HAVE_GPU=1; else HAVE_GPU=0; fi
if [ -z "${STEP_BACKEND:-}" ]; then
  STEP_BACKEND=cpu
  [ "$HAVE_GPU" = 1 ] && STEP_BACKEND=cuda
fi
PYTHON=python3
python3 -c "import numpy" 2>/dev/null || PYTHON=/usr/bin/python3

# Step bookkeeping: each step's name and how it ended, for the summary.
STEP_NAMES=()
STEP_RESULTS=()
FAILED=0
record() { STEP_NAMES+=("$1"); STEP_RESULTS+=("$2"); }
# run_step NAME LIMIT-SECONDS COMMAND...: the command's output goes to the
# log as it comes; a limit reached or a failure is recorded, not fatal. The
# command runs in the background and is waited for, so that a signal to
# the script (its own deadline, INT, TERM) is handled at once.
CURRENT=""
CURRENT_NAME=""
run_step() {
  local name="$1" limit="$2"
  shift 2
  echo "== $name (limit ${limit} s)"
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" &
  CURRENT=$!
  CURRENT_NAME="$name"
  wait "$CURRENT"
  local rc=$?
  CURRENT=""
  CURRENT_NAME=""
  local took=$((SECONDS - start))
  if [ "$rc" = 0 ]; then
    record "$name" "ok (${took} s)"
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    record "$name" "TIMED OUT after ${limit} s"
    FAILED=1
  else
    record "$name" "FAILED (exit $rc, ${took} s)"
    FAILED=1
  fi
  return "$rc"
}

# The value of field $4 on the line of $BENCH whose first three fields are
# $1 $2 $3 (e.g. "ddprt.resnet50.r2 powersgd median").
field() {
  awk -v a="$1" -v b="$2" -v c="$3" '$1==a && $2==b && $3==c {print $4; exit}' "$BENCH"
}

summary() {
  trap - EXIT INT TERM
  [ -n "${SUMMARY_DONE:-}" ] && return
  SUMMARY_DONE=1
  {
    echo
    echo "== summary $(date -u '+%Y-%m-%d %H:%M UTC') ($( [ "$HAVE_GPU" = 1 ] && nvidia-smi --query-gpu=name --format=csv,noheader | head -1 || echo 'no GPU'))"
    for i in "${!STEP_NAMES[@]}"; do
      printf '  %-44s %s\n' "${STEP_NAMES[$i]}" "${STEP_RESULTS[$i]}"
    done
    local copy
    copy=$(awk '$1=="torch" && $2=="copy-bandwidth" {print $3; exit}' "$BENCH")
    echo "  device-to-device copy: ${copy:-?} GB/s (read + write; the floor is bytes / this)"
    echo
    echo "median ms per step of the communication hook (world size 1); floor = local bytes / copy bandwidth"
    printf '%-12s %-12s %9s %9s %8s %9s %8s\n' model hook ddprt PyTorch speedup floor "x floor"
    for model in resnet50 gpt2-medium; do
      for entry in allreduce:2 fp16:2 powersgd:2 powersgd:16; do
        local kind=${entry%%:*} rank=${entry##*:}
        local ours theirs bytes label ratio floor overFloor
        ours=$(field "ddprt.$model.r$rank" "$kind" median)
        theirs=$(field "torch.$model.r$rank" "$kind" median)
        bytes=$(field "ddprt.$model.r$rank" "$kind" bytes)
        label=$kind
        [ "$kind" = powersgd ] && label="powersgd r$rank"
        ratio=$(python3 -c "print('%.1fx' % ($theirs / $ours))" 2>/dev/null || echo "?")
        floor=$(python3 -c "print('%.3f' % ($bytes / ($copy * 1e9) * 1e3))" 2>/dev/null || echo "?")
        overFloor=$(python3 -c "print('%.2f' % ($ours / ($bytes / ($copy * 1e9) * 1e3)))" 2>/dev/null || echo "?")
        printf '%-12s %-12s %9s %9s %8s %9s %8s\n' "$model" "$label" "${ours:-?}" "${theirs:-?}" "$ratio" "$floor" "$overFloor"
      done
    done
    echo
    echo "memory (MB): ddprt persistent (error + Q) | ddprt scratch | PyTorch powersgd persistent | PyTorch peak extra"
    for model in resnet50 gpt2-medium; do
      printf '  %-12s %s | %s | %s | %s\n' "$model" \
        "$(field "ddprt.$model.r2" state MB)" "$(field "ddprt.$model.r2" scratch MB)" \
        "$(field "torch.$model.r2" powersgd persistent)" "$(field "torch.$model.r2" powersgd peak)"
    done
    if [ -s "$OUT/crossover.txt" ]; then
      echo
      echo "PowerSGD ms per step, fused kernels vs cuBLAS (auto takes cuBLAS above rank $(grep -o 'fusedMaxRank = [0-9]*' runtime/lib/cuda/Gemm.h | grep -o '[0-9]*$'))"
      cat "$OUT/crossover.txt"
    fi
    echo "== $([ "$FAILED" = 0 ] && echo 'all steps passed' || echo 'SOME STEPS FAILED (see above)')"
  } | tee "$OUT/summary.txt"
}
stop() {
  echo "== stopped ($1)"
  record "${CURRENT_NAME:-(between steps)}" "STOPPED ($1)"
  FAILED=1
  # timeout forwards the signal to the step's command.
  [ -n "$CURRENT" ] && kill -TERM "$CURRENT" 2>/dev/null
  exit 130
}
trap summary EXIT
trap 'stop interrupted' INT
trap 'stop terminated' TERM
# LIMIT=SECONDS: the script's own deadline, so that it stops a step and
# prints its summary before whatever runs it kills it outright (the device
# tool's time limit): use a LIMIT some 20 s under that limit.
if [ -n "${LIMIT:-}" ]; then
  (sleep "$LIMIT" && kill -TERM $$ 2>/dev/null) &
  DEADLINE=$!
  trap 'summary; kill $DEADLINE 2>/dev/null' EXIT
fi

echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), GPU: $HAVE_GPU"
[ "$HAVE_GPU" = 1 ] && nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader
nvcc --version 2>/dev/null | tail -1
python3 -c "import torch; print('PyTorch', torch.__version__, 'NCCL', torch.cuda.nccl.version() if torch.cuda.is_available() else '-')" 2>/dev/null || true

# The runtime links the NCCL the build finds: the Python wheel's if there
# is one, else the system's.
NCCL_ROOT=$(python3 -c "import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])" 2>/dev/null || echo /usr/local/cuda)
export LD_LIBRARY_PATH="$NCCL_ROOT/lib:${LD_LIBRARY_PATH:-}"
CMAKE_ARGS=(-G Ninja -S runtime -B build-gpu -DCMAKE_BUILD_TYPE=Release -DNCCL_ROOT="$NCCL_ROOT")
[ -f .gtest/CMakeLists.txt ] && CMAKE_ARGS+=(-DDDPRT_GTEST_SOURCE_DIR="$PWD/.gtest")
[ -f .gtest/nlohmann-json/nlohmann/json.hpp ] &&
  CMAKE_ARGS+=(-DDDPRT_NLOHMANN_JSON_DIR="$PWD/.gtest/nlohmann-json")
if ! run_step "configure" 120 cmake "${CMAKE_ARGS[@]}"; then
  echo "== stop: the runtime did not configure"
  exit 1
fi
if [ "$HAVE_GPU" = 1 ] && ! grep -q '^DDPRT_HAVE_CUDA_BUILT:INTERNAL=ON' build-gpu/CMakeCache.txt; then
  echo "== stop: a GPU is here but the CUDA backend did not configure (nvcc, the CUDA toolkit or NCCL not found); see the configure output above"
  record "CUDA backend configured" "NO"
  FAILED=1
  exit 1
fi
TARGETS=()
[ "$STEP_ONLY" = 1 ] && TARGETS=(ddprt-step-runner)
if ! run_step "build" 600 ninja -C build-gpu ${JOBS:+-j "$JOBS"} "${TARGETS[@]}"; then
  echo "== stop: the build failed"
  exit 1
fi
echo "NCCL linked: $(ldd build-gpu/lib/libddprt.so | grep -o 'libnccl[^ ]* => [^ ]*')"

compiled_step() {
  local work=build-gpu/step-check
  run_step "compiled steps ($STEP_BACKEND)" 180 \
    bash -c "set -o pipefail; PYTHON=$PYTHON bash bench/gpu/check_step.sh build-gpu/bin/ddprt-step-runner $STEP_BACKEND $work 2>&1 | tee $OUT/step-check.txt"
  local rc=$?
  if [ "$rc" = 2 ]; then
    STEP_RESULTS[$((${#STEP_RESULTS[@]} - 1))]="SKIPPED: no .gpu-step/ (run bench/gpu/prepare.sh and carry it)"
  fi
  if [ -d "$work" ]; then tar -czf "$OUT/step-outputs.tar.gz" -C "$work" .; fi
}

if [ "$STEP_ONLY" = 1 ]; then
  compiled_step
  exit "$FAILED"
fi

run_step "GPU tests (ddprt-cuda-tests)" 300 \
  bash -c "set -o pipefail; build-gpu/test/ddprt-cuda-tests 2>&1 | tee $OUT/cuda-tests.txt | grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) |Failure|error|Expected|Which is|actual|SKIPPED' | tail -n 60"
run_step "runtime tests (ddprt-tests)" 300 \
  bash -c "set -o pipefail; build-gpu/test/ddprt-tests --gtest_brief=1 2>&1 | tail -n 15"
compiled_step

# ddp_opt.torch's hook in a PyTorch DDP loop on CUDA (the runtime joined
# through NCCL on PyTorch's stream), its buckets from the cache prepare.sh
# compiled; without a GPU, a rehearsal on the CPU backend.
hook_device=cpu
[ "$HAVE_GPU" = 1 ] && hook_device=cuda
if [ -d .gpu-step/torch-hook/cache ]; then
  run_step "PyTorch DDP hook ($hook_device, ddp_opt.torch)" 180 \
    bash -c "set -o pipefail; DDP_OPT_LIBRARY_DIR=$PWD/build-gpu/lib PYTHONPATH=$PWD/python $PYTHON bench/gpu/hook_check.py --check .gpu-step/torch-hook --device $hook_device 2>&1 | tee $OUT/hook-check.txt | tail -n 20"
fi

# Issue 13: the MLP step scheduled and not, with the host barriers (what
# compiled steps do) and with a wait after every runtime call (what they did
# before): median ms per step on one rank.
mlp_steps() {
  [ -d .gpu-step/mlp-overlap-true ] || { echo "no .gpu-step/mlp-overlap-*: rerun bench/gpu/prepare.sh"; return 2; }
  local carry="0:0,1:1,2:2,3:3,4:4,5:5,6:6,7:7"
  for overlap in true false; do
    for waits in barriers every-call; do
      local extra=()
      [ "$waits" = every-call ] && extra=(--sync-every-call)
      build-gpu/bin/ddprt-step-runner .gpu-step/mlp-overlap-$overlap --backend="$STEP_BACKEND" \
        --steps=12 --quiet --inputs=.gpu-step/mlp-data/inputs.r{rank}.npz --carry="$carry" \
        --summary-json="$OUT/mlp.$overlap.$waits.json" "${extra[@]}" || return 1
      printf 'mlp-step overlap=%s waits=%s ms_per_step %s\n' "$overlap" "$waits" \
        "$($PYTHON -c "import json,sys; print(json.load(open(sys.argv[1]))['ms_per_step'])" "$OUT/mlp.$overlap.$waits.json")"
    done
  done
}
export -f mlp_steps
run_step "MLP step: overlap x host barriers ($STEP_BACKEND)" 180 \
  bash -c "set -o pipefail; OUT=$OUT STEP_BACKEND=$STEP_BACKEND PYTHON=$PYTHON mlp_steps 2>&1 | tee $OUT/mlp-steps.txt"

BACKEND=cpu
[ "$HAVE_GPU" = 1 ] && BACKEND=cuda
# tagged TAG COMMAND...: runs a benchmark; its output goes to the log, and
# the figures, each prefixed with what was measured ("ddprt.MODEL.rRANK"),
# to $BENCH. A function, so run under `timeout` through bash -c.
tagged() {
  local tag="$1"
  shift
  set -o pipefail
  "$@" 2>&1 | awk -v tag="$tag" '
    /^ddprt [a-z0-9]+ +median/ { print tag, $2, "median", $4; print tag, $2, "bytes", $(NF-3) * 1e9 }
    /keeps/ { for (i = 1; i <= NF; ++i) if ($i == "keeps") print tag, "state", "MB", $(i+1) }
    /device memory beyond/ { for (i = 1; i <= NF; ++i) if ($i == "MB") print tag, "scratch", "MB", $(i-1) }
    /^torch copy-bandwidth/ { print $1, $2, $3 }
    /^torch [a-z0-9]+ +median/ { print tag, $2, "median", $4 }
    /^torch [a-z0-9]+ +step/ { print tag, $2, "peak", $(NF-1) }
    /^torch powersgd persistent/ { print tag, "powersgd", "persistent", $(NF-1) }
    { print > "/dev/stderr" }' >> "$BENCH"
}
export -f tagged
export BENCH
# bench NAME LIMIT TAG COMMAND...
bench() {
  local name="$1" limit="$2"
  shift 2
  run_step "$name" "$limit" bash -c 'tagged "$@"' tagged "$@"
}
for model in resnet50 gpt2-medium; do
  bench "ddprt $model r2 ($BACKEND)" 180 \
    "ddprt.$model.r2" build-gpu/ddprt-step-bench "$model" "$STEPS" 2 "$BACKEND" "$RUNTIME_TIMEOUT" --profile
  bench "ddprt $model r16 ($BACKEND)" 180 \
    "ddprt.$model.r16" build-gpu/ddprt-step-bench "$model" "$STEPS" 16 "$BACKEND" "$RUNTIME_TIMEOUT" --kinds=powersgd --profile
  if [ "$HAVE_GPU" = 1 ]; then
    bench "PyTorch $model r2" 300 \
      "torch.$model.r2" python3 bench/gpu/torch_hooks_gpu.py --model "$model" --steps "$STEPS"
    bench "PyTorch $model r16" 300 \
      "torch.$model.r16" python3 bench/gpu/torch_hooks_gpu.py --model "$model" --steps "$STEPS" --rank 16 --kinds powersgd
  fi
done

# The projector crossover: the same PowerSGD step through each path.
if [ "$HAVE_GPU" = 1 ]; then
  : > "$OUT/crossover.txt"
  printf '  %-12s %5s %10s %10s\n' model rank fused cuBLAS >> "$OUT/crossover.txt"
  for model in resnet50 gpt2-medium; do
    for rank in 8 16 32; do
      for projector in fused gemm; do
        export DDPRT_CUDA_PROJECTION=$projector
        bench "crossover $model r$rank $projector" 120 \
          "cross.$model.r$rank.$projector" build-gpu/ddprt-step-bench "$model" 10 "$rank" cuda "$RUNTIME_TIMEOUT" --kinds=powersgd
        unset DDPRT_CUDA_PROJECTION
      done
      printf '  %-12s %5s %10s %10s\n' "$model" "$rank" \
        "$(field "cross.$model.r$rank.fused" powersgd median)" \
        "$(field "cross.$model.r$rank.gemm" powersgd median)" >> "$OUT/crossover.txt"
    done
  done
fi
exit "$FAILED"
