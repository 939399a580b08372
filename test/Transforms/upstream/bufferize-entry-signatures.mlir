// What bufferize-entry-signatures works around: One-Shot Bufferize's
// function-boundary analysis compares every tensor a function returns with
// every tensor argument, twice (quadratic in a step's gradients: 4 s at
// 10,000). It only does One-Shot's work on the signature first: the
// bufferized IR is the same with and without it. The time it saves is not
// something a test asserts: `bash bench/run_ddp_opt_bench.sh` lowers steps
// with and without the workarounds ("upstream alone").
// RUN: ddp-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   --canonicalize -o %t.upstream.mlir
// RUN: ddp-opt %s --bufferize-entry-signatures \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   --canonicalize -o %t.ours.mlir
// RUN: diff %t.upstream.mlir %t.ours.mlir
// RUN: FileCheck %s < %t.ours.mlir

// Updated in place, returned, and read only: the arguments are the buffers
// the caller passed, the results the same or new ones.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>, %[[C:.*]]: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
// CHECK: memref.store %{{.*}}, %[[A]]
// CHECK: %[[NEW:.*]] = memref.alloc()
// CHECK: linalg.add ins(%[[B]], %[[C]] : {{.*}}) outs(%[[NEW]] :
// CHECK: return %[[A]], %[[NEW]]
func.func @step(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %i = arith.constant 0 : index
  %v = tensor.extract %c[%i] : tensor<4xf32>
  %a2 = tensor.insert %v into %a[%i] : tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.add ins(%b, %c : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %a2, %f : tensor<4xf32>, tensor<4xf32>
}
