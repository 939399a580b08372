// Long names are printed whole (the column widens): cut to one prefix,
// these two read as the same tensor.
// RUN: ddp-opt %s --insert-powersgd=rank=2 --ddp-compression-report=output=- -o /dev/null | FileCheck %s
// CHECK: # where shape
// CHECK-NEXT: 0  model.encoder.layers.11.attention.self.query.weight 64x32
// CHECK-NEXT: 1  model.encoder.layers.11.attention.self.key.weight   64x32
// The states follow the names.
// RUN: ddp-opt %s --insert-powersgd=rank=2 | FileCheck %s --check-prefix=STATES
// STATES-DAG: ddp.state @ddp.q.model.encoder.layers.11.attention.self.query.weight : tensor<32x2xf32>
// STATES-DAG: ddp.state @ddp.error.model.encoder.layers.11.attention.self.key.weight : tensor<64x32xf32>

func.func @step(%a: tensor<64x32xf32> loc("model.encoder.layers.11.attention.self.query.weight"), %b: tensor<64x32xf32> loc("model.encoder.layers.11.attention.self.key.weight")) -> (tensor<64x32xf32>, tensor<64x32xf32>) {
  %0 = ddp.allreduce mean %a : tensor<64x32xf32>
  %1 = ddp.allreduce mean %b : tensor<64x32xf32>
  return %0, %1 : tensor<64x32xf32>, tensor<64x32xf32>
}
