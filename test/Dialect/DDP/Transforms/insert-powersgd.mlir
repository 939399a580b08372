// RUN: ddp-opt %s --insert-powersgd=rank=2 | FileCheck %s
// Running the pass again changes nothing: every allreduce it emits has a role.
// RUN: ddp-opt %s --insert-powersgd=rank=2 --insert-powersgd=rank=2 | FileCheck %s --check-prefix=TWICE

// One step counter per function; one Q and one residual per compressed tensor.
// CHECK-DAG: ddp.state @ddp.step.mlp : i64
// CHECK-DAG: ddp.state @ddp.q.mlp.0 : tensor<32x2xf32>
// CHECK-DAG: ddp.state @ddp.q.mlp.1 : tensor<72x2xf32>
// CHECK-DAG: ddp.state @ddp.error.mlp.0 : tensor<64x32xf32>
// CHECK-DAG: ddp.state @ddp.error.mlp.1 : tensor<16x72xf32>
// TWICE-COUNT-11: ddp.state @
// TWICE-NOT: ddp.state @

// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %[[W:[^:]*]]: tensor<64x32xf32>, %[[B:[^:]*]]: tensor<64xf32>, %[[C:[^:]*]]: tensor<16x8x3x3xf32>
func.func @mlp(%w: tensor<64x32xf32>, %b: tensor<64xf32>, %c: tensor<16x8x3x3xf32>)
    -> (tensor<64x32xf32>, tensor<64xf32>, tensor<16x8x3x3xf32>) {
  // The counter is read once and advanced at entry.
  // CHECK: %[[STEP:.*]] = ddp.state_load @ddp.step.mlp : i64
  // CHECK: %[[NEXT:.*]] = arith.addi %[[STEP]], %{{.*}} : i64
  // CHECK: ddp.state_store %[[NEXT]], @ddp.step.mlp : i64
  // Before start-iter (default 1000): the plain mean of the whole bucket.
  // CHECK: %[[WARM:.*]] = arith.cmpi slt, %[[STEP]], %{{.*}} : i64
  // CHECK: %[[OUT:.*]]:3 = scf.if %[[WARM]]
  // CHECK:   %[[PLAIN:.*]]:3 = ddp.allreduce mean %[[W]], %[[B]], %[[C]] role warmup
  // CHECK:   scf.yield %[[PLAIN]]#0, %[[PLAIN]]#1, %[[PLAIN]]#2
  // CHECK: } else {
  // The bias (64 x 1: 64 <= 65 * 1 * 2) is uncompressed; its allreduce starts
  // before any compression compute.
  // CHECK:   %[[REQ:.*]] = ddp.allreduce_start mean %[[B]] role uncompressed : tensor<64xf32>
  // A conv weight is viewed as out x in*kh*kw.
  // CHECK:   %[[CM:.*]] = tensor.collapse_shape %[[C]] {{\[}}[0], [1, 2, 3]] : tensor<16x8x3x3xf32> into tensor<16x72xf32>
  // Q is random on the first compressed step, else last step's.
  // CHECK:   %[[FIRST:.*]] = arith.cmpi eq, %[[STEP]], %{{.*}} : i64
  // CHECK:   %[[Q0:.*]]:2 = scf.if %[[FIRST]]
  // CHECK:     ddp.random_normal %[[STEP]] seed 0 stream 0 : tensor<32x2xf32>
  // CHECK:     ddp.random_normal %[[STEP]] seed 0 stream 1 : tensor<72x2xf32>
  // CHECK:   } else {
  // CHECK:     ddp.state_load @ddp.q.mlp.0 : tensor<32x2xf32>
  // CHECK:     ddp.state_load @ddp.q.mlp.1 : tensor<72x2xf32>
  // CHECK:   }
  // CHECK:   %[[QA:.*]] = ddp.orthogonalize %[[Q0]]#0 : tensor<32x2xf32>
  // CHECK:   %[[QB:.*]] = ddp.orthogonalize %[[Q0]]#1 : tensor<72x2xf32>
  // CHECK:   %[[EA:.*]] = ddp.state_load @ddp.error.mlp.0
  // CHECK:   %[[MA:.*]] = ddp.add_residual %[[W]] plus %[[EA]] : tensor<64x32xf32>
  // CHECK:   %[[EB:.*]] = ddp.state_load @ddp.error.mlp.1
  // CHECK:   %[[MB:.*]] = ddp.add_residual %[[CM]] plus %[[EB]] : tensor<16x72xf32>
  // CHECK:   %[[PA:.*]] = ddp.project %[[MA]] times %[[QA]] scheme <"powersgd"> :
  // CHECK:   %[[PB:.*]] = ddp.project %[[MB]] times %[[QB]] scheme <"powersgd"> :
  // All P's in one allreduce, summed.
  // CHECK:   %[[PS:.*]]:2 = ddp.allreduce sum %[[PA]], %[[PB]] role compressed : tensor<64x2xf32>, tensor<16x2xf32>
  // CHECK:   %[[POA:.*]] = ddp.orthogonalize %[[PS]]#0
  // CHECK:   %[[POB:.*]] = ddp.orthogonalize %[[PS]]#1
  // CHECK:   %[[NQA:.*]] = ddp.backproject %[[MA]] times %[[POA]] scheme <"powersgd"> : tensor<64x32xf32> times tensor<64x2xf32>
  // CHECK:   %[[NQB:.*]] = ddp.backproject %[[MB]] times %[[POB]] scheme <"powersgd"> : tensor<16x72xf32> times tensor<16x2xf32>
  // All Q's in one allreduce, averaged.
  // CHECK:   %[[QS:.*]]:2 = ddp.allreduce mean %[[NQA]], %[[NQB]] role compressed : tensor<32x2xf32>, tensor<72x2xf32>
  // CHECK:   %[[RA:.*]] = ddp.reconstruct %[[POA]] times %[[QS]]#0
  // CHECK:   %[[RB:.*]] = ddp.reconstruct %[[POB]] times %[[QS]]#1
  // CHECK:   %[[NEA:.*]] = ddp.update_residual %[[MA]] minus %[[RA]]
  // CHECK:   %[[NEB:.*]] = ddp.update_residual %[[MB]] minus %[[RB]]
  // CHECK:   ddp.state_store %[[NEA]], @ddp.error.mlp.0
  // CHECK:   ddp.state_store %[[NEB]], @ddp.error.mlp.1
  // CHECK:   ddp.state_store %[[QS]]#0, @ddp.q.mlp.0
  // CHECK:   ddp.state_store %[[QS]]#1, @ddp.q.mlp.1
  // CHECK:   %[[RC:.*]] = tensor.expand_shape %[[RB]] {{\[}}[0], [1, 2, 3]] output_shape [16, 8, 3, 3]
  // CHECK:   %[[U:.*]] = ddp.wait %[[REQ]] : !ddp.request<tensor<64xf32>>
  // CHECK:   scf.yield %[[RA]], %[[U]], %[[RC]]
  // CHECK: return %[[OUT]]#0, %[[OUT]]#1, %[[OUT]]#2
  // One bucket, as written (bucketing is ddp-bucketize's; bucketize.mlir).
  %r:3 = ddp.allreduce mean %w, %b, %c : tensor<64x32xf32>, tensor<64xf32>, tensor<16x8x3x3xf32>
  return %r#0, %r#1, %r#2 : tensor<64x32xf32>, tensor<64xf32>, tensor<16x8x3x3xf32>
}

