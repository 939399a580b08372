// A compiled step under upstream MLIR's tools only: mlir-opt-22 with the
// plugin compresses (PowerSGD rank 1) and lowers it, mlir-runner runs it on
// one rank with the runtime as a shared library (libddprt.so and
// libddprt-mlir-runner.so, which starts a context and defines the memref
// allocation functions). The data have rank 1, so the first compressed step
// gives them back exactly.
// The runner is not instrumented; the ASan run covers the same pipeline
// with ddp-run.
// UNSUPPORTED: asan
// RUN: %mlir_opt --load-dialect-plugin=%ddp_plugin --load-pass-plugin=%ddp_plugin \
// RUN:   -p 'builtin.module(ddp-compress{powersgd-rank=1 start-iter=0 min-compression-rate=0},ddp-lower-to-llvm)' %s \
// RUN:   | %mlir_runner -e main -entry-point-result=void -shared-libs=%runner_libs | FileCheck %s
// It is compressed: the runtime's PowerSGD calls are in it.
// RUN: %mlir_opt --load-dialect-plugin=%ddp_plugin --load-pass-plugin=%ddp_plugin \
// RUN:   -p 'builtin.module(ddp-compress{powersgd-rank=1 start-iter=0 min-compression-rate=0},ddp-lower-to-llvm)' %s \
// RUN:   | FileCheck %s --check-prefix=LOWERED
// LOWERED-DAG: llvm.call @ddprt_project(
// LOWERED-DAG: llvm.call @ddprt_reconstruct(

// CHECK: sizes = [4, 3]
// CHECK-NEXT: {{\[}}[1,   2,   3],
// CHECK-NEXT: [2,   4,   6],
// CHECK-NEXT: [3,   6,   9],
// CHECK-NEXT: [4,   8,   12]]

func.func @step(%g: tensor<4x3xf32> loc("w")) -> tensor<4x3xf32> {
  %r = ddp.allreduce mean %g : tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}

func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

func.func @main() {
  %g = arith.constant dense<[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 6.0, 9.0], [4.0, 8.0, 12.0]]> : tensor<4x3xf32>
  %r = func.call @step(%g) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %m = bufferization.to_buffer %r : tensor<4x3xf32> to memref<4x3xf32>
  %u = memref.cast %m : memref<4x3xf32> to memref<*xf32>
  func.call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}
