// RUN: ddp-opt %s --convert-ddp-to-llvm -verify-diagnostics -split-input-file

// The runtime reduces floats only: an integer bucket cannot be lowered.
func.func @ints(%x: memref<4xi32>) {
  // expected-error @+2 {{the runtime has no element type 'i32' (it takes f32, f16, bf16 and f64)}}
  // expected-error @+1 {{failed to legalize operation 'ddp.buffer.allreduce'}}
  ddp.buffer.allreduce sum %x : memref<4xi32>
  return
}
