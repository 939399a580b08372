// With complete=true (the first step of ddp-lower-to-llvm) nothing of the
// shard dialect is left: what cannot become a ddp collective is an error at
// its location, with the reason, not a failure of the LLVM translation.
// RUN: ddp-opt %s --convert-shard-to-ddp=complete=true -split-input-file -verify-diagnostics | FileCheck %s
// RUN: ddp-opt %s --ddp-lower-to-llvm -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=LLVM

// Every grid goes, used or not.
// CHECK-NOT: shard.
// CHECK-LABEL: func.func @whole_grid(
// CHECK: ddp.allreduce mean
// CHECK-NOT: shard.
// LLVM-NOT: shard.
// LLVM: llvm.func @whole_grid(
// LLVM: llvm.call @ddprt_allreduce(
// LLVM-NOT: shard.
shard.grid @dp(shape = 2x1)
shard.grid @unused(shape = 4)
func.func @whole_grid(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = shard.all_reduce %x on @dp grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

shard.grid @grid2d(shape = 2x4)
func.func @part_of_the_grid(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{shard.all_reduce cannot become a ddp collective: it reduces over part of grid 'grid2d' (2x4) only (axis 0 is not reduced), and ddp's collectives span every rank}}
  %a = shard.all_reduce %x on @grid2d grid_axes = [1] : tensor<4xf32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

shard.grid @dp(shape = 4)
func.func @other_shard_ops(%x: tensor<4xf32>) -> (tensor<4xf32>, !shard.sharding) {
  %a = shard.all_reduce %x on @dp grid_axes = [0] reduction = average : tensor<4xf32> -> tensor<4xf32>
  // expected-error @+1 {{'shard.sharding' cannot be lowered by ddp: of the shard dialect only shard.all_reduce over every rank becomes a ddp collective; lower the others with upstream's shard passes first}}
  %s = shard.sharding @dp split_axes = [[0]] : !shard.sharding
  return %a, %s : tensor<4xf32>, !shard.sharding
}
