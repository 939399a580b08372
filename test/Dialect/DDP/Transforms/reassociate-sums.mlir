// RUN: ddp-opt %s --ddp-reassociate-sums | FileCheck %s

#id = affine_map<(d0) -> (d0)>
#all = affine_map<(d0) -> ()>
#ri_in = affine_map<(r, i) -> (r, i)>
#ri_out = affine_map<(r, i) -> (i)>
// CHECK-LABEL: func.func @sums(
func.func @sums(%x: tensor<1024xf32>, %y: tensor<4x1024xf32>, %init: tensor<f32>,
                %init1: tensor<1024xf32>) -> (tensor<f32>, tensor<f32>, tensor<1024xf32>, tensor<f32>) {
  // The innermost loop adds up the terms: its combiner may be reassociated
  // (and only it: the abs and the product before it keep their flags).
  // CHECK: linalg.generic
  // CHECK: math.absf %{{.*}} : f32
  // CHECK-NEXT: arith.mulf %{{.*}}, %{{.*}} : f32
  // CHECK-NEXT: arith.addf %{{.*}}, %{{.*}} fastmath<reassoc> : f32
  %sum = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction"]}
      ins(%x : tensor<1024xf32>) outs(%init : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %abs = math.absf %a : f32
    %sq = arith.mulf %abs, %abs : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  // A product reduction too; flags it had are kept.
  // CHECK: linalg.generic
  // CHECK: arith.mulf %{{.*}}, %{{.*}} fastmath<reassoc,nnan> : f32
  %prod = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction"]}
      ins(%x : tensor<1024xf32>) outs(%init : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %p = arith.mulf %acc, %a fastmath<nnan> : f32
    linalg.yield %p : f32
  } -> tensor<f32>
  // A sum over ranks, the outer loop: its order is kept (the vectorizer
  // runs over the parallel loop inside).
  // CHECK: linalg.generic
  // CHECK: arith.addf %{{.*}}, %{{.*}} : f32
  // CHECK-NOT: fastmath
  // CHECK: linalg.yield
  %over_ranks = linalg.generic {indexing_maps = [#ri_in, #ri_out], iterator_types = ["reduction", "parallel"]}
      ins(%y : tensor<4x1024xf32>) outs(%init1 : tensor<1024xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<1024xf32>
  // Minimum and maximum are exact in any order: nothing to allow.
  // CHECK: linalg.generic
  // CHECK: arith.maximumf %{{.*}}, %{{.*}} : f32
  // CHECK-NOT: fastmath
  // CHECK: return
  %max = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction"]}
      ins(%x : tensor<1024xf32>) outs(%init : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.maximumf %acc, %a : f32
    linalg.yield %m : f32
  } -> tensor<f32>
  return %sum, %prod, %over_ranks, %max : tensor<f32>, tensor<f32>, tensor<1024xf32>, tensor<f32>
}

// A matmul's sum over K (its innermost loop) is left alone: BLAS adds it,
// or, with contractions=loops, the loop in source order.
#mm_a = affine_map<(i, j, k) -> (i, k)>
#mm_b = affine_map<(i, j, k) -> (k, j)>
#mm_c = affine_map<(i, j, k) -> (i, j)>
// CHECK-LABEL: func.func @matmul(
// CHECK: arith.addf %{{.*}}, %{{.*}} : f32
// CHECK-NOT: fastmath
// CHECK: return
func.func @matmul(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %r = linalg.generic {indexing_maps = [#mm_a, #mm_b, #mm_c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<8x16xf32>) outs(%c : tensor<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
