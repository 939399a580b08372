// RUN: ddp-opt %s --ddp-apply-hook=hook=h | FileCheck %s

// The functions a hook calls are inlined into it (and theirs), so the
// bucket's static size reaches their ops; private helpers nothing else
// calls leave with the hook, a public one stays.
// CHECK-NOT: func.func private @scale_half
// CHECK-NOT: func.func private @half_then_reduce
// CHECK-LABEL: func.func @kept_helper(
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[A:.*]]: tensor<4x3xf32>
// CHECK-NOT: call
// CHECK: %[[FLAT:.*]] = ddp.flatten %[[A]]{{.*}} -> tensor<12xf32>
// CHECK: %[[HALF:.*]] = arith.mulf %[[FLAT]], %{{.*}} : tensor<12xf32>
// CHECK: ddp.allreduce mean %[[HALF]] role compressed : tensor<12xf32>
// CHECK: arith.addf %{{.*}} : tensor<12xf32>
// CHECK-NOT: call
func.func private @scale_half(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %half = arith.constant 0.5 : f32
  %e = tensor.empty(%n) : tensor<?xf32>
  %h = linalg.fill ins(%half : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %r = arith.mulf %x, %h : tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func private @half_then_reduce(%x: tensor<?xf32>) -> tensor<?xf32> {
  %h = func.call @scale_half(%x) : (tensor<?xf32>) -> tensor<?xf32>
  %r = ddp.allreduce mean %h : tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func @kept_helper(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}
// mean(g / 2) * 2, written with two helpers and a public function.
func.func private @h(%g: tensor<?xf32>) -> tensor<?xf32> {
  %r = func.call @half_then_reduce(%g) : (tensor<?xf32>) -> tensor<?xf32>
  %k = func.call @kept_helper(%r) : (tensor<?xf32>) -> tensor<?xf32>
  %twice = arith.addf %k, %k : tensor<?xf32>
  return %twice : tensor<?xf32>
}
func.func @step(%a: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %r = ddp.allreduce mean %a : tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}
