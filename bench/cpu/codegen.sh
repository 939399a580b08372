#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The compiler's own code against PyTorch and against memory, side by side
# in one run, one rank (no communication to hide anything):
#
#   1. Training steps' compute: bench/overlap's MLP (LAYERS x HIDDEN, batch
#      BATCH; gen_mlp_step.py --no-allreduce) and the training demo's digits
#      perceptron (64-128-10, batch 32): forward, backward and the SGD
#      update. Ours: ddp-run's median step with the matmuls in BLAS at each
#      --threads-per-rank (matmuls and parallel loops), and with
#      --contractions=loops; PyTorch 1.13's
#      (bench/cpu/torch_compute.py) at each thread count, its best beside.
#   2. Compression schemes on ResNet-18's gradients (62 tensors, 11.7 M
#      f32 elements, DDP's 25 MiB buckets): per-tensor and per-channel
#      quantization and the user guide's sign hook, with every loop on one
#      thread (--parallel-loops=false) and at each --threads-per-rank; the
#      ratio to the floor takes the best. "compiled ms" is the
#      step minus the time inside runtime calls (the one-rank allgather,
#      the NaN inspection), from ddp-run's summary; "floor ms" is the bytes
#      each scheme's passes must read and write, over a copy bandwidth
#      measured here by numpy (np.copyto into a buffer written before):
#      quantization 14 bytes per element (min-max reads the bucket,
#      quantizing reads it again and writes a byte, dequantizing reads the
#      byte and writes the result); the sign hook 26 (read g and e for
#      mean |g + e|; read them again to write the signs and the new error;
#      read the signs and write the result). Bucketing's copies (8 bytes
#      per element, PyTorch's DDP makes them too) are in "compiled ms", not
#      in the floor.
#   3. The parallel loops on their own: an element-wise chain that computes
#      more than it moves (4 M elements, exp, tanh and sin of each: calls
#      of libm), with every loop on one thread and at each
#      --threads-per-rank (--parallel-loops forced, also at 1).
#
#   bash bench/cpu/codegen.sh
#
# Environment: STEPS [20], LAYERS [8], HIDDEN [1024], BATCH [4],
# BUILD_DIR [build], PYTHON [/usr/bin/python3, with numpy and torch],
# WORK_DIR [$BUILD_DIR/bench-codegen].
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS="${STEPS:-20}"
LAYERS="${LAYERS:-8}"
HIDDEN="${HIDDEN:-1024}"
BATCH="${BATCH:-4}"
BUILD_DIR="${BUILD_DIR:-build}"
PYTHON="${PYTHON:-/usr/bin/python3}"
WORK="${WORK_DIR:-$BUILD_DIR/bench-codegen}"
OPT="$BUILD_DIR/bin/ddp-opt"
RUN="$BUILD_DIR/bin/ddp-run"
for binary in "$OPT" "$RUN"; do
  [ -x "$binary" ] || { echo "codegen.sh: $binary not found (ninja -C $BUILD_DIR ddp-opt ddp-run)" >&2; exit 1; }
done
rm -rf "$WORK" && mkdir -p "$WORK"
CORES=$(nproc)

# ms MODE SUMMARY: the median step, or the step minus the runtime's time.
ms() {
  "$PYTHON" - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[2]))
ms = d["ms_per_step"]
if sys.argv[1] == "compiled":
    ms -= sum(d["ms_in_runtime_per_step"].values())
print("%.3f" % ms)
PY
}

# over_threads KIND PREFIX ARGS...: ddp-run ARGS at each --threads-per-rank
# (summaries PREFIX.t{n}.json); sets $threaded ("1: ms, 2: ms") and lowers
# $best (if set) to the least "KIND" figure (step or compiled).
over_threads() {
  local kind="$1" prefix="$2" t m
  shift 2
  threaded=""
  for ((t = 1; t <= CORES; ++t)); do
    "$RUN" "$@" --threads-per-rank="$t" --summary-json="$prefix.t$t.json" >/dev/null
    m=$(ms "$kind" "$prefix.t$t.json")
    threaded+="${threaded:+, }$t: $m"
    best=$(printf '%s\n%s\n' "$m" "${best:-$m}" | sort -g | head -1)
  done
}

echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $CORES cores ($(lscpu | sed -n 's/^Model name: *//p')), load $(cut -d' ' -f1-3 /proc/loadavg), source $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

