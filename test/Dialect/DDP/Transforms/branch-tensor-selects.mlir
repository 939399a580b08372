// RUN: ddp-opt %s -split-input-file --ddp-branch-tensor-selects | FileCheck %s

// A scheme's NaN guard: keep the new state if it is finite, else zeros.
// The zeros are made only on the branch that needs them; the constant of
// the bucket's size is gone.
// CHECK-LABEL: func.func @guard(
// CHECK-SAME: %[[V:.*]]: tensor<1024xf32>, %[[OK:.*]]: i1
// CHECK-NOT: arith.constant dense
// CHECK: %[[R:.*]] = scf.if %[[OK]] -> (tensor<1024xf32>) {
// CHECK-NEXT: scf.yield %[[V]] : tensor<1024xf32>
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[E:.*]] = tensor.empty() : tensor<1024xf32>
// CHECK-NEXT: %[[F:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E]] : tensor<1024xf32>) -> tensor<1024xf32>
// CHECK-NEXT: scf.yield %[[F]] : tensor<1024xf32>
// CHECK: return %[[R]]
func.func @guard(%v: tensor<1024xf32>, %ok: i1) -> tensor<1024xf32> {
  %zeros = arith.constant dense<0.0> : tensor<1024xf32>
  %safe = arith.select %ok, %v, %zeros : tensor<1024xf32>
  return %safe : tensor<1024xf32>
}

// -----

// Two tensors: each branch yields its own. A select per element (an i1
// tensor condition) and a scalar select stay as they are.
// CHECK-LABEL: func.func @others(
// CHECK: scf.if %{{.*}} -> (tensor<8xf32>) {
// CHECK-NEXT: scf.yield %arg0
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %arg1
// CHECK: arith.select %{{.*}}, %arg0, %arg1 : tensor<8xi1>, tensor<8xf32>
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
func.func @others(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: i1, %m: tensor<8xi1>, %x: f32, %y: f32)
    -> (tensor<8xf32>, tensor<8xf32>, f32) {
  %0 = arith.select %c, %a, %b : tensor<8xf32>
  %1 = arith.select %m, %a, %b : tensor<8xi1>, tensor<8xf32>
  %2 = arith.select %c, %x, %y : f32
  return %0, %1, %2 : tensor<8xf32>, tensor<8xf32>, f32
}
