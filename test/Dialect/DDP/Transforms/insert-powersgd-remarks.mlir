// RUN: ddp-opt %s --insert-powersgd="rank=2 start-iter=0" -split-input-file -verify-diagnostics | FileCheck %s

// What PowerSGD cannot handle stays a plain allreduce, with a remark that
// says why; the rest of the bucket is still compressed.
// CHECK-LABEL: func.func @mixed_bucket(
// CHECK-SAME: %[[D:[^:]*]]: tensor<?x32xf32>, %[[S:[^:]*]]: tensor<f32>, %[[W:[^:]*]]: tensor<64x32xf32>
// CHECK: ddp.allreduce sum %[[D]], %[[S]] : tensor<?x32xf32>, tensor<f32>
// CHECK: ddp.allreduce sum %{{.*}} role compressed : tensor<64x2xf32>
func.func @mixed_bucket(%d: tensor<?x32xf32>, %s: tensor<f32>, %w: tensor<64x32xf32>)
    -> (tensor<?x32xf32>, tensor<f32>, tensor<64x32xf32>) {
  // expected-remark @+2 {{insert-powersgd leaves tensor #0 ('tensor<?x32xf32>' from @mixed_bucket:%arg0) as a plain allreduce: its shape is dynamic}}
  // expected-remark @+1 {{insert-powersgd leaves tensor #1 ('tensor<f32>' from @mixed_bucket:%arg1) as a plain allreduce: it is 0-d}}
  %0:3 = ddp.allreduce sum %d, %s, %w : tensor<?x32xf32>, tensor<f32>, tensor<64x32xf32>
  return %0#0, %0#1, %0#2 : tensor<?x32xf32>, tensor<f32>, tensor<64x32xf32>
}

// -----

// CHECK-LABEL: func.func @only_dynamic(
// CHECK-NOT: ddp.state
// CHECK: ddp.allreduce mean %{{.*}} : tensor<?xf32>
func.func @only_dynamic(%d: tensor<?xf32>) -> tensor<?xf32> {
  // expected-remark @+1 {{its shape is dynamic}}
  %0 = ddp.allreduce mean %d : tensor<?xf32>
  return %0 : tensor<?xf32>
}
