// RUN: ddp-opt %s --insert-fp16-compression -split-input-file -verify-diagnostics | FileCheck %s --check-prefixes=CHECK,FP16
// RUN: ddp-opt %s --insert-bf16-compression -split-input-file -verify-diagnostics | FileCheck %s --check-prefixes=CHECK,BF16

// fp16_compress_hook: divide by the world size, cast, allreduce (sum) in
// the narrow type, cast back.
// CHECK-LABEL: func.func @mean(
// CHECK-SAME: %[[W:[^:]*]]: tensor<64x32xf32>, %[[B:[^:]*]]: tensor<64xf32>
// CHECK: %[[S:.*]]:2 = ddp.scale %[[W]], %[[B]] by inverse_world_size : tensor<64x32xf32>, tensor<64xf32>
// FP16: %[[N:.*]]:2 = ddp.cast %[[S]]#0, %[[S]]#1 scheme <"fp16"> : tensor<64x32xf32>, tensor<64xf32> to tensor<64x32xf16>, tensor<64xf16>
// BF16: %[[N:.*]]:2 = ddp.cast %[[S]]#0, %[[S]]#1 scheme <"bf16"> : tensor<64x32xf32>, tensor<64xf32> to tensor<64x32xbf16>, tensor<64xbf16>
// FP16: %[[R:.*]]:2 = ddp.allreduce sum %[[N]]#0, %[[N]]#1 : tensor<64x32xf16>, tensor<64xf16>
// BF16: %[[R:.*]]:2 = ddp.allreduce sum %[[N]]#0, %[[N]]#1 : tensor<64x32xbf16>, tensor<64xbf16>
// CHECK: %[[F:.*]]:2 = ddp.cast %[[R]]#0, %[[R]]#1 : {{.*}} to tensor<64x32xf32>, tensor<64xf32>
// CHECK: return %[[F]]#0, %[[F]]#1
func.func @mean(%w: tensor<64x32xf32>, %b: tensor<64xf32>) -> (tensor<64x32xf32>, tensor<64xf32>) {
  %0:2 = ddp.allreduce mean %w, %b : tensor<64x32xf32>, tensor<64xf32>
  return %0#0, %0#1 : tensor<64x32xf32>, tensor<64xf32>
}

// -----

// A sum is pre-scaled too (no overflow in the narrow type) and scaled back.
// CHECK-LABEL: func.func @sum(
// CHECK: ddp.scale %{{.*}} by inverse_world_size : tensor<8xf64>
// CHECK: %[[R:.*]] = ddp.allreduce sum
// CHECK: %[[F:.*]] = ddp.cast %[[R]] : {{.*}} to tensor<8xf64>
// CHECK: %[[T:.*]] = ddp.scale %[[F]] by world_size : tensor<8xf64>
// CHECK: return %[[T]]
func.func @sum(%x: tensor<8xf64>) -> tensor<8xf64> {
  %0 = ddp.allreduce sum %x : tensor<8xf64>
  return %0 : tensor<8xf64>
}

// -----

// Started allreduces keep their start/wait split; the cast back comes after
// the wait.
// CHECK-LABEL: func.func @started(
// CHECK: %[[H:.*]] = ddp.allreduce_start sum %{{.*}} role uncompressed
// CHECK: %[[W:.*]] = ddp.wait %[[H]]
// CHECK: %[[F:.*]] = ddp.cast %[[W]]
// CHECK: return %[[F]]
func.func @started(%x: tensor<8xf32>) -> tensor<8xf32> {
  %h = ddp.allreduce_start mean %x role uncompressed : tensor<8xf32>
  %r = ddp.wait %h : !ddp.request<tensor<8xf32>>
  return %r : tensor<8xf32>
}

// -----

// Dynamic shapes stay as they are, with a remark; tensors that are already
// 16-bit stay quietly.
// CHECK-LABEL: func.func @left_alone(
// CHECK: ddp.allreduce sum %{{.*}} : tensor<?xf32>
// CHECK: ddp.allreduce sum %{{.*}} : tensor<4xf16>
func.func @left_alone(%d: tensor<?xf32>, %w: tensor<8xf32>, %h: tensor<4xf16>)
    -> (tensor<?xf32>, tensor<8xf32>, tensor<4xf16>) {
  // expected-remark @+1 {{leaves tensor #0 ('tensor<?xf32>' from @left_alone:%arg0) as a plain allreduce: its shape is dynamic}}
  %0:2 = ddp.allreduce sum %d, %w : tensor<?xf32>, tensor<8xf32>
  %1 = ddp.allreduce sum %h : tensor<4xf16>
  return %0#0, %0#1, %1 : tensor<?xf32>, tensor<8xf32>, tensor<4xf16>
}
