// PyTorch's noop_hook: no communication, every rank keeps its gradients.
// The bucket is flattened for the report (a row that sends nothing) and
// folds away in the lowering.
// RUN: ddp-opt %s --insert-noop --ddp-compression-report 2>&1 | FileCheck %s
// RUN: ddp-opt %s --insert-noop --ddp-expand-buckets | FileCheck %s --check-prefix=EXPANDED
// RUN: ddp-opt %s --insert-noop | FileCheck %s --check-prefix=SUM

// CHECK: bucket of 2 [@step:%arg0,@step:%arg1] 12 f32 noop - - 12 0
// CHECK: bucket of 1 [@summed:%arg0] 4 f32 noop - - 4 0
// CHECK: total: 3 tensors, 3 compressed; elements 16 -> 0
// CHECK-LABEL: func.func @step
// CHECK: %[[F:.*]] = ddp.flatten %arg0, %arg1 scheme <"noop">
// CHECK: %[[U:.*]]:2 = ddp.unflatten %[[F]]
// CHECK-NOT: ddp.allreduce
// CHECK: return %[[U]]#0, %[[U]]#1

// Nothing is left but the count of what the bucket would have sent (the
// run's counters compare it with the nothing it sends).
// EXPANDED-LABEL: func.func @step
// EXPANDED-NEXT: ddp.count_uncompressed 12
// EXPANDED-NEXT: return %arg0, %arg1 : tensor<2x4xf32>, tensor<4xf32>
func.func @step(%w: tensor<2x4xf32>, %b: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>) {
  %r:2 = ddp.allreduce mean %w, %b : tensor<2x4xf32>, tensor<4xf32>
  return %r#0, %r#1 : tensor<2x4xf32>, tensor<4xf32>
}

// A sum allreduce: the rank's own gradient stands for the average, as in
// every bucket scheme, so the estimate of the sum is it times the world size.
// SUM-LABEL: func.func @summed
// SUM: %[[F:.*]] = ddp.flatten %arg0 scheme <"noop"> : tensor<4xf32> -> tensor<4xf32>
// SUM: %[[S:.*]] = ddp.scale %[[F]] by world_size : tensor<4xf32>
// SUM: %[[U:.*]] = ddp.unflatten %[[S]]
// SUM-NOT: ddp.allreduce
// SUM: return %[[U]]
func.func @summed(%g: tensor<4xf32>) -> tensor<4xf32> {
  %r = ddp.allreduce sum %g : tensor<4xf32>
  return %r : tensor<4xf32>
}
