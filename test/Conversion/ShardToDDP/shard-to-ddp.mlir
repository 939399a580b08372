// RUN: ddp-opt %s --convert-shard-to-ddp -split-input-file -verify-diagnostics | FileCheck %s

shard.grid @dp(shape = 4)

// CHECK-LABEL: func.func @whole_grid(
// CHECK-SAME: %[[X:[^:]*]]: tensor<64x32xf32>, %[[Y:[^:]*]]: tensor<8xi32>
// CHECK: %[[A:.*]] = ddp.allreduce mean %[[X]] : tensor<64x32xf32>
// CHECK: %[[S:.*]] = ddp.allreduce sum %[[Y]] : tensor<8xi32>
// CHECK: return %[[A]], %[[S]]
func.func @whole_grid(%x: tensor<64x32xf32>, %y: tensor<8xi32>) -> (tensor<64x32xf32>, tensor<8xi32>) {
  %a = shard.all_reduce %x on @dp grid_axes = [0] reduction = average : tensor<64x32xf32> -> tensor<64x32xf32>
  %s = shard.all_reduce %y on @dp grid_axes = [0] : tensor<8xi32> -> tensor<8xi32>
  return %a, %s : tensor<64x32xf32>, tensor<8xi32>
}

// -----

// Axes of size 1 do not split the world.
shard.grid @grid2d(shape = 4x1)

// CHECK-LABEL: func.func @unit_axis(
// CHECK: ddp.allreduce sum
func.func @unit_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = shard.all_reduce %x on @grid2d grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

shard.grid @grid2d(shape = 2x4)

// What is not a whole-world gradient sum or average stays, with a remark.
// CHECK-LABEL: func.func @left_alone(
// CHECK-COUNT-5: shard.all_reduce
// CHECK-NOT: ddp.allreduce
func.func @left_alone(%x: tensor<4xf32>, %m: memref<4xf32>, %i: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf64>, memref<4xf32>, tensor<4xi32>) {
  // expected-remark @+1 {{shard.all_reduce left unchanged: it reduces over part of grid 'grid2d' only (axis 0 is not reduced), not over all ranks}}
  %a = shard.all_reduce %x on @grid2d grid_axes = [1] : tensor<4xf32> -> tensor<4xf32>
  // expected-remark @+1 {{shard.all_reduce left unchanged: reduction 'max' is not a gradient sum or average}}
  %b = shard.all_reduce %x on @grid2d grid_axes = [0, 1] reduction = max : tensor<4xf32> -> tensor<4xf32>
  // expected-remark @+1 {{shard.all_reduce left unchanged: the result type differs from the input type}}
  %c = shard.all_reduce %x on @grid2d grid_axes = [0, 1] : tensor<4xf32> -> tensor<4xf64>
  // expected-remark @+1 {{shard.all_reduce left unchanged: only ranked tensors are handled (memrefs are left as they are)}}
  %d = shard.all_reduce %m on @grid2d grid_axes = [0, 1] : memref<4xf32> -> memref<4xf32>
  // expected-remark @+1 {{shard.all_reduce left unchanged: an average of integers is not a gradient average}}
  %e = shard.all_reduce %i on @grid2d grid_axes = [0, 1] reduction = average : tensor<4xi32> -> tensor<4xi32>
  return %a, %b, %c, %d, %e : tensor<4xf32>, tensor<4xf32>, tensor<4xf64>, memref<4xf32>, tensor<4xi32>
}
