// RUN: ddp-opt %s --ddp-apply-hook=hook=my_hook | FileCheck %s

// A hook written for any bucket size: inlined at each bucket with the
// bucket's static size, its state declared once per bucket, its collectives
// marked as a scheme's (role compressed), the hook and the template gone.
ddp.state @my.error : tensor<?xf32>
func.func private @my_hook(%g: tensor<?xf32>) -> tensor<?xf32> {
  %e = ddp.state_load @my.error : tensor<?xf32>
  %m = arith.addf %g, %e : tensor<?xf32>
  %h = ddp.cast %m : tensor<?xf32> to tensor<?xf16>
  %r = ddp.allreduce mean %h : tensor<?xf16>
  %back = ddp.cast %r : tensor<?xf16> to tensor<?xf32>
  %e2 = arith.subf %m, %back : tensor<?xf32>
  ddp.state_store %e2, @my.error : tensor<?xf32>
  return %back : tensor<?xf32>
}

// CHECK-NOT: @my_hook
// CHECK-NOT: ddp.state @my.error :
// CHECK-DAG: ddp.state @my.error.step.2 : tensor<8xf32>
// CHECK-DAG: ddp.state @my.error.step.1 : tensor<4xf32>
// CHECK-DAG: ddp.state @my.error.step.0 : tensor<15xf32>
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[W:.*]]: tensor<4x3xf32>, %[[B:.*]]: tensor<3xf32>, %[[V:.*]]: tensor<8xf32>, %[[D:.*]]: tensor<2xf64>)
func.func @step(%w: tensor<4x3xf32>, %b: tensor<3xf32>, %v: tensor<8xf32>, %d: tensor<2xf64>)
    -> (tensor<4x3xf32>, tensor<3xf32>, tensor<8xf32>, tensor<2xf64>) {
  // CHECK: %[[F0:.*]] = ddp.flatten %[[W]], %[[B]] scheme <"hook:my_hook"> : tensor<4x3xf32>, tensor<3xf32> -> tensor<15xf32>
  // CHECK: %[[E0:.*]] = ddp.state_load @my.error.step.0 : tensor<15xf32>
  // CHECK: %[[M0:.*]] = arith.addf %[[F0]], %[[E0]] : tensor<15xf32>
  // CHECK: %[[H0:.*]] = ddp.cast %[[M0]] : tensor<15xf32> to tensor<15xf16>
  // CHECK: %[[R0:.*]] = ddp.allreduce mean %[[H0]] role compressed : tensor<15xf16>
  // CHECK: %[[C0:.*]] = ddp.cast %[[R0]] : tensor<15xf16> to tensor<15xf32>
  // The state is never kept non-finite: reset to zeros, and reported by
  // this rank; the average is looked at too (the same on every rank).
  // CHECK: %[[FIN:.*]], %{{.*}} = ddp.inspect %[[E2:.*]] : tensor<15xf32>
  // CHECK: %[[SAFE:.*]] = arith.select %[[FIN]], %[[E2]], %{{.*}} : tensor<15xf32>
  // CHECK: ddp.state_store %[[SAFE]], @my.error.step.0 : tensor<15xf32>
  // CHECK: ddp.report_nonfinite %[[FIN]], "this rank's state @my.error.step.0 (hook:my_hook, bucket of @step:%arg0, @step:%arg1) was not finite (NaN or Inf) after the step: reset to zeros" this_rank_only
  // CHECK: %[[AVG:.*]], %{{.*}} = ddp.inspect %[[C0]] : tensor<15xf32>
  // CHECK: ddp.report_nonfinite %[[AVG]], "non-finite values (NaN or Inf) in the average of the bucket of @step:%arg0, @step:%arg1 (hook:my_hook): this step's output for them is not finite"{{$}}
  // CHECK: %[[U0:.*]]:2 = ddp.unflatten %[[C0]] : tensor<15xf32> -> tensor<4x3xf32>, tensor<3xf32>
  // f64 is its own bucket's element type: the hook casts it to f32 and back
  // (bf16_compress_wrapper's way).
  // CHECK: %[[FD:.*]] = ddp.flatten %[[D]], %[[D]] scheme <"hook:my_hook"> : tensor<2xf64>, tensor<2xf64> -> tensor<4xf64>
  // CHECK: %[[DN:.*]] = ddp.cast %[[FD]] : tensor<4xf64> to tensor<4xf32>
  // CHECK: ddp.state_load @my.error.step.1 : tensor<4xf32>
  // CHECK: %[[DR:.*]] = ddp.cast %{{.*}} : tensor<4xf32> to tensor<4xf64>
  // CHECK: ddp.unflatten %[[DR]] : tensor<4xf64> -> tensor<2xf64>, tensor<2xf64>
  %r:4 = ddp.allreduce mean %w, %b, %d, %d : tensor<4x3xf32>, tensor<3xf32>, tensor<2xf64>, tensor<2xf64>
  // A sum is the hook's mean times the world size.
  // CHECK: %[[FV:.*]] = ddp.flatten %[[V]] scheme <"hook:my_hook">
  // CHECK: ddp.state_load @my.error.step.2 : tensor<8xf32>
  // CHECK: %[[SV:.*]] = ddp.scale %{{.*}} by world_size : tensor<8xf32>
  // CHECK: ddp.unflatten %[[SV]] : tensor<8xf32> -> tensor<8xf32>
  %s = ddp.allreduce sum %v : tensor<8xf32>
  return %r#0, %r#1, %s, %r#2 : tensor<4x3xf32>, tensor<3xf32>, tensor<8xf32>, tensor<2xf64>
}

