// RUN: ddp-opt %s --convert-shard-to-ddp -split-input-file -verify-diagnostics | FileCheck %s

// The grid goes with the all_reduces that used it: the LLVM translation has
// no shard ops. The function keeps its size: hosts refuse a job of another.
// CHECK-NOT: shard.grid
shard.grid @dp(shape = 4)

// CHECK-LABEL: func.func @whole_grid(
// CHECK-SAME: %[[X:[^:]*]]: tensor<64x32xf32>, %[[Y:[^:]*]]: tensor<8xf64>
// CHECK-SAME: attributes {ddp.world_size = 4 : i64}
// CHECK: %[[A:.*]] = ddp.allreduce mean %[[X]] : tensor<64x32xf32>
// CHECK: %[[S:.*]] = ddp.allreduce sum %[[Y]] : tensor<8xf64>
// CHECK: return %[[A]], %[[S]]
func.func @whole_grid(%x: tensor<64x32xf32>, %y: tensor<8xf64>) -> (tensor<64x32xf32>, tensor<8xf64>) {
  %a = shard.all_reduce %x on @dp grid_axes = [0] reduction = average : tensor<64x32xf32> -> tensor<64x32xf32>
  %s = shard.all_reduce %y on @dp grid_axes = [0] : tensor<8xf64> -> tensor<8xf64>
  return %a, %s : tensor<64x32xf32>, tensor<8xf64>
}

// -----

// Axes of size 1 do not split the world. A grid nothing used stays (only
// complete=true erases it).
// CHECK-NOT: shard.grid @grid2d
// CHECK: shard.grid @unused
// CHECK-NOT: shard.grid
shard.grid @grid2d(shape = 4x1)
shard.grid @unused(shape = 4)

// CHECK-LABEL: func.func @unit_axis(
// CHECK: ddp.allreduce sum
func.func @unit_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = shard.all_reduce %x on @grid2d grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// The grid stays while anything uses it.
// CHECK: shard.grid @grid2d
shard.grid @grid2d(shape = 2x4)

// What is not a whole-world gradient sum or average stays, with a remark.
// CHECK-LABEL: func.func @left_alone(
// CHECK-COUNT-5: shard.all_reduce
// CHECK-NOT: ddp.allreduce
func.func @left_alone(%x: tensor<4xf32>, %m: memref<4xf32>, %i: tensor<4xi32>, %h: tensor<4xf8E4M3FN>) -> (tensor<4xf32>, tensor<4xf64>, memref<4xf32>, tensor<4xi32>, tensor<4xf8E4M3FN>) {
  // expected-remark @+1 {{shard.all_reduce left unchanged: reduction 'max' is not a gradient sum or average}}
  %b = shard.all_reduce %x on @grid2d grid_axes = [0, 1] reduction = max : tensor<4xf32> -> tensor<4xf32>
  // expected-remark @+1 {{shard.all_reduce left unchanged: the result type differs from the input type}}
  %c = shard.all_reduce %x on @grid2d grid_axes = [0, 1] : tensor<4xf32> -> tensor<4xf64>
  // expected-remark @+1 {{shard.all_reduce left unchanged: only ranked tensors are handled (memrefs are left as they are)}}
  %d = shard.all_reduce %m on @grid2d grid_axes = [0, 1] : memref<4xf32> -> memref<4xf32>
  // The element types are the runtime's (ddprt.h's list): no integers, no f8.
  // expected-remark @+1 {{shard.all_reduce left unchanged: the runtime does not communicate i32 (it takes f32, f16, bf16 or f64)}}
  %e = shard.all_reduce %i on @grid2d grid_axes = [0, 1] : tensor<4xi32> -> tensor<4xi32>
  // expected-remark @+1 {{shard.all_reduce left unchanged: the runtime does not communicate f8E4M3FN (it takes f32, f16, bf16 or f64)}}
  %f = shard.all_reduce %h on @grid2d grid_axes = [0, 1] : tensor<4xf8E4M3FN> -> tensor<4xf8E4M3FN>
  return %b, %c, %d, %e, %f : tensor<4xf32>, tensor<4xf64>, memref<4xf32>, tensor<4xi32>, tensor<4xf8E4M3FN>
}

// -----

// A gradient sum or average over part of the grid (the data-parallel axis
// of a data x tensor-parallel grid) would stay uncompressed, and run as
// something else than the user wrote: refused.
shard.grid @grid2d(shape = 2x4)
func.func @part_of_the_grid(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{shard.all_reduce cannot become a ddp collective: it reduces over part of grid 'grid2d' (2x4) only (axis 1 is not reduced), and ddp's collectives span every rank: a data-parallel axis of a larger grid (data x tensor parallel) is not supported; reduce over every axis of a grid of the data-parallel ranks alone}}
  %a = shard.all_reduce %x on @grid2d grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// One job has one size: two grids of different sizes in one function are
// refused.
shard.grid @four(shape = 4)
shard.grid @two(shape = 2)
func.func @two_sizes(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = shard.all_reduce %x on @four grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  // expected-error @+1 {{shard.all_reduce over the 2 devices of grid 'two', but @two_sizes already reduces over 4: ddp's collectives span every rank of one job}}
  %b = shard.all_reduce %y on @two grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// A grid is kept while an op it does not convert still uses it.
// CHECK: shard.grid @dp
shard.grid @dp(shape = 4)

// CHECK-LABEL: func.func @sharding_user(
// CHECK: ddp.allreduce mean
// CHECK: shard.sharding @dp
func.func @sharding_user(%x: tensor<4xf32>) -> (tensor<4xf32>, !shard.sharding) {
  %a = shard.all_reduce %x on @dp grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  %s = shard.sharding @dp split_axes = [[0]] : !shard.sharding
  return %a, %s : tensor<4xf32>, !shard.sharding
}
