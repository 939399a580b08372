// RUN: ddp-opt %s -split-input-file --ddp-fuse-elementwise | FileCheck %s

// A chain of element-wise ops and the reduction it feeds: one op, one
// pass over memory. The fused body computes the same ops in the same order.
#id = affine_map<(d0) -> (d0)>
#all = affine_map<(d0) -> ()>
// CHECK-LABEL: func.func @chain_into_reduction(
// CHECK-SAME: %[[G:.*]]: tensor<1024xf32>, %[[E:.*]]: tensor<1024xf32>
func.func @chain_into_reduction(%g: tensor<1024xf32>, %e: tensor<1024xf32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1024xf32>
  // CHECK: %[[SUM:.*]] = linalg.generic
  // CHECK-SAME: iterator_types = ["reduction"]
  // CHECK-SAME: ins(%[[G]], %[[E]] : tensor<1024xf32>, tensor<1024xf32>)
  // CHECK: arith.addf
  // CHECK-NEXT: math.absf
  // CHECK-NEXT: arith.addf
  // CHECK-NOT: linalg.generic
  // CHECK: return %[[SUM]]
  %m = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%g, %e : tensor<1024xf32>, tensor<1024xf32>) outs(%empty : tensor<1024xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<1024xf32>
  %init0 = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%init0 : tensor<f32>) -> tensor<f32>
  %sum = linalg.reduce ins(%m : tensor<1024xf32>) outs(%init : tensor<f32>) dimensions = [0]
    (%x: f32, %acc: f32) {
      %a = math.absf %x : f32
      %s = arith.addf %acc, %a : f32
      linalg.yield %s : f32
    }
  return %sum : tensor<f32>
}

// -----

// A hook's linalg.map ops become one generic.
// CHECK-LABEL: func.func @maps(
func.func @maps(%x: tensor<64xi8>, %scale: f32) -> tensor<64xf32> {
  // CHECK: linalg.generic
  // CHECK: arith.sitofp
  // CHECK-NEXT: arith.mulf
  // CHECK-NEXT: arith.mulf
  // CHECK-NEXT: linalg.yield
  // CHECK-NOT: linalg.
  %e0 = tensor.empty() : tensor<64xf32>
  %f = linalg.map ins(%x : tensor<64xi8>) outs(%e0 : tensor<64xf32>)
    (%s: i8, %unused: f32) {
      %v = arith.sitofp %s : i8 to f32
      %w = arith.mulf %v, %scale : f32
      linalg.yield %w : f32
    }
  %e1 = tensor.empty() : tensor<64xf32>
  %g = linalg.map ins(%f : tensor<64xf32>) outs(%e1 : tensor<64xf32>)
    (%v: f32, %unused: f32) {
      %w = arith.mulf %v, %v : f32
      linalg.yield %w : f32
    }
  return %g : tensor<64xf32>
}

// -----

// Contractions stay whole (the runtime's BLAS computes them): the bias and
// ReLU that follow the matmul, and the scaling before it, stay apart from
// it, and a transposed matmul written as linalg.generic keeps its body.
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#tn_a = affine_map<(i, j, k) -> (k, i)>
#tn_b = affine_map<(i, j, k) -> (k, j)>
#mm_c = affine_map<(i, j, k) -> (i, j)>
// CHECK-LABEL: func.func @contractions(
func.func @contractions(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %d: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[SCALED:.*]] = linalg.generic
  // CHECK: arith.mulf
  %scaled = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.mulf %a, %two : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  // CHECK: %[[MM:.*]] = linalg.matmul ins(%[[SCALED]],
  %mm = linalg.matmul ins(%scaled, %w : tensor<4x8xf32>, tensor<8x8xf32>)
                      outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: linalg.generic
  // CHECK-SAME: ins(%[[MM]] : tensor<4x8xf32>)
  // CHECK: arith.maximumf
  %relu = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %r = arith.maximumf %a, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %e8 = tensor.empty() : tensor<8x8xf32>
  %z8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<8x8xf32>) -> tensor<8x8xf32>
  // The gradient's input d is scaled first: not folded into the contraction.
  // CHECK: %[[DS:.*]] = linalg.generic
  // CHECK: arith.mulf
  %ds = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%d : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.mulf %a, %two : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  // CHECK: linalg.generic
  // CHECK-SAME: ins(%[[RELU:.*]], %[[DS]] : tensor<4x8xf32>, tensor<4x8xf32>)
  // CHECK-NEXT: ^bb0(
  // CHECK-NEXT: arith.mulf
  // CHECK-NEXT: arith.addf
  // CHECK-NEXT: linalg.yield
  %gw = linalg.generic {indexing_maps = [#tn_a, #tn_b, #mm_c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%relu, %ds : tensor<4x8xf32>, tensor<4x8xf32>) outs(%z8 : tensor<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  return %relu, %gw : tensor<4x8xf32>, tensor<8x8xf32>
}

// -----

// A producer with two consumers is not computed twice.
#id = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @two_uses(
func.func @two_uses(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %e = tensor.empty() : tensor<16xf32>
  // CHECK-COUNT-3: linalg.generic
  // CHECK-NOT: linalg.generic
  %sq = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  %neg = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%sq : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.negf %a : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  %abs = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%sq : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = math.absf %a : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  return %neg, %abs : tensor<16xf32>, tensor<16xf32>
}

// -----

// A flattened bucket padded to whole channels: one concatenation that ends
// with the padding, so that the pieces are copied once.
// CHECK-LABEL: func.func @padded_bucket(
// CHECK-SAME: %[[A:.*]]: tensor<10xf32>, %[[B:.*]]: tensor<5xf32>
// CHECK: %[[TAIL:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<1xf32>) -> tensor<1xf32>
// CHECK: %[[PAD:.*]] = tensor.concat dim(0) %[[A]], %[[B]], %[[TAIL]] : (tensor<10xf32>, tensor<5xf32>, tensor<1xf32>) -> tensor<16xf32>
// CHECK-NOT: tensor.insert_slice
// CHECK: return %[[PAD]]
func.func @padded_bucket(%a: tensor<10xf32>, %b: tensor<5xf32>) -> tensor<16xf32> {
  %zero = arith.constant 0.0 : f32
  %flat = tensor.concat dim(0) %a, %b : (tensor<10xf32>, tensor<5xf32>) -> tensor<15xf32>
  %e = tensor.empty() : tensor<16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  %padded = tensor.insert_slice %flat into %z[0] [15] [1] : tensor<15xf32> into tensor<16xf32>
  return %padded : tensor<16xf32>
}
