// PyTorch's rule: compress iff n*m > (n+m)*r*min-compression-rate. For an
// 8x8 matrix at rank 2 that is 64 > 32*rate: not at rate 2 (64 = 64), yes
// at 1.9.
// RUN: ddp-opt %s --insert-powersgd="rank=2 start-iter=0" | FileCheck %s --check-prefix=RATE2
// RUN: ddp-opt %s --insert-powersgd="rank=2 start-iter=0 min-compression-rate=1.9" | FileCheck %s --check-prefix=RATE19
// RUN: ddp-opt %s --insert-powersgd="rank=1 start-iter=0" | FileCheck %s --check-prefix=RANK1
// RUN: ddp-opt %s --insert-powersgd="rank=64 start-iter=0 min-compression-rate=0" | FileCheck %s --check-prefix=RANKCAP
// RUN: ddp-opt %s --insert-powersgd="start-iter=0 error-feedback=false" | FileCheck %s --check-prefix=NOEF --implicit-check-not=residual --implicit-check-not=ddp.error
// RUN: ddp-opt %s --insert-powersgd="start-iter=0 warm-start=false" | FileCheck %s --check-prefix=NOWARM --implicit-check-not=ddp.q.
// RUN: ddp-opt %s --insert-powersgd="start-iter=7 seed=42 orthogonalization-epsilon=1e-8" | FileCheck %s --check-prefix=CFG
// RUN: ddp-opt %s --insert-powersgd="start-iter=0 min-compression-rate=0 batch-same-shape=true" | FileCheck %s --check-prefix=SAMESHAPE
// RUN: ddp-opt %s --insert-powersgd="start-iter=0 min-compression-rate=0" | FileCheck %s --check-prefix=ORDER
// RUN: ddp-opt %s --insert-powersgd="start-iter=0 bucket-cap-mb=0" | FileCheck %s --check-prefix=NOBUCKET

// RATE2-LABEL: func.func @rule
// RATE2: ddp.allreduce_start mean %{{.*}} role uncompressed : tensor<8x8xf32>
// RATE2: ddp.allreduce sum %{{.*}} role compressed : tensor<40x2xf32>
// RATE19-LABEL: func.func @rule
// RATE19-NOT: uncompressed
// RATE19: ddp.allreduce sum %{{.*}}, %{{.*}} role compressed : tensor<8x2xf32>, tensor<40x2xf32>
// 40x10 at rank 1: 400 > 50 * 2, compressed.
// RANK1-LABEL: func.func @rule
// RANK1: ddp.allreduce sum %{{.*}}, %{{.*}} role compressed : tensor<8x1xf32>, tensor<40x1xf32>
// r = min(n, m, rank).
// RANKCAP-LABEL: func.func @rule
// RANKCAP: ddp.allreduce sum %{{.*}}, %{{.*}} role compressed : tensor<8x8xf32>, tensor<40x10xf32>
func.func @rule(%a: tensor<8x8xf32>, %b: tensor<40x10xf32>) -> (tensor<8x8xf32>, tensor<40x10xf32>) {
  %0:2 = ddp.allreduce mean %a, %b : tensor<8x8xf32>, tensor<40x10xf32>
  return %0#0, %0#1 : tensor<8x8xf32>, tensor<40x10xf32>
}

// NOEF-LABEL: func.func @options
// NOEF: %[[Q:.*]] = ddp.orthogonalize
// NOEF: ddp.project %arg0 times %[[Q]]
// NOEF: ddp.backproject %arg0 times
// NOEF: ddp.reconstruct

// Without warm start Q is drawn every step, keyed by the step.
// NOWARM-LABEL: func.func @options
// NOWARM: %[[STEP:.*]] = ddp.state_load @ddp.step.options
// NOWARM-NOT: scf.if
// NOWARM: %[[Q:.*]] = ddp.random_normal %[[STEP]] seed 0 stream {{[0-9]+}} : tensor<32x1xf32>
// NOWARM: ddp.orthogonalize %[[Q]]

// CFG-LABEL: func.func @options
// CFG: arith.constant 7 : i64
// CFG: scf.if
// CFG: ddp.random_normal %{{.*}} seed 42 stream {{[0-9]+}}
// CFG: ddp.orthogonalize %{{.*}} {epsilon = 1.000000e-08 : f64}
// CFG: ddp.orthogonalize %{{.*}} {epsilon = 1.000000e-08 : f64}
func.func @options(%a: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %0 = ddp.allreduce mean %a : tensor<64x32xf32>
  return %0 : tensor<64x32xf32>
}

// By default tensors keep their order; batch-same-shape puts equal shapes
// next to each other (first appearance first).
// ORDER-LABEL: func.func @shapes
// ORDER: ddp.allreduce sum {{.*}} role compressed : tensor<8x1xf32>, tensor<4x1xf32>, tensor<8x1xf32>
// SAMESHAPE-LABEL: func.func @shapes
// SAMESHAPE: ddp.allreduce sum {{.*}} role compressed : tensor<8x1xf32>, tensor<8x1xf32>, tensor<4x1xf32>
func.func @shapes(%a: tensor<8x8xf32>, %b: tensor<4x4xf32>, %c: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<4x4xf32>, tensor<8x8xf32>) {
  %0:3 = ddp.allreduce mean %a, %b, %c : tensor<8x8xf32>, tensor<4x4xf32>, tensor<8x8xf32>
  return %0#0, %0#1, %0#2 : tensor<8x8xf32>, tensor<4x4xf32>, tensor<8x8xf32>
}

// Separate allreduces form one bucket (one P and one Q allreduce) unless
// bucket-cap-mb=0.
// NOBUCKET-LABEL: func.func @buckets
// NOBUCKET-COUNT-2: role compressed : tensor<64x1xf32>
// ORDER-LABEL: func.func @buckets
// ORDER: ddp.allreduce sum {{.*}} role compressed : tensor<64x1xf32>, tensor<64x1xf32>
// ORDER-NOT: ddp.allreduce sum {{.*}} role compressed
func.func @buckets(%a: tensor<64x32xf32>, %b: tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<64x32xf32>) {
  %0 = ddp.allreduce mean %a : tensor<64x32xf32>
  %1 = ddp.allreduce mean %b : tensor<64x32xf32>
  return %0, %1 : tensor<64x32xf32>, tensor<64x32xf32>
}
