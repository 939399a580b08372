// buckets= takes PowerSGD to the buckets with a gradient whose name
// matches, as it does for the other schemes; the rest stay plain
// allreduces (of role gradient: a later pass may compress them otherwise).

// Each gradient a bucket of its own: fc1 only.
// RUN: ddp-opt %s --insert-powersgd="rank=2 bucket-cap-mb=0 buckets=^fc1" | FileCheck %s --check-prefix=ONE
// ONE-DAG: ddp.state @ddp.q.fc1.weight : tensor<32x2xf32>
// ONE-DAG: ddp.state @ddp.error.fc1.weight : tensor<64x32xf32>
// ONE-NOT: ddp.state @ddp.q.fc2
// ONE-NOT: ddp.state @ddp.error.fc2
// ONE-LABEL: func.func @step
// ONE: ddp.allreduce sum %{{.*}} role compressed : tensor<64x2xf32>
// ONE: ddp.allreduce mean %{{.*}} role compressed : tensor<32x2xf32>
// ONE: ddp.allreduce mean %arg1 : tensor<64x32xf32>{{$}}
// ONE: ddp.allreduce mean %arg2 : tensor<64xf32>{{$}}

// One bucket of all three (the default cap): a name in it takes it whole.
// RUN: ddp-opt %s --insert-powersgd="rank=2 buckets=^fc1" | FileCheck %s --check-prefix=WHOLE
// WHOLE-DAG: ddp.state @ddp.q.fc1.weight
// WHOLE-DAG: ddp.state @ddp.q.fc2.weight

// A filter every gradient matches changes nothing.
// RUN: ddp-opt %s --insert-powersgd="rank=2 bucket-cap-mb=0" -o %t.all.mlir
// RUN: ddp-opt %s --insert-powersgd="rank=2 bucket-cap-mb=0 buckets=." -o %t.dot.mlir
// RUN: diff %t.all.mlir %t.dot.mlir

// A pattern that takes nothing is most likely a typo.
// RUN: ddp-opt %s --insert-powersgd="rank=2 buckets=^conv" 2>&1 | FileCheck %s --check-prefix=NONE
// NONE: warning: insert-powersgd: buckets='^conv' matches no gradient's name: no bucket was compressed
// NONE-NOT: ddp.state @ddp.q

// After ddp-two-level the cross-node allreduce carries the gradients the
// node's reduction took, under their names: PowerSGD across nodes on fc1
// only, its states named after fc1 as on one level (checkpoints follow
// them), and a flat scheme refuses the bucket it is asked for (it gathers
// over every rank).
// RUN: ddp-opt %s -p 'builtin.module(func.func(ddp-two-level),insert-powersgd{rank=2 bucket-cap-mb=0 buckets=^fc1})' | FileCheck %s --check-prefix=TWO
// TWO: ddp.state @ddp.q.fc1.weight
// TWO-NOT: ddp.state @ddp.q.fc2
// TWO: ddp.allreduce sum %{{.*}} role compressed group across_nodes : tensor<64x2xf32>
// RUN: not ddp-opt %s -p 'builtin.module(func.func(ddp-two-level),insert-topk{buckets=^fc1})' 2>&1 | FileCheck %s --check-prefix=TWOTOPK
// TWOTOPK: error: insert-topk: the scheme 'topk' gathers over every rank and cannot reduce a bucket across_nodes

// A pattern that matches only a gradient no scheme compresses (a dynamic
// shape) takes nothing either: neither its bucket's other gradients
// (PowerSGD takes a bucket whole) nor, in a flat scheme, the rest.
// RUN: ddp-opt %s --insert-powersgd="rank=2 buckets=^dyn" 2>&1 | FileCheck %s --check-prefix=DYN
// RUN: ddp-opt %s --insert-topk="buckets=^dyn" 2>&1 | FileCheck %s --check-prefix=DYN
// DYN: warning: {{.*}}: buckets='^dyn' matches no gradient's name: no bucket was compressed
// DYN-NOT: ddp.state

// RUN: not ddp-opt %s --insert-powersgd="buckets=(" 2>&1 | FileCheck %s --check-prefix=REGEX
// REGEX: error: insert-powersgd: buckets='(' is not a valid regular expression

// In a planned module, ddp-plan chose the buckets.
// RUN: not ddp-opt %s --insert-powersgd="planned buckets=fc1" 2>&1 | FileCheck %s --check-prefix=PLANNED
// PLANNED: error: insert-powersgd: buckets= does not apply with planned: ddp-plan chose the buckets (use its never= option)

func.func @step(%w1: tensor<64x32xf32> loc("fc1.weight"), %w2: tensor<64x32xf32> loc("fc2.weight"), %b2: tensor<64xf32> loc("fc2.bias")) -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64xf32>) {
  %0 = ddp.allreduce mean %w1 : tensor<64x32xf32>
  %1 = ddp.allreduce mean %w2 : tensor<64x32xf32>
  %2 = ddp.allreduce mean %b2 : tensor<64xf32>
  return %0, %1, %2 : tensor<64x32xf32>, tensor<64x32xf32>, tensor<64xf32>
}

func.func @dynamic(%d: tensor<?x8xf32> loc("dyn.weight"), %w: tensor<64x32xf32> loc("fc3.weight")) -> (tensor<?x8xf32>, tensor<64x32xf32>) {
  %0:2 = ddp.allreduce mean %d, %w : tensor<?x8xf32>, tensor<64x32xf32>
  return %0#0, %0#1 : tensor<?x8xf32>, tensor<64x32xf32>
}
