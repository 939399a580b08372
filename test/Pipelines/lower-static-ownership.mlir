// RUN: ddp-opt %s --insert-powersgd="rank=2" --ddp-lower-to-llvm \
// RUN:   | FileCheck %s --implicit-check-not=dealloc_helper
// RUN: ddp-opt %s --insert-powersgd="rank=2" --ddp-lower-to-llvm \
// RUN:   --mlir-print-ir-after=split-deallocations -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SPLIT

// Every gradient stays in its argument's buffer in the warm-up branch and
// in the PowerSGD branch (the matrices' reconstruction and the biases'
// uncompressed allreduce_start both work in place), so buffer deallocation
// knows each result's ownership when compiling. Had one branch yielded a
// fresh buffer, the step would end with a run-time ownership check of every
// buffer against every result (@dealloc_helper), and lowering would cost
// the square of the number of gradients.

// The step returns a clone of each argument; its end has one dealloc for
// the arguments (never freed here) and one per clone, each retaining only
// that clone (split-deallocations), not one dealloc of every buffer
// retaining every result.
// SPLIT: IR Dump After SplitDeallocations
// SPLIT: bufferization.dealloc ({{[^)]*}}) if (%false{{[^,]*}}, %false{{[^,]*}}, %false{{[^,]*}}, %false{{[^,]*}}){{$}}
// SPLIT-NEXT: = bufferization.dealloc ({{[^,]*}}) if ({{[^,]*}}) retain ({{[^,]*}} : memref<64x32xf32>)
// SPLIT-NEXT: = bufferization.dealloc ({{[^,]*}}) if ({{[^,]*}}) retain ({{[^,]*}} : memref<32xf32>)
// SPLIT-NEXT: = bufferization.dealloc ({{[^,]*}}) if ({{[^,]*}}) retain ({{[^,]*}} : memref<32x16xf32>)
// SPLIT-NEXT: = bufferization.dealloc ({{[^,]*}}) if ({{[^,]*}}) retain ({{[^,]*}} : memref<16xf32>)
// SPLIT-NEXT: return

// CHECK-LABEL: llvm.func @step(
// CHECK: llvm.call @ddprt_allreduce_start
// CHECK: llvm.call @ddprt_reconstruct
func.func @step(%w0: tensor<64x32xf32>, %b0: tensor<32xf32>,
                %w1: tensor<32x16xf32>, %b1: tensor<16xf32>)
    -> (tensor<64x32xf32>, tensor<32xf32>, tensor<32x16xf32>, tensor<16xf32>) {
  %r:4 = ddp.allreduce mean %w0, %b0, %w1, %b1
      : tensor<64x32xf32>, tensor<32xf32>, tensor<32x16xf32>, tensor<16xf32>
  return %r#0, %r#1, %r#2, %r#3
      : tensor<64x32xf32>, tensor<32xf32>, tensor<32x16xf32>, tensor<16xf32>
}
