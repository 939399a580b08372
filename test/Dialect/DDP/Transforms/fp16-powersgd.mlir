// PowerSGD composed with fp16 (PyTorch's fp16_compress_wrapper(powerSGD_hook)):
// run insert-powersgd first, then insert-fp16-compression; every allreduce
// PowerSGD emits (P, Q, the uncompressed bucket, the warm-up mean) then
// travels as f16, while the compression compute stays in f32.
// RUN: ddp-opt %s --insert-powersgd="rank=2" --insert-fp16-compression | FileCheck %s
// RUN: ddp-opt %s --insert-powersgd="rank=2" --insert-fp16-compression --ddp-fuse-kernels | FileCheck %s --check-prefix=FUSED
// RUN: ddp-opt %s --insert-powersgd="rank=2" --insert-fp16-compression --ddp-compression-report=output=- -o /dev/null | FileCheck %s --check-prefix=REPORT

// CHECK-LABEL: func.func @step(
// CHECK: scf.if
// CHECK:   ddp.allreduce sum %{{.*}}, %{{.*}} role warmup : tensor<64x32xf16>, tensor<64xf16>
// CHECK: } else {
// CHECK:   ddp.allreduce_start sum %{{.*}} role uncompressed : tensor<64xf16>
// CHECK:   %[[P:.*]] = ddp.project %{{.*}} scheme <"powersgd"> : tensor<64x32xf32> times tensor<32x2xf32>
// CHECK:   %[[PS:.*]] = ddp.scale %[[P]] by inverse_world_size : tensor<64x2xf32>
// CHECK:   %[[PH:.*]] = ddp.cast %[[PS]] scheme <"fp16"> : tensor<64x2xf32> to tensor<64x2xf16>
// CHECK:   %[[PR:.*]] = ddp.allreduce sum %[[PH]] role compressed : tensor<64x2xf16>
// CHECK:   %[[PF:.*]] = ddp.cast %[[PR]] : tensor<64x2xf16> to tensor<64x2xf32>
// CHECK:   %[[PW:.*]] = ddp.scale %[[PF]] by world_size : tensor<64x2xf32>
// CHECK:   ddp.orthogonalize %[[PW]] : tensor<64x2xf32>
// CHECK:   ddp.allreduce sum %{{.*}} role compressed : tensor<32x2xf16>

// FUSED-LABEL: func.func @step(
// FUSED: ddp.project_residual {{.*}} scheme <"powersgd"> :
// FUSED: ddp.cast %{{.*}} scaled by inverse_world_size scheme <"fp16"> : tensor<64x2xf32> to tensor<64x2xf16>
// FUSED: ddp.cast %{{.*}} scaled by world_size : tensor<64x2xf16> to tensor<64x2xf32>
// FUSED: ddp.backproject_residual {{.*}} scheme <"powersgd"> :

// REPORT: powersgd+fp16 2 f16 2048 192
// REPORT: uncompressed+fp16 - f16 64 64
// REPORT: total: 2 tensors, 1 compressed, 2 narrowed; elements 2112 -> 256 (8.25x); bytes 8448 -> 512 (16.50x)
func.func @step(%w: tensor<64x32xf32>, %b: tensor<64xf32>) -> (tensor<64x32xf32>, tensor<64xf32>) {
  %0:2 = ddp.allreduce mean %w, %b : tensor<64x32xf32>, tensor<64xf32>
  return %0#0, %0#1 : tensor<64x32xf32>, tensor<64xf32>
}
