// A gradient's name (its argument's name location) is what hosts find it
// by. The passes record it as `ddp.name` on the argument, and on a result
// that returns its allreduce, so that it survives printing without
// locations; a pass that reads a printed module gets the name location
// back from the attribute (PowerSGD's states are named after it).

// RUN: ddp-opt %s --ddp-bucketize | FileCheck %s --check-prefix=RECORD
// RECORD-LABEL: func.func @step(
// RECORD-SAME: %arg0: tensor<64x32xf32> {ddp.name = "fc1.weight"}
// RECORD-SAME: %arg1: tensor<32xf32> {ddp.name = "fc1.bias"}
// RECORD-SAME: %arg2: tensor<8xf32>,
// RECORD-SAME: %arg3: tensor<8xf32> {ddp.name = "given"}
// RECORD-SAME: -> (tensor<64x32xf32> {ddp.name = "fc1.weight"}, tensor<32xf32> {ddp.name = "fc1.bias"}, tensor<8xf32>, tensor<8xf32> {ddp.name = "given"}, tensor<32xf32>)

// Every pass that starts from a user's module records them.
// RUN: ddp-opt %s --convert-shard-to-ddp | FileCheck %s --check-prefix=SHARD
// RUN: ddp-opt %s --insert-powersgd=rank=2 | FileCheck %s --check-prefix=SHARD
// RUN: ddp-opt %s --insert-fp16-compression | FileCheck %s --check-prefix=SHARD
// RUN: ddp-opt %s --insert-quantization | FileCheck %s --check-prefix=SHARD
// RUN: ddp-opt %s --ddp-compress=powersgd-rank=2 | FileCheck %s --check-prefix=SHARD
// SHARD: %arg0: tensor<64x32xf32> {ddp.name = "fc1.weight"}
// SHARD-SAME: -> (tensor<64x32xf32> {ddp.name = "fc1.weight"}

// Printed without locations and compressed afterwards: the states are
// still named after the gradients, as when compressed at once.
// RUN: ddp-opt %s --ddp-bucketize | ddp-opt --insert-powersgd=rank=2 | FileCheck %s --check-prefix=STATES
// RUN: ddp-opt %s --insert-powersgd=rank=2 | FileCheck %s --check-prefix=STATES
// STATES: ddp.state @ddp.q.fc1.weight : tensor<32x2xf32>
// STATES: ddp.state @ddp.error.fc1.weight : tensor<64x32xf32>
// And the report names them.
// RUN: ddp-opt %s --ddp-bucketize | ddp-opt --insert-powersgd=rank=2 --ddp-compression-report=output=- -o /dev/null | FileCheck %s --check-prefix=REPORT
// REPORT: 0  fc1.weight {{.*}} powersgd
// REPORT: 3  given {{.*}} uncompressed

func.func @step(%w: tensor<64x32xf32> loc("fc1.weight"), %b: tensor<32xf32> loc("fc1.bias"),
                %u: tensor<8xf32>, %g: tensor<8xf32> {ddp.name = "given"})
    -> (tensor<64x32xf32>, tensor<32xf32>, tensor<8xf32>, tensor<8xf32>, tensor<32xf32>) {
  %r:4 = ddp.allreduce mean %w, %b, %u, %g : tensor<64x32xf32>, tensor<32xf32>, tensor<8xf32>, tensor<8xf32>
  // Not an allreduce of an argument: no name.
  %twice = arith.addf %r#1, %r#1 : tensor<32xf32>
  return %r#0, %r#1, %r#2, %r#3, %twice : tensor<64x32xf32>, tensor<32xf32>, tensor<8xf32>, tensor<8xf32>, tensor<32xf32>
}
