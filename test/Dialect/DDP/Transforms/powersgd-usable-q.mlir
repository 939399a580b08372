// RUN: ddp-opt %s --insert-powersgd="rank=2 start-iter=0" | FileCheck %s
// RUN: ddp-opt %s --insert-powersgd="rank=2 start-iter=0" --ddp-lower-to-llvm \
// RUN:   | FileCheck %s --check-prefix=LLVM
// RUN: ddp-opt %s --insert-powersgd="rank=2 start-iter=0 warm-start=false" \
// RUN:   | FileCheck %s --check-prefix=COLD

// With warm start, Q is used only where it can be: a stored Q that is zero
// or not finite is drawn again (with this step's numbers), and a new Q is
// stored only if it is finite and not all zero, so one zero or NaN
// gradient never leaves a Q that stops the tensor for good.

// CHECK-LABEL: func.func @step
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[STEP:.*]], %{{.*}} : i64
// CHECK: scf.if %[[FIRST]] -> (tensor<32x2xf32>) {
// CHECK:   ddp.random_normal %[[STEP]] seed 0 stream 0 : tensor<32x2xf32>
// CHECK: } else {
// CHECK:   %[[Q:.*]] = ddp.state_load @ddp.q.step.0 : tensor<32x2xf32>
// CHECK:   %[[F:.*]], %[[NZ:.*]] = ddp.inspect %[[Q]] : tensor<32x2xf32>
// CHECK:   %[[OK:.*]] = arith.andi %[[F]], %[[NZ]] : i1
// CHECK:   %[[KEPT:.*]] = scf.if %[[OK]] -> (tensor<32x2xf32>) {
// CHECK-NEXT: scf.yield %[[Q]] : tensor<32x2xf32>
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[REDRAWN:.*]] = ddp.random_normal %[[STEP]] seed 0 stream 0 : tensor<32x2xf32>
// CHECK-NEXT: scf.yield %[[REDRAWN]]
// CHECK: %[[QMEAN:.*]] = ddp.allreduce mean %{{.*}} role compressed : tensor<32x2xf32>
// CHECK: ddp.state_store %{{.*}}, @ddp.error.step.0
// CHECK: %[[NF:.*]], %[[NNZ:.*]] = ddp.inspect %[[QMEAN]] : tensor<32x2xf32>
// CHECK: %[[STORE:.*]] = arith.andi %[[NF]], %[[NNZ]] : i1
// CHECK: scf.if %[[STORE]] {
// CHECK-NEXT: ddp.state_store %[[QMEAN]], @ddp.q.step.0 : tensor<32x2xf32>
// CHECK-NEXT: }

// Each inspect is one runtime call.
// LLVM-COUNT-2: llvm.call @ddprt_inspect(

// Without warm start nothing is stored or inspected.
// COLD-NOT: ddp.inspect

func.func @step(%g: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %r = ddp.allreduce mean %g : tensor<64x32xf32>
  return %r : tensor<64x32xf32>
}
