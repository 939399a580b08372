// The element types the ops accept are the runtime's, from the one list in
// ddprt.h (DDPRT_FOR_EACH_DTYPE): f32, f16, bf16 and f64 for collectives and
// kernels, plus i64 for the step counter. A type the runtime lacks fails when
// the module is verified, before any pass or run, with the list in the
// message; the lowering never sees it.
// RUN: ddp-opt %s -split-input-file -verify-diagnostics
// RUN: not ddp-opt %s -split-input-file --ddp-lower-to-llvm 2>&1 | FileCheck %s --check-prefix=LOWER
// LOWER-NOT: the runtime has no element type
// LOWER: error: 'ddp.allreduce' op operand #0 must be variadic of ranked tensor of f32, f16, bf16 or f64

// Every runtime type, on each kind of op, verifies.
func.func @accepted(%a: tensor<4xf32>, %b: tensor<4xf16>, %c: tensor<4xbf16>, %d: tensor<4xf64>,
                    %m: tensor<4x4xbf16>, %q: tensor<4x1xbf16>, %step: i64)
    -> (tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>, tensor<4xf64>) {
  %r:4 = ddp.allreduce mean %a, %b, %c, %d : tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>, tensor<4xf64>
  %p = ddp.project %m times %q : tensor<4x4xbf16> times tensor<4x1xbf16>
  %n = ddp.random_normal %step seed 0 stream 0 : tensor<4x1xf64>
  %f, %nz = ddp.inspect %n : tensor<4x1xf64>
  return %r#0, %r#1, %r#2, %r#3 : tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>, tensor<4xf64>
}
ddp.state @counter : i64
ddp.state @error : tensor<4x4xbf16>

// -----

// Integers are not communicated: not even a sum (the runtime has no integer
// collectives).
func.func @sum_of_ints(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'ddp.allreduce' op operand #0 must be variadic of ranked tensor of f32, f16, bf16 or f64 (the runtime's float types) values, but got 'tensor<4xi32>'}}
  %r = ddp.allreduce sum %x : tensor<4xi32>
  return %r : tensor<4xi32>
}

// -----

// i64 is a state type only.
func.func @sum_of_i64(%x: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{must be variadic of ranked tensor of f32, f16, bf16 or f64}}
  %r = ddp.allreduce sum %x : tensor<4xi64>
  return %r : tensor<4xi64>
}

// -----

// Floats the runtime does not have: the f8 formats, tf32.
func.func @f8(%x: tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN> {
  // expected-error @+1 {{but got 'tensor<4xf8E4M3FN>'}}
  %r = ddp.allreduce mean %x : tensor<4xf8E4M3FN>
  return %r : tensor<4xf8E4M3FN>
}

// -----

func.func @tf32_start(%x: tensor<4xtf32>) -> tensor<4xtf32> {
  // expected-error @+2 {{a request carries ranked tensors of f32, f16, bf16 or f64 (or, after bufferization, contiguous buffers), got 'tensor<4xtf32>'}}
  %h = ddp.allreduce_start mean %x : tensor<4xtf32>
  %r = ddp.wait %h : !ddp.request<tensor<4xtf32>>
  return %r : tensor<4xtf32>
}

// -----

func.func @cast_to_f8(%x: tensor<4xf32>) -> tensor<4xf8E5M2> {
  // expected-error @+1 {{result #0 must be variadic of ranked tensor of f32, f16, bf16 or f64}}
  %r = ddp.cast %x : tensor<4xf32> to tensor<4xf8E5M2>
  return %r : tensor<4xf8E5M2>
}

// -----

// A tensor state holds compute types; integers only as the i64 counter.
// expected-error @+1 {{'ddp.state' op state must be an i64 counter or a ranked tensor of f32, f16, bf16 or f64, got 'tensor<4xi64>'}}
ddp.state @int_tensor : tensor<4xi64>

// -----

// expected-error @+1 {{state must be an i64 counter or a ranked tensor of f32, f16, bf16 or f64, got 'i32'}}
ddp.state @i32_counter : i32

// -----

// After bufferization, the same list.
func.func @buffer_ints(%x: memref<4xi32>) {
  // expected-error @+1 {{'ddp.buffer.allreduce' op operand #0 must be variadic of contiguous row-major memref of f32, f16, bf16 or f64, but got 'memref<4xi32>'}}
  ddp.buffer.allreduce sum %x : memref<4xi32>
  return
}

// -----

func.func @buffer_project_f8(%m: memref<4x4xf8E4M3FN>, %q: memref<4x1xf8E4M3FN>, %p: memref<4x1xf8E4M3FN>) {
  // expected-error @+1 {{must be variadic of contiguous statically shaped 2-D memref of f32, f16, bf16 or f64}}
  ddp.buffer.project %m times %q into %p : memref<4x4xf8E4M3FN> times memref<4x1xf8E4M3FN> into memref<4x1xf8E4M3FN>
  return
}
