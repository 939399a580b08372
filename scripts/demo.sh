#!/usr/bin/env bash
# The main job on a bundled example: compress the gradient allreduces of
# ResNet-18's 62 parameters and print what each one sends per step.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
OPT="${BUILD_DIR:-build}/bin/ddp-opt"
MODEL=examples/resnet18_grads.mlir

echo "== $MODEL: one 'ddp.allreduce mean' per gradient, as DDP does"
echo "== PowerSGD rank 2 (PyTorch's powerSGD_hook rule: compress iff n*m > (n+m)*r*2)"
"$OPT" "$MODEL" --ddp-bucketize --insert-powersgd=rank=2 --ddp-fuse-kernels \
  --ddp-compression-report=output=- -o build/resnet18_powersgd.mlir
echo
echo "== PowerSGD rank 2 with P and Q sent as fp16 (fp16_compress_wrapper(powerSGD_hook))"
"$OPT" "$MODEL" --ddp-compress="powersgd-rank=2 narrow=fp16" \
  --ddp-compression-report=output=- -o /dev/null | tail -n 1
echo
echo "== fp16 only (fp16_compress_hook)"
"$OPT" "$MODEL" --ddp-compress="narrow=fp16" \
  --ddp-compression-report=output=- -o /dev/null | tail -n 1
echo
echo "The compressed step function is in build/resnet18_powersgd.mlir."
echo "'elements' is what the plain allreduce sends per step, 'sent' what the"
echo "compressed step sends (PyTorch's compression_stats() counts the same)."
