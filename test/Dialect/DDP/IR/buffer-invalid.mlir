// RUN: ddp-opt %s -split-input-file -verify-diagnostics

func.func @strided(%s: memref<8x8xf32, strided<[16, 1]>>) {
  // expected-error @+1 {{operand #0 must be variadic of contiguous row-major memref of f32, f16, bf16 or f64}}
  ddp.buffer.allreduce sum %s : memref<8x8xf32, strided<[16, 1]>>
  return
}

// -----

func.func @project_shape(%g: memref<64x32xf32>, %q: memref<32x2xf32>, %p: memref<64x3xf32>) {
  // expected-error @+1 {{output #0 has type 'memref<64x3xf32>' but must hold a 'tensor<64x2xf32>'}}
  ddp.buffer.project %g times %q into %p : memref<64x32xf32> times memref<32x2xf32> into memref<64x3xf32>
  return
}

// -----

func.func @residual_shape(%g: memref<64x32xf32>, %e: memref<32x64xf32>, %q: memref<32x2xf32>, %p: memref<64x2xf32>) {
  // expected-error @+1 {{residual #0 has type}}
  ddp.buffer.project %g plus %e times %q into %p : memref<64x32xf32> plus memref<32x64xf32> times memref<32x2xf32> into memref<64x2xf32>
  return
}

// -----

func.func @reconstruct_into(%p: memref<64x2xf32>, %q: memref<32x2xf32>, %m: memref<32x64xf32>) {
  // expected-error @+1 {{output #0 has type 'memref<32x64xf32>' but must hold a 'tensor<64x32xf32>'}}
  ddp.buffer.reconstruct %p times %q into %m : memref<64x2xf32> times memref<32x2xf32> into memref<32x64xf32>
  return
}

// -----

func.func @cast_shape(%a: memref<4xf32>, %b: memref<5xf16>) {
  // expected-error @+1 {{output #0 has type 'memref<5xf16>' but a cast keeps the shape of 'memref<4xf32>'}}
  ddp.buffer.cast %a into %b : memref<4xf32> into memref<5xf16>
  return
}

// -----

func.func @request(%a: memref<4xf32>) {
  // expected-error @+1 {{request type must list the types of the buffers}}
  %r = ddp.buffer.allreduce_start sum %a : memref<4xf32> -> !ddp.request<memref<5xf32>>
  return
}

// -----

ddp.state @q : tensor<32x2xf32>
func.func @state_type() {
  // expected-error @+1 {{type 'memref<2x32xf32>' does not hold the state 'q' of type 'tensor<32x2xf32>'}}
  %q = ddp.buffer.state @q : memref<2x32xf32>
  return
}

// -----

func.func @no_state() {
  // expected-error @+1 {{'missing' does not name a 'ddp.state'}}
  %q = ddp.buffer.state @missing : memref<2xf32>
  return
}

// -----

func.func @epsilon(%p: memref<4x2xf32>) {
  // expected-error @+1 {{epsilon must be finite and non-negative}}
  ddp.buffer.orthogonalize %p {epsilon = -1.0 : f64} : memref<4x2xf32>
  return
}

// -----

ddp.state @offset : tensor<4xf32>
func.func @state_layout() {
  // expected-error @+1 {{a state's buffer has the identity layout}}
  %q = ddp.buffer.state @offset : memref<4xf32, strided<[1], offset: 4>>
  return
}

// -----

// MultiTensorOpInterface's verifier: every operand group holds N buffers.
func.func @cast_groups(%a: memref<4xf32>, %b: memref<4xf16>, %c: memref<4xf16>) {
  // expected-error @+1 {{'ddp.buffer.cast' op operand group #1 has 2 values, but the op works on 1 tensors}}
  "ddp.buffer.cast"(%a, %b, %c) <{operandSegmentSizes = array<i32: 1, 2>}> : (memref<4xf32>, memref<4xf16>, memref<4xf16>) -> ()
  return
}

// -----

func.func @allgather_output(%in: memref<4xi8>, %out: memref<?x5xi8>) {
  // expected-error @+1 {{'ddp.buffer.allgather' op output #0 has type 'memref<?x5xi8>' but gathering 'memref<4xi8>' needs a leading dimension of ranks, then its shape and element type}}
  ddp.buffer.allgather %in into %out : memref<4xi8> into memref<?x5xi8>
  return
}
