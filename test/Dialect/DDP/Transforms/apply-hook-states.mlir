// A hook's state is its bucket's own, whatever the module already holds:
// a taken name gets a suffix, and the bucket's load and store name the same
// state (they named two different ones, and error feedback read zeros
// every step). Applying a hook twice, to disjoint buckets, gives each
// bucket its own state. Every collective of a hook has the role
// `compressed`, whatever the hook wrote.
// RUN: ddp-opt %s --ddp-apply-hook="hook=h buckets=^a$" --ddp-apply-hook="hook=h2 buckets=^b$" | FileCheck %s

ddp.state @err : tensor<?xf32>
ddp.state @err.step.0 : tensor<2xf32>
func.func private @h(%g: tensor<?xf32>) -> tensor<?xf32> {
  %e = ddp.state_load @err : tensor<?xf32>
  %m = arith.addf %g, %e : tensor<?xf32>
  %r = ddp.allreduce mean %m role compressed : tensor<?xf32>
  %e2 = arith.subf %m, %r : tensor<?xf32>
  ddp.state_store %e2, @err : tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func private @h2(%g: tensor<?xf32>) -> tensor<?xf32> {
  %e = ddp.state_load @err : tensor<?xf32>
  %m = arith.addf %g, %e : tensor<?xf32>
  ddp.state_store %m, @err : tensor<?xf32>
  %r = ddp.allreduce mean %m : tensor<?xf32>
  return %r : tensor<?xf32>
}

// CHECK-DAG: ddp.state @err.step.0 : tensor<2xf32>
// CHECK-DAG: ddp.state @[[A:err\.step\.0_[0-9]+]] : tensor<4xf32>
// CHECK-DAG: ddp.state @[[B:err\.step\.0_[0-9]+]] : tensor<3xf32>
// CHECK-LABEL: func.func @step
func.func @step(%a: tensor<4xf32> loc("a"), %b: tensor<3xf32> loc("b")) -> (tensor<4xf32>, tensor<3xf32>) {
  // CHECK: ddp.state_load @[[A]] : tensor<4xf32>
  // CHECK: ddp.allreduce mean %{{.*}} role compressed : tensor<4xf32>
  // CHECK: ddp.state_store %{{.*}}, @[[A]] : tensor<4xf32>
  %x = ddp.allreduce mean %a : tensor<4xf32>
  // CHECK: ddp.state_load @[[B]] : tensor<3xf32>
  // CHECK: ddp.state_store %{{.*}}, @[[B]] : tensor<3xf32>
  // CHECK: ddp.allreduce mean %{{.*}} role compressed : tensor<3xf32>
  %y = ddp.allreduce mean %b : tensor<3xf32>
  return %x, %y : tensor<4xf32>, tensor<3xf32>
}