// Other ops are left as they are, and a bucket where nothing is worth
// compressing stays one plain averaged allreduce.
// CHECK-LABEL: func.func @nothing_to_compress(
// CHECK-NOT: ddp.state_load
// CHECK: %[[SUM:.*]] = linalg.add
// CHECK: ddp.allreduce mean %{{.*}}, %[[SUM]] role uncompressed : tensor<8xf32>, tensor<8x8xf32>
// CHECK-NOT: scf.if
// CHECK: return
func.func @nothing_to_compress(%a: tensor<8x8xf32>, %b: tensor<8xf32>) -> (tensor<8x8xf32>, tensor<8xf32>) {
  %init = tensor.empty() : tensor<8x8xf32>
  %s = linalg.add ins(%a, %a : tensor<8x8xf32>, tensor<8x8xf32>) outs(%init : tensor<8x8xf32>) -> tensor<8x8xf32>
  %0 = ddp.allreduce mean %s : tensor<8x8xf32>
  %1 = ddp.allreduce mean %b : tensor<8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8xf32>
}

// A sum keeps its meaning: PowerSGD estimates the mean, scaled back by W;
// the uncompressed part is summed.
// CHECK-LABEL: func.func @sum_of_gradients(
// CHECK: ddp.allreduce_start sum %{{.*}} role uncompressed : tensor<64xf32>
// CHECK: %[[R:.*]] = ddp.reconstruct
// CHECK: %[[S:.*]] = ddp.scale %[[R]] by world_size : tensor<64x32xf32>
// CHECK: scf.yield %[[S]]
func.func @sum_of_gradients(%w: tensor<64x32xf32>, %b: tensor<64xf32>) -> (tensor<64x32xf32>, tensor<64xf32>) {
  %0:2 = ddp.allreduce sum %w, %b : tensor<64x32xf32>, tensor<64xf32>
  return %0#0, %0#1 : tensor<64x32xf32>, tensor<64xf32>
}

// Allreduces nested in regions are compressed where they are, with the
// function's step counter.
// CHECK-LABEL: func.func @in_a_loop(
// CHECK: %[[STEP:.*]] = ddp.state_load @ddp.step.in_a_loop
// CHECK: scf.for
// CHECK:   arith.cmpi slt, %[[STEP]]
// CHECK:   ddp.allreduce sum %{{.*}} role compressed
// CHECK:   scf.yield
func.func @in_a_loop(%w: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %w) -> tensor<64x32xf32> {
    %0 = ddp.allreduce mean %acc : tensor<64x32xf32>
    scf.yield %0 : tensor<64x32xf32>
  }
  return %r : tensor<64x32xf32>
}
