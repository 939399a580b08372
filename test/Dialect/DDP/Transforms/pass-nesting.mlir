// The passes that touch only function bodies run per function (so a pass
// manager runs them in parallel over a module's functions), and each does
// one thing: ddp-bucketize buckets ddp.allreduce and nothing else.
// RUN: ddp-opt %s -p 'builtin.module(convert-shard-to-ddp,func.func(ddp-bucketize,insert-fp16-compression,ddp-fuse-kernels))' | FileCheck %s
// RUN: ddp-opt %s --ddp-bucketize | FileCheck %s --check-prefix=ONLY
// A function pass cannot be scheduled on the module directly.
// RUN: not ddp-opt %s -p 'builtin.module(ddp-bucketize)' 2>&1 | FileCheck %s --check-prefix=NEST
// NEST: Can't add pass 'DDPBucketize' restricted to 'func.func' on a PassManager intended to run on 'builtin.module', did you intend to nest?

shard.grid @dp(shape = 4)

// CHECK-LABEL: func.func @first(
// CHECK: %[[H:.*]]:2 = ddp.cast %{{.*}}, %{{.*}} scaled by inverse_world_size scheme <"fp16"> : tensor<4xf32>, tensor<8xf32> to tensor<4xf16>, tensor<8xf16>
// CHECK: ddp.allreduce sum %[[H]]#0, %[[H]]#1 : tensor<4xf16>, tensor<8xf16>
// ONLY-LABEL: func.func @first(
// ONLY: ddp.allreduce mean %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<8xf32>
func.func @first(%a: tensor<8xf32>, %b: tensor<4xf32>) -> (tensor<8xf32>, tensor<4xf32>) {
  %0 = ddp.allreduce mean %a : tensor<8xf32>
  %1 = ddp.allreduce mean %b : tensor<4xf32>
  return %0, %1 : tensor<8xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @second(
// CHECK: ddp.allreduce sum %{{.*}}, %{{.*}} : tensor<2xf16>, tensor<16xf16>
// ONLY-LABEL: func.func @second(
// ONLY: shard.all_reduce
// ONLY: shard.all_reduce
// ONLY-NOT: ddp.allreduce
func.func @second(%a: tensor<16xf32>, %b: tensor<2xf32>) -> (tensor<16xf32>, tensor<2xf32>) {
  %0 = shard.all_reduce %a on @dp grid_axes = [0] reduction = average : tensor<16xf32> -> tensor<16xf32>
  %1 = shard.all_reduce %b on @dp grid_axes = [0] reduction = average : tensor<2xf32> -> tensor<2xf32>
  return %0, %1 : tensor<16xf32>, tensor<2xf32>
}
