// The default pipeline buckets, compresses, fuses and schedules the
// collectives to overlap computation (start/wait).
// RUN: ddp-opt %s --ddp-compress="powersgd-rank=2 start-iter=0" | FileCheck %s
// The same pipeline through the textual pass-pipeline syntax.
// RUN: ddp-opt %s -p 'builtin.module(ddp-compress{powersgd-rank=2 start-iter=0})' | FileCheck %s
// fp16 only, no PowerSGD.
// RUN: ddp-opt %s --ddp-compress="narrow=fp16" | FileCheck %s --check-prefix=FP16
// overlap=false leaves the blocking allreduces where the passes put them.
// RUN: ddp-opt %s --ddp-compress="powersgd-rank=2 start-iter=0 overlap=false" | FileCheck %s --check-prefix=NOOVERLAP
// The bucket schemes as pipeline options: quantization (one bucket, one
// allgather) and a hook from a library file, here with its collectives'
// scales in bf16 (narrow=). They are then fused and scheduled like the
// others.
// RUN: ddp-opt %s --ddp-compress="quantize=per-tensor" | FileCheck %s --check-prefix=QUANT
// QUANT: ddp.flatten {{.*}} scheme <"quantize-per-tensor", {exchange = "fused"}>
// QUANT: ddp.allgather
// QUANT-NOT: ddp.allreduce
// RUN: ddp-opt %s --ddp-compress="quantize=per-channel channel-size=64" | FileCheck %s --check-prefix=CHANNEL
// CHANNEL: ddp.flatten {{.*}} scheme <"quantize-per-channel", {channel_size = {{[0-9]+}} : i64, exchange = "fused"}>
// RUN: ddp-opt %s --ddp-compress="hook=allreduce_hook hook-from=%S/../../examples/hooks/allreduce_hook.mlir narrow=bf16" \
// RUN:   | FileCheck %s --check-prefix=HOOK
// HOOK: ddp.flatten {{.*}} scheme <"hook:allreduce_hook">
// HOOK: ddp.allreduce_start sum {{.*}} role compressed : tensor<{{[0-9]+}}xbf16>
// fuse=false keeps the fine-grained steps.
// RUN: ddp-opt %s --ddp-compress="powersgd-rank=2 start-iter=0 fuse=false" | FileCheck %s --check-prefix=NOFUSE

// CHECK-LABEL: func.func @step(
// CHECK: ddp.allreduce_start mean %{{.*}} role uncompressed : tensor<64xf32>
// CHECK: ddp.project_residual %{{.*}}, %{{.*}} plus
// CHECK: %[[P:.*]] = ddp.allreduce_start sum %{{.*}}, %{{.*}} role compressed : tensor<32x2xf32>, tensor<64x2xf32>
// CHECK: ddp.wait %[[P]]
// CHECK: ddp.backproject_residual
// CHECK: ddp.reconstruct_residual
// CHECK-NOT: ddp.add_residual

// FP16-LABEL: func.func @step(
// FP16: ddp.cast %{{.*}}, %{{.*}}, %{{.*}} scaled by inverse_world_size scheme <"fp16"> : tensor<32x32xf32>, tensor<64xf32>, tensor<64x32xf32> to tensor<32x32xf16>, tensor<64xf16>, tensor<64x32xf16>
// FP16: ddp.allreduce_start sum
// FP16: ddp.wait
// FP16: ddp.cast

// NOOVERLAP-LABEL: func.func @step(
// NOOVERLAP: ddp.allreduce_start mean %{{.*}} role uncompressed : tensor<64xf32>
// NOOVERLAP: ddp.allreduce sum %{{.*}}, %{{.*}} role compressed : tensor<32x2xf32>, tensor<64x2xf32>
// NOOVERLAP: ddp.allreduce mean %{{.*}}, %{{.*}} role compressed

// NOFUSE-LABEL: func.func @step(
// NOFUSE: ddp.add_residual
// NOFUSE: ddp.add_residual
// NOFUSE-NOT: ddp.project_residual
func.func @step(%w: tensor<64x32xf32>, %b: tensor<64xf32>, %v: tensor<32x32xf32>) -> (tensor<64x32xf32>, tensor<64xf32>, tensor<32x32xf32>) {
  %0 = ddp.allreduce mean %w : tensor<64x32xf32>
  %1 = ddp.allreduce mean %b : tensor<64xf32>
  %2 = ddp.allreduce mean %v : tensor<32x32xf32>
  return %0, %1, %2 : tensor<64x32xf32>, tensor<64xf32>, tensor<32x32xf32>
}
