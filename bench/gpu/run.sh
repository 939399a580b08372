#!/usr/bin/env bash
# GPU check, one prepared script for a machine with an NVIDIA GPU (CUDA,
# CMake, ninja, PyTorch; no MLIR, no MPI, no network needed): builds the
# runtime on its own, runs its tests (the GPU ones included), times one
# gradient-sync step of ours against PyTorch's hooks on the same card for
# ResNet-50 and GPT-2 medium, and prints a short table last. Everything it
# prints is also written under $OUT (default ./gpu-results).
#
#   bash bench/gpu/run.sh
#
# GoogleTest: the system's, or the sources in ./.gtest (copy
# /usr/src/googletest there on a Debian machine and carry it).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/gpu-results}"
mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
STEPS="${STEPS:-20}"

echo "== $(date -u '+%Y-%m-%d %H:%M UTC')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

NCCL_ROOT=$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null || echo /usr/local/cuda)
export LD_LIBRARY_PATH="$NCCL_ROOT/lib:${LD_LIBRARY_PATH:-}"
GTEST_ARGS=()
[ -d .gtest ] && GTEST_ARGS=(-DDDPRT_GTEST_SOURCE_DIR="$PWD/.gtest")

echo "== build (runtime alone, NCCL from $NCCL_ROOT)"
cmake -G Ninja -S runtime -B build-gpu -DCMAKE_BUILD_TYPE=Release \
  -DNCCL_ROOT="$NCCL_ROOT" "${GTEST_ARGS[@]}" || exit 1
ninja -C build-gpu || exit 1

echo "== tests"
build-gpu/test/ddprt-cuda-tests --gtest_brief=1 2>&1 | tail -n 30
tests=$?
build-gpu/test/ddprt-tests --gtest_brief=1 2>&1 | tail -n 5

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
exit $tests
