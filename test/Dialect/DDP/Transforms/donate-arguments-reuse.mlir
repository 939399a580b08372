// RUN: ddp-opt %s --split-input-file --ddp-donate-arguments | FileCheck %s

// In a donated function, a result computed into a new buffer is computed
// into its argument's buffer once nothing uses that argument (an fp16
// step's gradients, widened back from their f16 sum).

// CHECK-LABEL: func.func @widened(
// CHECK-SAME: %[[G:[^:]*]]: memref<64xf32>, %[[H:[^:]*]]: memref<8x8xf32>
// CHECK-NOT: memref.alloc() {{.*}}f32>
// CHECK: ddp.buffer.cast %{{.*}}, %{{.*}} into %[[G]], %[[H]] :
// CHECK: return %[[G]], %[[H]]
func.func @widened(%g: memref<64xf32>, %h: memref<8x8xf32>) -> (memref<64xf32>, memref<8x8xf32>) attributes {ddp.donate_arguments} {
  %n0 = memref.alloc() : memref<64xf16>
  %n1 = memref.alloc() : memref<8x8xf16>
  ddp.buffer.cast %g, %h scaled by inverse_world_size into %n0, %n1 : memref<64xf32>, memref<8x8xf32> into memref<64xf16>, memref<8x8xf16>
  %r = ddp.buffer.allreduce_start sum %n0, %n1 : memref<64xf16>, memref<8x8xf16> -> !ddp.request<memref<64xf16>, memref<8x8xf16>>
  ddp.buffer.wait %r : !ddp.request<memref<64xf16>, memref<8x8xf16>>
  %w0 = memref.alloc() : memref<64xf32>
  %w1 = memref.alloc() : memref<8x8xf32>
  ddp.buffer.cast %n0, %n1 into %w0, %w1 : memref<64xf16>, memref<8x8xf16> into memref<64xf32>, memref<8x8xf32>
  memref.dealloc %n0 : memref<64xf16>
  memref.dealloc %n1 : memref<8x8xf16>
  return %w0, %w1 : memref<64xf32>, memref<8x8xf32>
}

// -----

// Without the attribute the caller keeps its arguments.
// CHECK-LABEL: func.func @kept(
// CHECK: %[[W:.*]] = memref.alloc() : memref<64xf32>
// CHECK: return %[[W]]
func.func @kept(%g: memref<64xf32>) -> memref<64xf32> {
  %n = memref.alloc() : memref<64xf16>
  ddp.buffer.cast %g into %n : memref<64xf32> into memref<64xf16>
  %w = memref.alloc() : memref<64xf32>
  ddp.buffer.cast %n into %w : memref<64xf16> into memref<64xf32>
  memref.dealloc %n : memref<64xf16>
  return %w : memref<64xf32>
}

// -----

// The argument is read after the new buffer is allocated.
// CHECK-LABEL: func.func @read_after(
// CHECK: %[[W:.*]] = memref.alloc() : memref<64xf32>
// CHECK: memref.load
// CHECK: return %[[W]]
func.func @read_after(%g: memref<64xf32>) -> (memref<64xf32>, f32) attributes {ddp.donate_arguments} {
  %c0 = arith.constant 0 : index
  %n = memref.alloc() : memref<64xf16>
  ddp.buffer.cast %g into %n : memref<64xf32> into memref<64xf16>
  %w = memref.alloc() : memref<64xf32>
  ddp.buffer.cast %n into %w : memref<64xf16> into memref<64xf32>
  %x = memref.load %g[%c0] : memref<64xf32>
  memref.dealloc %n : memref<64xf16>
  return %w, %x : memref<64xf32>, f32
}

// -----

