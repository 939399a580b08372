// RUN: ddp-opt %s --ddp-matmuls-to-runtime -verify-diagnostics

// The runtime's function, declared otherwise by the module: an error rather
// than a call the loader would bind to the wrong signature.
// expected-error@+1 {{@ddprt_step_matmul_f32 is the runtime's; this module declares it as '(memref<*xf32>) -> ()'}}
func.func private @ddprt_step_matmul_f32(memref<*xf32>)

func.func @matmul(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}
