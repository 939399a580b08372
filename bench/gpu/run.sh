#!/usr/bin/env bash
# GPU check, one prepared script for a machine with an NVIDIA GPU (CUDA,
# CMake, ninja, PyTorch; no MLIR, no MPI, no network needed): builds the
# runtime on its own, runs its tests (the GPU ones included), times one
# gradient-sync step of ours against PyTorch's hooks on the same card for
# ResNet-50 and GPT-2 medium, and prints a short table last. It also runs a
# step function compiled ahead of time where MLIR is (bench/gpu/prepare.sh
# writes .gpu-step/; carry it) with ddprt-step-runner --backend=cuda on one
# rank, checked against the inputs and ddp-run's CPU results
# (bench/gpu/check_step.py). Everything it prints is also written under
# $OUT (default ./gpu-results): run.log, step-check.txt,
# step-outputs.tar.gz and the timings.
#
#   bash bench/gpu/prepare.sh            # here, where MLIR is
#   bash bench/gpu/run.sh                # there
#   bash bench/gpu/run.sh --step-only    # only the build and the step check
#
# Without a GPU (no `nvidia-smi -L`) the step check runs on the CPU backend
# instead (STEP_BACKEND=cpu|cuda overrides), so that every part before the
# GPU can be tried anywhere. JOBS=N limits the build's parallel jobs.
#
# GoogleTest: the system's, or the sources in ./.gtest (copy
# /usr/src/googletest there on a Debian machine and carry it).
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
STEPS="${STEPS:-20}"
if nvidia-smi -L >/dev/null 2>&1; then HAVE_GPU=1; else HAVE_GPU=0; fi
if [ -z "${STEP_BACKEND:-}" ]; then
  STEP_BACKEND=cpu
  [ "$HAVE_GPU" = 1 ] && STEP_BACKEND=cuda
fi

echo "== $(date -u '+%Y-%m-%d %H:%M UTC')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

NCCL_ROOT=$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null || echo /usr/local/cuda)
export LD_LIBRARY_PATH="$NCCL_ROOT/lib:${LD_LIBRARY_PATH:-}"
GTEST_ARGS=()
[ -d .gtest ] && GTEST_ARGS=(-DDDPRT_GTEST_SOURCE_DIR="$PWD/.gtest")

echo "== build (runtime alone, NCCL from $NCCL_ROOT)"
cmake -G Ninja -S runtime -B build-gpu -DCMAKE_BUILD_TYPE=Release \
  -DNCCL_ROOT="$NCCL_ROOT" "${GTEST_ARGS[@]}" || exit 1
if [ "$STEP_ONLY" = 1 ]; then
  ninja -C build-gpu ${JOBS:+-j "$JOBS"} ddprt-step-runner || exit 1
else
  ninja -C build-gpu ${JOBS:+-j "$JOBS"} || exit 1
fi

# A step compiled here by ddp-run --emit-step (prepare.sh), run by the
# runner on $STEP_BACKEND: plain allreduce and fp16 bitwise, PowerSGD within
# rounding of the CPU's results, the counters equal (check_step.py).
step_status=0
step_result=""
compiled_step() {
  echo "== compiled step: .gpu-step/ run by ddprt-step-runner --backend=$STEP_BACKEND (world size 1)"
  local work=build-gpu/step-check
  bash bench/gpu/check_step.sh build-gpu/bin/ddprt-step-runner "$STEP_BACKEND" "$work" \
    2>&1 | tee "$OUT/step-check.txt"
  step_status=${PIPESTATUS[0]}
  if [ -d "$work" ]; then tar -czf "$OUT/step-outputs.tar.gz" -C "$work" .; fi
  if [ "$step_status" = 0 ]; then
    step_result="passed ($STEP_BACKEND)"
  elif [ "$step_status" = 2 ]; then
    step_result="SKIPPED: no .gpu-step/ (run bench/gpu/prepare.sh first and carry it)"
  else
    step_result="FAILED ($STEP_BACKEND; see step-check.txt)"
  fi
}

if [ "$STEP_ONLY" = 1 ]; then
  compiled_step
  echo "== compiled step: $step_result"
  [ "$step_status" = 2 ] && exit 1
  exit "$step_status"
fi

echo "== tests"
build-gpu/test/ddprt-cuda-tests --gtest_brief=1 2>&1 | tail -n 30
tests=$?
build-gpu/test/ddprt-tests --gtest_brief=1 2>&1 | tail -n 5

compiled_step

for model in resnet50 gpt2-medium; do
  echo "== $model: ddprt (CUDA backend, world size 1)"
  build-gpu/ddprt-step-bench "$model" "$STEPS" 2 cuda | tee "$OUT/ddprt-$model.txt"
  echo "== $model: PyTorch $(python3 -c 'import torch; print(torch.__version__)') hooks (NCCL, world size 1)"
  python3 bench/gpu/torch_hooks_gpu.py --model "$model" --steps "$STEPS" | tee "$OUT/torch-$model.txt"
done

echo
echo "== summary: median ms per step of the communication hook (world size 1)"
printf '%-12s %-10s %10s %10s %8s\n' model hook ddprt PyTorch speedup
for model in resnet50 gpt2-medium; do
  for kind in allreduce fp16 powersgd; do
    a=$(awk -v k="$kind" '$1=="ddprt" && $2==k && $3=="median" {print $4}' "$OUT/ddprt-$model.txt")
    b=$(awk -v k="$kind" '$1=="torch" && $2==k && $3=="median" {print $4}' "$OUT/torch-$model.txt")
    ratio=$(python3 -c "print('%.1fx' % ($b / $a))" 2>/dev/null || echo "?")
    printf '%-12s %-10s %10s %10s %8s\n' "$model" "$kind" "$a" "$b" "$ratio"
  done
  grep -h "copy-bandwidth\|persistent\|keeps" "$OUT/torch-$model.txt" "$OUT/ddprt-$model.txt"
done
echo "== compiled step: $step_result"
# A missing .gpu-step/ is reported above, not counted as a failure.
[ "$tests" != 0 ] && exit "$tests"
[ "$step_status" = 2 ] && exit 0
exit "$step_status"