// A view of the argument is read after it.
// CHECK-LABEL: func.func @view_after(
// CHECK: %[[W:.*]] = memref.alloc() : memref<64xf32>
// CHECK: return %[[W]]
func.func @view_after(%g: memref<64xf32>) -> (memref<64xf32>, f32) attributes {ddp.donate_arguments} {
  %c0 = arith.constant 0 : index
  %v = memref.subview %g[8] [8] [1] : memref<64xf32> to memref<8xf32, strided<[1], offset: 8>>
  %n = memref.alloc() : memref<64xf16>
  ddp.buffer.cast %g into %n : memref<64xf32> into memref<64xf16>
  %w = memref.alloc() : memref<64xf32>
  ddp.buffer.cast %n into %w : memref<64xf16> into memref<64xf32>
  %x = memref.load %v[%c0] : memref<8xf32, strided<[1], offset: 8>>
  memref.dealloc %n : memref<64xf16>
  return %w, %x : memref<64xf32>, f32
}

// -----

// A collective on the argument is still in flight.
// CHECK-LABEL: func.func @in_flight(
// CHECK: %[[W:.*]] = memref.alloc() : memref<64xf32>
// CHECK: ddp.buffer.wait
// CHECK: return %[[W]]
func.func @in_flight(%g: memref<64xf32>, %h: memref<64xf16>) -> memref<64xf32> attributes {ddp.donate_arguments} {
  %r = ddp.buffer.allreduce_start mean %g : memref<64xf32> -> !ddp.request<memref<64xf32>>
  %w = memref.alloc() : memref<64xf32>
  ddp.buffer.cast %h into %w : memref<64xf16> into memref<64xf32>
  ddp.buffer.wait %r : !ddp.request<memref<64xf32>>
  return %w : memref<64xf32>
}

// -----

// Result 0 takes argument 0's buffer or none: argument 1 has its type but
// is another result's destination for a caller that updates in place.
// CHECK-LABEL: func.func @other_index(
// CHECK: %[[W:.*]] = memref.alloc() : memref<64xf32>
// CHECK: return %[[W]]
func.func @other_index(%f: memref<64xf16>, %g: memref<64xf32>) -> memref<64xf32> attributes {ddp.donate_arguments} {
  %w = memref.alloc() : memref<64xf32>
  ddp.buffer.cast %f into %w : memref<64xf16> into memref<64xf32>
  return %w : memref<64xf32>
}

// -----

// A buffer returned twice keeps its own memory (no two results share an
// argument's buffer); the argument returned as it is is not reused either.
// CHECK-LABEL: func.func @returned_twice(
// CHECK: %[[W:.*]] = memref.alloc() : memref<64xf32>
// CHECK: return %[[W]], %[[W]]
func.func @returned_twice(%g: memref<64xf32>, %h: memref<64xf32>) -> (memref<64xf32>, memref<64xf32>) attributes {ddp.donate_arguments} {
  %n = memref.alloc() : memref<64xf16>
  ddp.buffer.cast %g into %n : memref<64xf32> into memref<64xf16>
  %w = memref.alloc() : memref<64xf32>
  ddp.buffer.cast %n into %w : memref<64xf16> into memref<64xf32>
  memref.dealloc %n : memref<64xf16>
  return %w, %w : memref<64xf32>, memref<64xf32>
}

// -----

// A different element type or shape is not the argument's buffer; the
// second result is.
// CHECK-LABEL: func.func @types(
// CHECK-SAME: %{{[^:]*}}: memref<64xf32>, %[[H:[^:]*]]: memref<32xf32>
// CHECK: %[[W:.*]] = memref.alloc() : memref<64xf64>
// CHECK: return %[[W]], %[[H]]
func.func @types(%g: memref<64xf32>, %h: memref<32xf32>) -> (memref<64xf64>, memref<32xf32>) attributes {ddp.donate_arguments} {
  %w = memref.alloc() : memref<64xf64>
  ddp.buffer.cast %g into %w : memref<64xf32> into memref<64xf64>
  %n = memref.alloc() : memref<32xf16>
  ddp.buffer.cast %h into %n : memref<32xf32> into memref<32xf16>
  %v = memref.alloc() : memref<32xf32>
  ddp.buffer.cast %n into %v : memref<32xf16> into memref<32xf32>
  memref.dealloc %n : memref<32xf16>
  return %w, %v : memref<64xf64>, memref<32xf32>
}
