// RUN: ddp-opt %s --pass-pipeline='builtin.module(ddp-compress{narrow=fp16})' \
// RUN:   | ddp-opt --ddp-lower-to-llvm --mlir-print-ir-after=ddp-donate-arguments \
// RUN:     -o /dev/null 2>&1 | FileCheck %s

// An fp16 step whose caller donates its arguments (ddp-run, ddprt_step_run,
// PyTorch's hook) widens the f16 sums back into the gradients' own buffers:
// it allocates only the f16 buffers, and a caller whose destinations are
// the arguments has nothing to copy. A step whose caller keeps its
// arguments widens into new buffers.

// CHECK-LABEL: func.func @donated(
// CHECK-SAME: %[[A:[^:]*]]: memref<64xf32>, %[[B:[^:]*]]: memref<8x16xf32>
// CHECK-NOT: memref.alloc() {{.*}}f32>
// CHECK: ddp.buffer.cast %{{[^ ]*}}, %{{[^ ]*}} into %[[B]], %[[A]] :
// CHECK: return %[[A]], %[[B]] :
func.func @donated(%g0: tensor<64xf32>, %g1: tensor<8x16xf32>) -> (tensor<64xf32>, tensor<8x16xf32>) attributes {ddp.donate_arguments} {
  %r0 = ddp.allreduce mean %g0 : tensor<64xf32>
  %r1 = ddp.allreduce mean %g1 : tensor<8x16xf32>
  return %r0, %r1 : tensor<64xf32>, tensor<8x16xf32>
}

// CHECK-LABEL: func.func @kept(
// CHECK: memref.alloc() {{.*}}memref<64xf32>
// CHECK: return
func.func @kept(%g0: tensor<64xf32>) -> tensor<64xf32> {
  %r0 = ddp.allreduce mean %g0 : tensor<64xf32>
  return %r0 : tensor<64xf32>
}
