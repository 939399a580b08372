// Upstream mlir-opt loads ddp as a dialect and pass plugin; the passes and
// the pipeline run through -p.
// RUN: %mlir_opt --load-dialect-plugin=%ddp_plugin --load-pass-plugin=%ddp_plugin \
// RUN:   -p 'builtin.module(insert-powersgd{rank=2 start-iter=0})' %s | FileCheck %s
// RUN: %mlir_opt --load-dialect-plugin=%ddp_plugin --load-pass-plugin=%ddp_plugin \
// RUN:   -p 'builtin.module(ddp-compress{powersgd-rank=2 start-iter=0 narrow=fp16})' %s \
// RUN:   | FileCheck %s --check-prefix=PIPE
// The dialect alone: ddp IR parses and prints in upstream mlir-opt.
// RUN: %mlir_opt --load-dialect-plugin=%ddp_plugin %s | FileCheck %s --check-prefix=PARSE

// CHECK-DAG: ddp.state @ddp.q.step.0 : tensor<32x2xf32>
// CHECK-LABEL: func.func @step(
// CHECK: ddp.allreduce_start mean %{{.*}} role uncompressed : tensor<64xf32>
// CHECK: ddp.allreduce sum %{{.*}} role compressed : tensor<64x2xf32>
// PIPE-LABEL: func.func @step(
// PIPE: ddp.project_residual
// PIPE: ddp.allreduce_start sum %{{.*}} role compressed : tensor<64x2xf16>
// PARSE: ddp.allreduce mean %{{.*}} : tensor<64x32xf32>
func.func @step(%w: tensor<64x32xf32>, %b: tensor<64xf32>) -> (tensor<64x32xf32>, tensor<64xf32>) {
  %0 = ddp.allreduce mean %w : tensor<64x32xf32>
  %1 = ddp.allreduce mean %b : tensor<64xf32>
  return %0, %1 : tensor<64x32xf32>, tensor<64xf32>
}

// The plugin registers the ddp ops' bufferization models: upstream
// One-Shot Bufferize and the whole lowering run in mlir-opt as in ddp-opt.
// RUN: %mlir_opt --load-dialect-plugin=%ddp_plugin --load-pass-plugin=%ddp_plugin \
// RUN:   --one-shot-bufferize=bufferize-function-boundaries %s | FileCheck %s --check-prefix=BUF
// BUF-LABEL: func.func @step(
// BUF: ddp.buffer.allreduce mean %{{.*}} : memref<64x32xf32>
// BUF: ddp.buffer.allreduce mean %{{.*}} : memref<64xf32>
// RUN: %mlir_opt --load-dialect-plugin=%ddp_plugin --load-pass-plugin=%ddp_plugin \
// RUN:   -p 'builtin.module(insert-powersgd{rank=2 start-iter=0},ddp-lower-to-llvm)' %s \
// RUN:   | FileCheck %s --check-prefix=LLVM
// LLVM-NOT: {{ ddp\.[a-z_]+ }}
// LLVM-DAG: llvm.func @step(
// LLVM-DAG: llvm.call @ddprt_project(
// LLVM-DAG: llvm.call @ddprt_allreduce(

// The plugin registers ddp's ConvertToLLVMPatternInterface too: upstream's
// generic convert-to-llvm lowers a bufferized step, ddp ops included, in
// one pass (after upstream's own bufferization and deallocation).
// RUN: %mlir_opt --load-dialect-plugin=%ddp_plugin --load-pass-plugin=%ddp_plugin \
// RUN:   --one-shot-bufferize=bufferize-function-boundaries \
// RUN:   --ownership-based-buffer-deallocation --buffer-deallocation-simplification \
// RUN:   --bufferization-lower-deallocations --convert-to-llvm %s \
// RUN:   | FileCheck %s --check-prefix=GENERIC
// GENERIC-NOT: {{ ddp\.[a-z_]+ }}
// GENERIC-LABEL: llvm.func @step(
// GENERIC-COUNT-2: llvm.call @ddprt_allreduce(
