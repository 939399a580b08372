// Upstream's One-Shot Bufferize with its default options (function
// boundaries bufferized with fully dynamic layouts) takes a compressed
// step: an argument reduced in place that arrives strided is reduced in a
// contiguous copy (the runtime's buffers are contiguous), which becomes the
// result. The step then lowers and runs under upstream's tools only, with
// the same numbers as through ddp-lower-to-llvm's own bufferization.
// The runner is not instrumented; the ASan run covers the same pipeline
// with ddp-run.
// UNSUPPORTED: asan

// RUN: ddp-opt %s --insert-powersgd="rank=1 start-iter=0" --ddp-fuse-kernels -o %t.fused.mlir
// RUN: %mlir_opt --load-dialect-plugin=%ddp_plugin --one-shot-bufferize=bufferize-function-boundaries %t.fused.mlir \
// RUN:   | FileCheck %s --check-prefix=BUF
// BUF-LABEL: func.func @step(
// BUF-SAME: %[[W:[^:]*]]: memref<8x8xf32, strided<[?, ?], offset: ?>> {ddp.name = "w"}, %[[B:[^:]*]]: memref<4xf32, strided<[?], offset: ?>> {ddp.name = "b"}
// BUF: %[[C:.*]] = memref.alloc() {{.*}}: memref<4xf32>
// BUF: memref.copy %[[B]], %[[C]] : memref<4xf32, strided<[?], offset: ?>> to memref<4xf32>
// BUF: ddp.buffer.allreduce_start mean %[[C]] role uncompressed : memref<4xf32>

// Lowered and run on one rank: the weight (rank 1: compressed) and the bias
// (uncompressed) come back
// exactly, as through ddp-lower-to-llvm alone.
// RUN: %mlir_opt --load-dialect-plugin=%ddp_plugin --load-pass-plugin=%ddp_plugin \
// RUN:   -p 'builtin.module(insert-powersgd{rank=1 start-iter=0},func.func(ddp-fuse-kernels),one-shot-bufferize{bufferize-function-boundaries},ddp-lower-to-llvm)' %s \
// RUN:   | %mlir_runner -e main -entry-point-result=void -shared-libs=%runner_libs | FileCheck %s
// RUN: %mlir_opt --load-dialect-plugin=%ddp_plugin --load-pass-plugin=%ddp_plugin \
// RUN:   -p 'builtin.module(insert-powersgd{rank=1 start-iter=0},func.func(ddp-fuse-kernels),ddp-lower-to-llvm)' %s \
// RUN:   | %mlir_runner -e main -entry-point-result=void -shared-libs=%runner_libs | FileCheck %s
// CHECK: sizes = [8, 8]
// CHECK-NEXT: {{\[}}[1,   2,   3,   4,   5,   6,   7,   8],
// CHECK-NEXT: [2,   4,   6,   8,   10,   12,   14,   16],
// CHECK: [8,   16,   24,   32,   40,   48,   56,   64]]
// CHECK: sizes = [4]
// CHECK-NEXT: [5,  6,  7,  8]

func.func @step(%w: tensor<8x8xf32> loc("w"), %b: tensor<4xf32> loc("b"))
    -> (tensor<8x8xf32>, tensor<4xf32>) {
  %r:2 = ddp.allreduce mean %w, %b : tensor<8x8xf32>, tensor<4xf32>
  return %r#0, %r#1 : tensor<8x8xf32>, tensor<4xf32>
}

func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

func.func @main() {
  %w = arith.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0], [3.0, 6.0, 9.0, 12.0, 15.0, 18.0, 21.0, 24.0], [4.0, 8.0, 12.0, 16.0, 20.0, 24.0, 28.0, 32.0], [5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0], [6.0, 12.0, 18.0, 24.0, 30.0, 36.0, 42.0, 48.0], [7.0, 14.0, 21.0, 28.0, 35.0, 42.0, 49.0, 56.0], [8.0, 16.0, 24.0, 32.0, 40.0, 48.0, 56.0, 64.0]]> : tensor<8x8xf32>
  %b = arith.constant dense<[5.0, 6.0, 7.0, 8.0]> : tensor<4xf32>
  %r:2 = func.call @step(%w, %b) : (tensor<8x8xf32>, tensor<4xf32>) -> (tensor<8x8xf32>, tensor<4xf32>)
  %mw = bufferization.to_buffer %r#0 : tensor<8x8xf32> to memref<8x8xf32>
  %uw = memref.cast %mw : memref<8x8xf32> to memref<*xf32>
  func.call @printMemrefF32(%uw) : (memref<*xf32>) -> ()
  %mb = bufferization.to_buffer %r#1 : tensor<4xf32> to memref<4xf32>
  %ub = memref.cast %mb : memref<4xf32> to memref<*xf32>
  func.call @printMemrefF32(%ub) : (memref<*xf32>) -> ()
  return
}
