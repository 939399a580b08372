// RUN: ddp-opt %s | ddp-opt | FileCheck %s
// RUN: ddp-opt %s --mlir-print-op-generic | ddp-opt | FileCheck %s

// The buffer forms of the ddp ops round-trip.

ddp.state @ddp.step.f : i64
ddp.state @ddp.q.f.0 : tensor<32x2xf32>

// CHECK-LABEL: func.func @buffers
func.func @buffers(%g: memref<64x32xf32>, %e: memref<64x32xf32>,
                   %b: memref<32xf32>, %h: memref<32xf16>,
                   %p: memref<64x2xf32>, %step: i64,
                   %s: memref<8xf32, strided<[1], offset: ?>>) {
  // CHECK: ddp.buffer.allreduce mean %{{.*}}, %{{.*}} role uncompressed : memref<64x32xf32>, memref<32xf32>
  ddp.buffer.allreduce mean %g, %b role uncompressed : memref<64x32xf32>, memref<32xf32>
  // CHECK: ddp.buffer.allreduce sum %{{.*}} : memref<8xf32, strided<[1], offset: ?>>
  ddp.buffer.allreduce sum %s : memref<8xf32, strided<[1], offset: ?>>
  // CHECK: %[[R:.*]] = ddp.buffer.allreduce_start mean %{{.*}} : memref<32xf32> -> !ddp.request<memref<32xf32>>
  %r = ddp.buffer.allreduce_start mean %b : memref<32xf32> -> !ddp.request<memref<32xf32>>
  // CHECK: ddp.buffer.wait %[[R]] : !ddp.request<memref<32xf32>>
  ddp.buffer.wait %r : !ddp.request<memref<32xf32>>
  // CHECK: ddp.buffer.scale %{{.*}} by inverse_world_size : memref<32xf32>
  ddp.buffer.scale %b by inverse_world_size : memref<32xf32>
  // CHECK: ddp.buffer.cast %{{.*}} scaled by inverse_world_size into %{{.*}} : memref<32xf32> into memref<32xf16>
  ddp.buffer.cast %b scaled by inverse_world_size into %h : memref<32xf32> into memref<32xf16>
  %q = ddp.buffer.state @ddp.q.f.0 : memref<32x2xf32>
  // CHECK: ddp.buffer.project %{{.*}} plus %{{.*}} times %{{.*}} into %{{.*}} : memref<64x32xf32> plus memref<64x32xf32> times memref<32x2xf32> into memref<64x2xf32>
  ddp.buffer.project %g plus %e times %q into %p : memref<64x32xf32> plus memref<64x32xf32> times memref<32x2xf32> into memref<64x2xf32>
  // CHECK: ddp.buffer.project transposed %{{.*}} times %{{.*}} into %{{.*}} : memref<64x32xf32> times memref<64x2xf32> into memref<32x2xf32>
  ddp.buffer.project transposed %g times %p into %q : memref<64x32xf32> times memref<64x2xf32> into memref<32x2xf32>
  // CHECK: ddp.buffer.orthogonalize %{{.*}} {epsilon = 1.000000e-08 : f64} : memref<64x2xf32>
  ddp.buffer.orthogonalize %p {epsilon = 1.0e-8 : f64} : memref<64x2xf32>
  // CHECK: ddp.buffer.reconstruct %{{.*}} times %{{.*}} from %{{.*}} plus %{{.*}} into %{{.*}} : memref<64x2xf32> times memref<32x2xf32> from memref<64x32xf32> plus memref<64x32xf32> into memref<64x32xf32>
  ddp.buffer.reconstruct %p times %q from %g plus %e into %g : memref<64x2xf32> times memref<32x2xf32> from memref<64x32xf32> plus memref<64x32xf32> into memref<64x32xf32>
  // CHECK: ddp.buffer.reconstruct %{{.*}} times %{{.*}} into %{{.*}} : memref<64x2xf32> times memref<32x2xf32> into memref<64x32xf32>
  ddp.buffer.reconstruct %p times %q into %e : memref<64x2xf32> times memref<32x2xf32> into memref<64x32xf32>
  // CHECK: ddp.buffer.random_normal %{{.*}} seed 7 stream 3 into %{{.*}} : memref<32x2xf32>
  ddp.buffer.random_normal %step seed 7 stream 3 into %q : memref<32x2xf32>
  // CHECK: ddp.buffer.state @ddp.step.f : memref<i64>
  %c = ddp.buffer.state @ddp.step.f : memref<i64>
  // CHECK: ddp.buffer.copy %{{.*}} into %{{.*}} : memref<64x32xf32>
  ddp.buffer.copy %g into %e : memref<64x32xf32>
  return
}

// CHECK-LABEL: func @buffer_top_k
func.func @buffer_top_k(%m: memref<2112xf32>, %v: memref<21xf32>, %i: memref<21xi32>) {
  // CHECK: ddp.buffer.top_k %{{.*}} into %{{.*}}, %{{.*}} : memref<2112xf32> into memref<21xf32>, memref<21xi32>
  ddp.buffer.top_k %m into %v, %i : memref<2112xf32> into memref<21xf32>, memref<21xi32>
  return
}

// CHECK-LABEL: func @buffer_inspect
func.func @buffer_inspect(%q: memref<32x2xf32>) -> (i1, i1) {
  // CHECK: %{{.*}}, %{{.*}} = ddp.buffer.inspect %{{.*}} : memref<32x2xf32>
  %finite, %nonzero = ddp.buffer.inspect %q : memref<32x2xf32>
  return %finite, %nonzero : i1, i1
}
