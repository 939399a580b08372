// ddp.flatten and ddp.unflatten as upstream tensor ops, before
// bufferization.
// RUN: ddp-opt %s --ddp-expand-buckets | FileCheck %s

// CHECK-LABEL: func.func @expand
// CHECK-SAME: (%[[W:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3xf32>, %[[S:.*]]: tensor<f32>)
func.func @expand(%w: tensor<2x3xf32>, %b: tensor<3xf32>, %s: tensor<f32>)
    -> (tensor<2x3xf32>, tensor<3xf32>, tensor<f32>) {
  // CHECK: %[[CW:.*]] = tensor.collapse_shape %[[W]] {{\[}}[0, 1]] : tensor<2x3xf32> into tensor<6xf32>
  // CHECK: %[[ES:.*]] = tensor.expand_shape %[[S]] [] output_shape [1] : tensor<f32> into tensor<1xf32>
  // CHECK: %[[F:.*]] = tensor.concat dim(0) %[[CW]], %[[B]], %[[ES]] : (tensor<6xf32>, tensor<3xf32>, tensor<1xf32>) -> tensor<10xf32>
  %f = ddp.flatten %w, %b, %s scheme <"s"> : tensor<2x3xf32>, tensor<3xf32>, tensor<f32> -> tensor<10xf32>
  // CHECK: %[[M:.*]] = ddp.allreduce mean %[[F]]
  %m = ddp.allreduce mean %f role compressed : tensor<10xf32>
  // CHECK: %[[S0:.*]] = tensor.extract_slice %[[M]][0] [6] [1] : tensor<10xf32> to tensor<6xf32>
  // CHECK: %[[R0:.*]] = tensor.expand_shape %[[S0]] {{\[}}[0, 1]] output_shape [2, 3] : tensor<6xf32> into tensor<2x3xf32>
  // CHECK: %[[R1:.*]] = tensor.extract_slice %[[M]][6] [3] [1] : tensor<10xf32> to tensor<3xf32>
  // CHECK: %[[S2:.*]] = tensor.extract_slice %[[M]][9] [1] [1] : tensor<10xf32> to tensor<1xf32>
  // CHECK: %[[R2:.*]] = tensor.collapse_shape %[[S2]] [] : tensor<1xf32> into tensor<f32>
  %u:3 = ddp.unflatten %m : tensor<10xf32> -> tensor<2x3xf32>, tensor<3xf32>, tensor<f32>
  // CHECK: return %[[R0]], %[[R1]], %[[R2]]
  return %u#0, %u#1, %u#2 : tensor<2x3xf32>, tensor<3xf32>, tensor<f32>
}

// One tensor: no concat, no slice.
// CHECK-LABEL: func.func @single
// CHECK-NOT: tensor.concat
// CHECK-NOT: tensor.extract_slice
func.func @single(%b: tensor<3xf32>) -> tensor<3xf32> {
  %f = ddp.flatten %b scheme <"s"> : tensor<3xf32> -> tensor<3xf32>
  %m = ddp.allreduce mean %f role compressed : tensor<3xf32>
  %u = ddp.unflatten %m : tensor<3xf32> -> tensor<3xf32>
  return %u : tensor<3xf32>
}
