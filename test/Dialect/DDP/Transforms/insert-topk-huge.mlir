// A bucket that i32 cannot index sends i64 indices.
// RUN: ddp-opt %s --insert-topk=ratio=1e-6 | FileCheck %s
// CHECK: ddp.top_k %{{.*}} : tensor<3000000000xf32> -> tensor<3000xf32>, tensor<3000xi64>
// CHECK: ddp.allgather %{{.*}}, %{{.*}} : tensor<3000xf32>, tensor<3000xi64>
func.func @step(%g: tensor<3000000000xf32>) -> tensor<3000000000xf32> {
  %r = ddp.allreduce mean %g : tensor<3000000000xf32>
  return %r : tensor<3000000000xf32>
}