# --- 1. training steps -------------------------------------------------------
"$PYTHON" bench/overlap/gen_mlp_step.py --layers "$LAYERS" --hidden "$HIDDEN" --batch "$BATCH" \
  --no-allreduce -o "$WORK/mlp.mlir"
"$PYTHON" bench/overlap/gen_mlp_step.py --prepare "$WORK/mlp-data" --layers "$LAYERS" \
  --hidden "$HIDDEN" --batch "$BATCH" --ranks 1
"$OPT" "$WORK/mlp.mlir" --ddp-compress -o "$WORK/mlp-step.mlir"
carry=""
for ((k = 0; k < 2 * LAYERS; ++k)); do carry+="${carry:+,}$k:$k"; done
mlp_args=(--np=1 "$WORK/mlp-step.mlir" --entry=step --steps="$STEPS" --quiet
          --inputs="$WORK/mlp-data/inputs.r{rank}.npz" --carry="$carry")

"$PYTHON" examples/train/gen_mlp_step.py --hidden 128 --batch 32 --no-allreduce -o "$WORK/digits.mlir"
"$OPT" "$WORK/digits.mlir" --ddp-compress -o "$WORK/digits-step.mlir"
"$PYTHON" - "$WORK/digits-data" <<'PY'
import os, sys
import numpy as np
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
f32 = np.float32
np.save(f"{out}/w1.npy", (rng.standard_normal((64, 128)) * 0.17).astype(f32))
np.save(f"{out}/b1.npy", np.zeros(128, f32))
np.save(f"{out}/w2.npy", (rng.standard_normal((128, 10)) * 0.12).astype(f32))
np.save(f"{out}/b2.npy", np.zeros(10, f32))
np.save(f"{out}/x.npy", rng.random((32, 64)).astype(f32))
y = np.zeros((32, 10), f32)
y[np.arange(32), rng.integers(0, 10, 32)] = 1
np.save(f"{out}/y.npy", y)
PY
d="$WORK/digits-data"
digits_args=(--np=1 "$WORK/digits-step.mlir" --entry=step --steps="$((STEPS * 20))" --quiet
             --input="$d/w1.npy" --input="$d/b1.npy" --input="$d/w2.npy" --input="$d/b2.npy"
             --input="$d/x.npy" --input="$d/y.npy" --carry=0:0,1:1,2:2,3:3)

echo
echo "### Training steps' compute, 1 rank (median ms per step)"
echo
echo "| step | ours, BLAS, threads per rank: ms | ours, loops ms | PyTorch 1.13, threads: ms | PyTorch best / ours best |"
echo "|---|---|---:|---|---:|"
for model in mlp digits; do
  if [ "$model" = mlp ]; then
    args=("${mlp_args[@]}"); name="MLP ${LAYERS}x$HIDDEN, batch $BATCH"
    torch_args=(--model mlp --layers "$LAYERS" --hidden "$HIDDEN" --batch "$BATCH" --steps "$STEPS")
  else
    args=("${digits_args[@]}"); name="digits 64-128-10, batch 32"
    torch_args=(--model digits --hidden 128 --batch 32 --steps "$((STEPS * 20))")
  fi
  best=""
  over_threads step "$WORK/$model" "${args[@]}"
  ours="$threaded" best_ours="$best"
  "$RUN" "${args[@]}" --contractions=loops --summary-json="$WORK/$model.loops.json" >/dev/null
  loops=$(ms step "$WORK/$model.loops.json")
  theirs=$("$PYTHON" bench/cpu/torch_compute.py "${torch_args[@]}")
  torch_cells=$(awk '{printf "%s%s: %s", (NR > 1 ? ", " : ""), $3, $4}' <<<"$theirs")
  best_torch=$(awk '{print $4}' <<<"$theirs" | sort -g | head -1)
  echo "| $name | $ours | $loops | $torch_cells | $(echo "$best_torch / $best_ours" | bc -l | xargs printf '%.2fx') |"
done

# --- 2. compression schemes --------------------------------------------------
MODEL=examples/resnet18_grads.mlir
"$PYTHON" - "$MODEL" "$WORK/grads" <<'PY'
import os, re, sys
import numpy as np
text = open(sys.argv[1]).read()
os.makedirs(sys.argv[2], exist_ok=True)
rng = np.random.default_rng(0)
for shape, name in re.findall(r'tensor<([0-9x]+)xf32> loc\("([^"]+)"\)', text):
    dims = [int(d) for d in shape.split("x")]
    np.save(f"{sys.argv[2]}/{name}.npy", rng.standard_normal(dims).astype(np.float32))
