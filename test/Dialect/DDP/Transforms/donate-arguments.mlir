// RUN: ddp-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   --buffer-deallocation-pipeline --ddp-donate-arguments | FileCheck %s
// A module without ddp ops (the pass loads the dialect it reads the
// attribute through; it crashed when nothing else had).
// RUN: echo 'func.func @plain(%arg0: i64) -> i64 { return %arg0 : i64 }' \
// RUN:   | ddp-opt --ddp-donate-arguments | FileCheck %s --check-prefix=PLAIN
// PLAIN: func.func @plain(%arg0: i64) -> i64

// A donated argument reduced in place is returned as it is; without the
// attribute the caller keeps it and the result is a copy.

// CHECK-LABEL: func.func @donated(
// CHECK-SAME: %[[G:.*]]: memref<64xf32>
// CHECK-NOT: bufferization.clone
// CHECK: return %[[G]]
func.func @donated(%g: tensor<64xf32>) -> tensor<64xf32> attributes {ddp.donate_arguments} {
  %r = ddp.allreduce mean %g : tensor<64xf32>
  return %r : tensor<64xf32>
}

// CHECK-LABEL: func.func @kept(
// CHECK: %[[C:.*]] = bufferization.clone
// CHECK: return %[[C]]
func.func @kept(%g: tensor<64xf32>) -> tensor<64xf32> {
  %r = ddp.allreduce mean %g : tensor<64xf32>
  return %r : tensor<64xf32>
}

// The same argument returned twice: one result is the argument, the other
// a copy, so that no two results share a buffer.
// CHECK-LABEL: func.func @twice(
// CHECK-SAME: %[[G:.*]]: memref<64xf32>
// CHECK: %[[C:.*]] = bufferization.clone %[[G]]
// CHECK: return %[[G]], %[[C]]
func.func @twice(%g: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) attributes {ddp.donate_arguments} {
  %r = ddp.allreduce mean %g : tensor<64xf32>
  return %r, %r : tensor<64xf32>, tensor<64xf32>
}
