// RUN: ddp-opt %s --insert-powersgd="rank=2 start-iter=1" --ddp-lower-to-llvm | FileCheck %s
// RUN: ddp-opt %s --insert-powersgd="rank=2 start-iter=1" --ddp-lower-to-llvm | FileCheck %s --check-prefix=CLEAN

// From tensors with a gradient allreduce, through PowerSGD, to the LLVM
// dialect only: upstream ops (linalg, arith) lower with the ddp calls.

// Nothing but the LLVM dialect is left.
// CLEAN-NOT: {{^ *(%[^ ]+ = )?"?(ddp|memref|bufferization|linalg|scf|arith|tensor)\.}}
// CLEAN-NOT: unrealized_conversion_cast
// CHECK-LABEL: llvm.func @step
// CHECK-DAG: llvm.call @ddprt_allreduce_start
// CHECK-DAG: llvm.call @ddprt_random_normal
// CHECK-DAG: llvm.call @ddprt_project
// CHECK-DAG: llvm.call @ddprt_backproject
// CHECK-DAG: llvm.call @ddprt_orthogonalize
// CHECK-DAG: llvm.call @ddprt_reconstruct
// CHECK-DAG: llvm.call @ddprt_wait
// CHECK-DAG: llvm.call @ddprt_copy
// Allocations go to the host's functions (ddp-run, ddprt-step-runner), not
// to malloc and free.
// CHECK-DAG: llvm.call @_mlir_memref_to_llvm_aligned_alloc
// CLEAN-NOT: @malloc
// CLEAN-NOT: @free
func.func @step(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32xf32>) -> (tensor<64x32xf32>, tensor<32xf32>) {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<64x32xf32>
  %filled = linalg.fill ins(%zero : f32) outs(%init : tensor<64x32xf32>) -> tensor<64x32xf32>
  %xt = tensor.empty() : tensor<64x8xf32>
  %t = linalg.transpose ins(%x : tensor<8x64xf32>) outs(%xt : tensor<64x8xf32>) permutation = [1, 0]
  %y = tensor.empty() : tensor<8x32xf32>
  %ones = linalg.fill ins(%zero : f32) outs(%y : tensor<8x32xf32>) -> tensor<8x32xf32>
  %gw = linalg.matmul ins(%t, %ones : tensor<64x8xf32>, tensor<8x32xf32>) outs(%filled : tensor<64x32xf32>) -> tensor<64x32xf32>
  %g = arith.addf %gw, %w : tensor<64x32xf32>
  %r:2 = ddp.allreduce mean %g, %b : tensor<64x32xf32>, tensor<32xf32>
  return %r#0, %r#1 : tensor<64x32xf32>, tensor<32xf32>
}
