// States are named after the gradients; a name two compressed gradients
// share (also after replacing what a symbol cannot hold: fc/w is fc_w)
// gets ".1" for the second (in bucket order: DDP's reverse parameter
// order), the same for its Q and its error, and a warning: those two are
// told apart by order only.
// RUN: ddp-opt %s --insert-powersgd=rank=2 2>&1 | FileCheck %s
// CHECK: warning: loc("fc/w"): insert-powersgd: another compressed gradient is also named 'fc_w' {{.*}}: its states are ddp.q.fc_w.1 and ddp.error.fc_w.1, told apart by order only
// CHECK: warning: loc("w"): insert-powersgd: another compressed gradient is also named 'w' {{.*}}: its states are ddp.q.w.1 and ddp.error.w.1, told apart by order only
// CHECK-DAG: ddp.state @ddp.q.w : tensor<32x2xf32>
// CHECK-DAG: ddp.state @ddp.q.w.1 : tensor<32x2xf32>
// CHECK-DAG: ddp.state @ddp.error.w.1 : tensor<64x32xf32>
// CHECK-DAG: ddp.state @ddp.q.fc_w : tensor<32x2xf32>
// CHECK-DAG: ddp.state @ddp.error.fc_w.1 : tensor<64x32xf32>
// No states, no warnings.
// RUN: ddp-opt %s --insert-powersgd="rank=2 warm-start=false error-feedback=false" 2>&1 | FileCheck %s --check-prefix=NOSTATE
// NOSTATE-NOT: warning
// NOSTATE-NOT: ddp.state @ddp.q
func.func @step(%a: tensor<64x32xf32> loc("w"), %b: tensor<64x32xf32> loc("w"), %c: tensor<64x32xf32> loc("fc/w"), %d: tensor<64x32xf32> loc("fc_w")) -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>) {
  %0 = ddp.allreduce mean %a : tensor<64x32xf32>
  %1 = ddp.allreduce mean %b : tensor<64x32xf32>
  %2 = ddp.allreduce mean %c : tensor<64x32xf32>
  %3 = ddp.allreduce mean %d : tensor<64x32xf32>
  return %0, %1, %2, %3 : tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>
}
