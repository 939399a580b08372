// RUN: ddp-opt %s -split-input-file --ddp-matmuls-to-runtime | FileCheck %s

// C += A B on buffers: one call, on the operands as they are.
// CHECK-LABEL: func.func private @ddprt_step_matmul_f32(memref<*xf32>, memref<*xf32>, memref<*xf32>)
// CHECK-LABEL: func.func @matmul(
// CHECK-SAME: %[[A:.*]]: memref<4x8xf32>, %[[B:.*]]: memref<8x16xf32>, %[[C:.*]]: memref<4x16xf32>
func.func @matmul(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  // CHECK-NEXT: %[[UA:.*]] = memref.cast %[[A]] : memref<4x8xf32> to memref<*xf32>
  // CHECK-NEXT: %[[UB:.*]] = memref.cast %[[B]] : memref<8x16xf32> to memref<*xf32>
  // CHECK-NEXT: %[[UC:.*]] = memref.cast %[[C]] : memref<4x16xf32> to memref<*xf32>
  // CHECK-NEXT: call @ddprt_step_matmul_f32(%[[UA]], %[[UB]], %[[UC]])
  // CHECK-NEXT: return
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// -----

// The transposed forms a backward pass writes as linalg.generic: A^T B and
// A B^T. The operand read the other way around is viewed through
// memref.transpose, so that the runtime sees M x K, K x N and M x N.
#tn_a = affine_map<(i, j, k) -> (k, i)>
#tn_b = affine_map<(i, j, k) -> (k, j)>
#nt_a = affine_map<(i, j, k) -> (i, k)>
#nt_b = affine_map<(i, j, k) -> (j, k)>
#mm_c = affine_map<(i, j, k) -> (i, j)>
// CHECK-LABEL: func.func @transposed(
// CHECK-SAME: %[[X:.*]]: memref<4x8xf32>, %[[D:.*]]: memref<4x16xf32>, %[[GW:.*]]: memref<8x16xf32>, %[[W:.*]]: memref<8x16xf32>, %[[GX:.*]]: memref<4x8xf32>
func.func @transposed(%x: memref<4x8xf32>, %d: memref<4x16xf32>, %gw: memref<8x16xf32>,
                      %w: memref<8x16xf32>, %gx: memref<4x8xf32>) {
  // CHECK: %[[XT:.*]] = memref.transpose %[[X]] (d0, d1) -> (d1, d0) : memref<4x8xf32> to memref<8x4xf32, strided<[1, 8]>>
  // CHECK-NEXT: memref.cast %[[XT]]
  // CHECK-NEXT: memref.cast %[[D]]
  // CHECK-NEXT: memref.cast %[[GW]]
  // CHECK-NEXT: call @ddprt_step_matmul_f32(
  linalg.generic {indexing_maps = [#tn_a, #tn_b, #mm_c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %d : memref<4x8xf32>, memref<4x16xf32>) outs(%gw : memref<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  // CHECK: memref.cast %[[D]]
  // CHECK-NEXT: %[[WT:.*]] = memref.transpose %[[W]] (d0, d1) -> (d1, d0) : memref<8x16xf32> to memref<16x8xf32, strided<[1, 16]>>
  // CHECK-NEXT: memref.cast %[[WT]]
  // CHECK-NEXT: memref.cast %[[GX]]
  // CHECK-NEXT: call @ddprt_step_matmul_f32(
  // CHECK-NOT: linalg.
  linalg.generic {indexing_maps = [#nt_a, #nt_b, #mm_c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%d, %w : memref<4x16xf32>, memref<8x16xf32>) outs(%gx : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A batch of matmuls, and a strided output view (a slice): passed as they
// are; the runtime copies what BLAS cannot read.
// CHECK-LABEL: func.func @batch(
func.func @batch(%a: memref<3x4x8xf32>, %b: memref<3x8x16xf32>, %c: memref<3x4x32xf32>) {
  %slice = memref.subview %c[0, 0, 0] [3, 4, 16] [1, 1, 2] : memref<3x4x32xf32> to memref<3x4x16xf32, strided<[128, 32, 2]>>
  // CHECK: call @ddprt_step_matmul_f32(
  // CHECK-NOT: linalg.
  linalg.batch_matmul ins(%a, %b : memref<3x4x8xf32>, memref<3x8x16xf32>)
                      outs(%slice : memref<3x4x16xf32, strided<[128, 32, 2]>>)
  return
}

// -----

// Left to the loops: element types other than f32, tensors (before
// bufferization), bodies that are no product-sum (a maximum; a negated
// factor, which BLAS would drop), and contractions over two K dimensions.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT: call
// CHECK: linalg.matmul ins(%{{.*}} : memref<4x8xf64>
// CHECK: linalg.matmul ins(%{{.*}} : tensor<4x8xf32>
// CHECK: linalg.generic
// CHECK: arith.maximumf
// CHECK: linalg.generic
// CHECK: arith.negf
// CHECK: linalg.generic
// CHECK-SAME: "reduction", "reduction"
#a2 = affine_map<(i, j, k, l) -> (i, k, l)>
#b2 = affine_map<(i, j, k, l) -> (k, l, j)>
#c2 = affine_map<(i, j, k, l) -> (i, j)>
#mm_a = affine_map<(i, j, k) -> (i, k)>
#mm_b = affine_map<(i, j, k) -> (k, j)>
#mm_c = affine_map<(i, j, k) -> (i, j)>
func.func @left_alone(%a: memref<4x8xf64>, %b: memref<8x16xf64>, %c: memref<4x16xf64>,
                      %ta: tensor<4x8xf32>, %tb: tensor<8x16xf32>, %tc: tensor<4x16xf32>,
                      %fa: memref<4x8xf32>, %fb: memref<8x16xf32>, %fc: memref<4x16xf32>,
                      %ka: memref<4x2x4xf32>, %kb: memref<2x4x16xf32>) -> tensor<4x16xf32> {
  linalg.matmul ins(%a, %b : memref<4x8xf64>, memref<8x16xf64>) outs(%c : memref<4x16xf64>)
  %t = linalg.matmul ins(%ta, %tb : tensor<4x8xf32>, tensor<8x16xf32>) outs(%tc : tensor<4x16xf32>) -> tensor<4x16xf32>
  linalg.generic {indexing_maps = [#mm_a, #mm_b, #mm_c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%fa, %fb : memref<4x8xf32>, memref<8x16xf32>) outs(%fc : memref<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.maximumf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#mm_a, #mm_b, #mm_c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%fa, %fb : memref<4x8xf32>, memref<8x16xf32>) outs(%fc : memref<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %n = arith.negf %x : f32
    %m = arith.mulf %n, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#a2, #b2, #c2], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%ka, %kb : memref<4x2x4xf32>, memref<2x4x16xf32>) outs(%fc : memref<4x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return %t : tensor<4x16xf32>
}

// -----

// A batch whose operands put the batch elsewhere: A indexed (k, b, m) is
// viewed as (b, m, k) through one permutation, C indexed (m, b, n) as
// (b, m, n).
#ba = affine_map<(b, m, n, k) -> (k, b, m)>
#bb = affine_map<(b, m, n, k) -> (b, k, n)>
#bc = affine_map<(b, m, n, k) -> (m, b, n)>
// CHECK-LABEL: func.func @batch_permuted(
// CHECK-SAME: %[[A:.*]]: memref<8x3x4xf32>, %[[B:.*]]: memref<3x8x16xf32>, %[[C:.*]]: memref<4x3x16xf32>
// CHECK: memref.transpose %[[A]] (d0, d1, d2) -> (d1, d2, d0) : memref<8x3x4xf32> to memref<3x4x8xf32, strided<[4, 1, 12]>>
// CHECK: memref.cast %[[B]]
// CHECK: memref.transpose %[[C]] (d0, d1, d2) -> (d1, d0, d2) : memref<4x3x16xf32> to memref<3x4x16xf32, strided<[16, 48, 1]>>
// CHECK: call @ddprt_step_matmul_f32(
func.func @batch_permuted(%a: memref<8x3x4xf32>, %b: memref<3x8x16xf32>, %c: memref<4x3x16xf32>) {
  linalg.generic {indexing_maps = [#ba, #bb, #bc], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x3x4xf32>, memref<3x8x16xf32>) outs(%c : memref<4x3x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
