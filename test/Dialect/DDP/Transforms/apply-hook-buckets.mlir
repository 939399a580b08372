// Which buckets a hook takes: buckets=REGEX over the gradients' names, and
// a hook of a fixed size takes only buckets of that size (a remark for the
// others). A bucket left alone stays a plain allreduce.
// RUN: ddp-opt %s --ddp-apply-hook="hook=h8 buckets=^fc1\." 2>&1 | FileCheck %s

func.func private @h8(%g: tensor<8xf32>) -> tensor<8xf32> {
  %r = ddp.allreduce mean %g : tensor<8xf32>
  return %r : tensor<8xf32>
}

// CHECK: remark: ddp-apply-hook leaves a bucket of 1 tensor(s) of 'f32' (fc1.bias) as a plain allreduce: the hook takes 8 elements and the bucket has 4
// CHECK-LABEL: func.func @step
func.func @step(%w: tensor<2x4xf32> loc("fc1.weight"), %b: tensor<4xf32> loc("fc1.bias"),
                %v: tensor<8xf32> loc("fc2.weight")) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<8xf32>) {
  // CHECK: %[[F:.*]] = ddp.flatten %{{.*}} scheme <"hook:h8"> : tensor<2x4xf32> -> tensor<8xf32>
  // CHECK: %[[R:.*]] = ddp.allreduce mean %[[F]] role compressed : tensor<8xf32>
  // CHECK: ddp.unflatten %[[R]] : tensor<8xf32> -> tensor<2x4xf32>
  %w2 = ddp.allreduce mean %w : tensor<2x4xf32>
  // CHECK: ddp.allreduce mean %{{.*}} : tensor<4xf32>
  %b2 = ddp.allreduce mean %b : tensor<4xf32>
  // fc2 does not match: as it was.
  // CHECK: ddp.allreduce mean %{{.*}} : tensor<8xf32>
  %v2 = ddp.allreduce mean %v : tensor<8xf32>
  return %w2, %b2, %v2 : tensor<2x4xf32>, tensor<4xf32>, tensor<8xf32>
}

// A pattern that matches nothing changes nothing, with a warning.
// RUN: ddp-opt %s --ddp-apply-hook="hook=h8 buckets=^fc3" 2>&1 | FileCheck %s --check-prefix=NONE
// NONE: warning: ddp-apply-hook: buckets='^fc3' matches no gradient's name: no bucket was compressed
