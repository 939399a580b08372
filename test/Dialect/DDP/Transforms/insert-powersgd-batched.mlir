// RUN: ddp-opt %s --insert-powersgd="rank=2 start-iter=0 mode=batched" | FileCheck %s
// RUN: ddp-opt %s --insert-powersgd="rank=2 start-iter=0 mode=batched" --ddp-compression-report=output=- -o /dev/null | FileCheck %s --check-prefix=REPORT

// batched_powerSGD_hook: the whole bucket (2048 + 64 + 1152 = 3264
// elements, biases too) is zero-padded to one 58 x 58 matrix (58^2 = 3364).
// CHECK-DAG: ddp.state @ddp.q.batched.0 : tensor<58x2xf32>
// CHECK-DAG: ddp.state @ddp.error.batched.0 : tensor<58x58xf32>
// CHECK-LABEL: func.func @batched(
// CHECK-SAME: %[[W:[^:]*]]: tensor<64x32xf32>, %[[B:[^:]*]]: tensor<64xf32>, %[[C:[^:]*]]: tensor<16x8x3x3xf32>
// CHECK-NOT: allreduce_start
// CHECK-DAG: %[[FW:.*]] = tensor.collapse_shape %[[W]] {{\[}}[0, 1]] : tensor<64x32xf32> into tensor<2048xf32>
// CHECK-DAG: %[[FC:.*]] = tensor.collapse_shape %[[C]] {{\[}}[0, 1, 2, 3]] : tensor<16x8x3x3xf32> into tensor<1152xf32>
// CHECK-DAG: %[[PAD:.*]] = arith.constant dense<0.000000e+00> : tensor<100xf32>
// CHECK: %[[FLAT:.*]] = tensor.concat dim(0) %[[FW]], %[[B]], %[[FC]], %[[PAD]] : {{.*}} -> tensor<3364xf32>
// CHECK: %[[SQ:.*]] = tensor.expand_shape %[[FLAT]] {{\[}}[0, 1]] output_shape [58, 58]
// CHECK: ddp.add_residual %[[SQ]] plus
// CHECK: ddp.allreduce sum %{{.*}} role compressed : tensor<58x2xf32>
// CHECK: ddp.allreduce mean %{{.*}} role compressed : tensor<58x2xf32>
// CHECK: %[[R:.*]] = ddp.reconstruct
// CHECK: %[[RF:.*]] = tensor.collapse_shape %[[R]] {{\[}}[0, 1]] : tensor<58x58xf32> into tensor<3364xf32>
// CHECK: tensor.extract_slice %[[RF]][0] [2048] [1]
// CHECK: tensor.extract_slice %[[RF]][2048] [64] [1]
// CHECK: tensor.extract_slice %[[RF]][2112] [1152] [1]
func.func @batched(%w: tensor<64x32xf32>, %b: tensor<64xf32>, %c: tensor<16x8x3x3xf32>)
    -> (tensor<64x32xf32>, tensor<64xf32>, tensor<16x8x3x3xf32>) {
  %0:3 = ddp.allreduce mean %w, %b, %c : tensor<64x32xf32>, tensor<64xf32>, tensor<16x8x3x3xf32>
  return %0#0, %0#1, %0#2 : tensor<64x32xf32>, tensor<64xf32>, tensor<16x8x3x3xf32>
}

// A bucket whose size is a perfect square needs no padding.
// CHECK-LABEL: func.func @square(
// CHECK-NOT: arith.constant dense
// CHECK: tensor.concat dim(0) %{{.*}}, %{{.*}} : (tensor<12xf32>, tensor<4xf32>) -> tensor<16xf32>
func.func @square(%a: tensor<3x4xf32>, %b: tensor<4xf32>) -> (tensor<3x4xf32>, tensor<4xf32>) {
  %0:2 = ddp.allreduce mean %a, %b : tensor<3x4xf32>, tensor<4xf32>
  return %0#0, %0#1 : tensor<3x4xf32>, tensor<4xf32>
}

// REPORT: powersgd-batched 2 f32 3264 232
// REPORT: powersgd-batched 2 f32 16 16
// REPORT: powersgd-batched 2 f32 4 8
// REPORT: uncompressed - f32 0 0
// REPORT: total: 7 tensors, 6 compressed; elements 3284 -> 256

// Tensors without elements have nothing to send: they are their own result
// (found by test/Fuzz/random-modules.test).
// CHECK-LABEL: func.func @empty_tensors(
// CHECK-SAME: %[[A:[^:]*]]: tensor<4xf32>, %[[B:[^:]*]]: tensor<0xf32>
// CHECK: %[[FLAT:.*]] = tensor.concat dim(0) %[[A]] : (tensor<4xf32>) -> tensor<4xf32>
// CHECK: tensor.expand_shape %[[FLAT]] {{\[}}[0, 1]] output_shape [2, 2]
// CHECK: return %{{.*}}, %[[B]]
func.func @empty_tensors(%a: tensor<4xf32>, %b: tensor<0xf32>) -> (tensor<4xf32>, tensor<0xf32>) {
  %0:2 = ddp.allreduce mean %a, %b : tensor<4xf32>, tensor<0xf32>
  return %0#0, %0#1 : tensor<4xf32>, tensor<0xf32>
}

// CHECK-LABEL: func.func @only_empty(
// CHECK-NOT: ddp.state
// CHECK: ddp.allreduce mean %arg0 role uncompressed : tensor<0x3xf32>
func.func @only_empty(%a: tensor<0x3xf32>) -> tensor<0x3xf32> {
  %0 = ddp.allreduce mean %a : tensor<0x3xf32>
  return %0 : tensor<0x3xf32>
}