PY
bandwidth=$("$PYTHON" - <<'PY'
import time
import numpy as np
a = np.ones(64 << 20, np.uint8)
b = np.ones_like(a)
best = min((lambda t: (np.copyto(b, a), time.perf_counter() - t)[1])(time.perf_counter())
           for _ in range(15))
print("%.2f" % (2 * a.nbytes / best / 1e9))
PY
)
elements=$("$PYTHON" -c "
import re
text = open('$MODEL').read()
total = 0
for shape, _ in re.findall(r'tensor<([0-9x]+)xf32> loc\(\"([^\"]+)\"\)', text):
    n = 1
    for d in shape.split('x'):
        n *= int(d)
    total += n
print(total)")
"$OPT" "$MODEL" --ddp-bucketize --insert-quantization --ddp-compress=narrow=none -o "$WORK/quant-tensor.mlir"
"$OPT" "$MODEL" --ddp-bucketize --insert-quantization=granularity=per-channel --ddp-compress=narrow=none -o "$WORK/quant-channel.mlir"
"$OPT" "$MODEL" --ddp-bucketize "--ddp-apply-hook=hook=sign_ef_hook from=examples/hooks/sign_ef_hook.mlir" \
  --ddp-compress=narrow=none -o "$WORK/sign.mlir"
grad_carry=""
for ((k = 0; k < 62; ++k)); do grad_carry+="${grad_carry:+,}$k:$k"; done

echo
echo "### Compression schemes on ResNet-18's gradients ($elements elements), 1 rank"
echo
echo "Copy bandwidth (numpy, read + write): $bandwidth GB/s."
echo
echo "| scheme | compiled ms, one thread (--parallel-loops=false) | compiled ms, threads per rank: ms | bytes per element | floor ms | best compiled / floor |"
echo "|---|---:|---|---:|---:|---:|"
for scheme in quant-tensor quant-channel sign; do
  case "$scheme" in
    quant-tensor) bytes=14; name="per-tensor quantization" ;;
    quant-channel) bytes=14; name="per-channel quantization" ;;
    sign) bytes=26; name="sign hook (error feedback)" ;;
  esac
  scheme_args=(--np=1 "$WORK/$scheme.mlir" --steps="$STEPS" --quiet --input="$WORK/grads/{name}.npy"
               --carry="$grad_carry")
  "$RUN" "${scheme_args[@]}" --parallel-loops=false --summary-json="$WORK/$scheme.serial.json" >/dev/null
  serial=$(ms compiled "$WORK/$scheme.serial.json")
  best="$serial"
  over_threads compiled "$WORK/$scheme" "${scheme_args[@]}"
  floor=$(echo "$bytes * $elements / ($bandwidth * 1000000)" | bc -l)
  printf '| %s | %s | %s | %s | %.2f | %.2fx |\n' "$name" "$serial" "$threaded" "$bytes" "$floor" \
    "$(echo "$best / $floor" | bc -l)"
done

"$PYTHON" -c "
import numpy as np
np.save('$WORK/chain-x.npy', (np.random.default_rng(0).random(1 << 22) + 0.5).astype(np.float32))"
cat >"$WORK/chain.mlir" <<'MLIR'
func.func @step(%x: tensor<4194304xf32>) -> tensor<4194304xf32> {
  %e = math.exp %x : tensor<4194304xf32>
  %t = math.tanh %e : tensor<4194304xf32>
  %s = math.sin %t : tensor<4194304xf32>
  return %s : tensor<4194304xf32>
}
MLIR
chain_args=(--np=1 "$WORK/chain.mlir" --entry=step --steps="$STEPS" --quiet --input="$WORK/chain-x.npy")
echo
echo "### Parallel loops: an element-wise chain of 4 M elements, 1 rank (median ms per step)"
echo
echo "| one thread (--parallel-loops=false) | --parallel-loops, threads per rank: ms | one thread / best |"
echo "|---:|---|---:|"
"$RUN" "${chain_args[@]}" --parallel-loops=false --summary-json="$WORK/chain.serial.json" >/dev/null
serial=$(ms step "$WORK/chain.serial.json")
best="$serial"
over_threads step "$WORK/chain" "${chain_args[@]}" --parallel-loops
printf '| %s | %s | %.2fx |\n' "$serial" "$threaded" "$(echo "$serial / $best" | bc -l)"
