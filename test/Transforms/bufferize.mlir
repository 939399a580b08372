// RUN: ddp-opt %s -split-input-file --ddp-fuse-kernels \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   | FileCheck %s

// PowerSGD as insert-powersgd writes it: collectives in place on the
// arguments, the error state updated in place in its runtime buffer, the
// gradient decompressed in place, Q orthogonalized in its state buffer and
// the new Q copied in, P and Q in fresh buffers.

ddp.state @q : tensor<32x2xf32>
ddp.state @e : tensor<64x32xf32>
// CHECK-LABEL: func.func @powersgd(
// CHECK-SAME: %[[G:.*]]: memref<64x32xf32>, %[[B:.*]]: memref<32xf32>
func.func @powersgd(%g: tensor<64x32xf32>, %b: tensor<32xf32>) -> (tensor<64x32xf32>, tensor<32xf32>) {
  // CHECK: %[[REQ:.*]] = ddp.buffer.allreduce_start mean %[[B]] role uncompressed : memref<32xf32> -> !ddp.request<memref<32xf32>>
  %h = ddp.allreduce_start mean %b role uncompressed : tensor<32xf32>
  // CHECK: %[[Q:.*]] = ddp.buffer.state @q : memref<32x2xf32>
  // CHECK: ddp.buffer.orthogonalize %[[Q]]
  %q0 = ddp.state_load @q : tensor<32x2xf32>
  %q = ddp.orthogonalize %q0 : tensor<32x2xf32>
  // CHECK: %[[E:.*]] = ddp.buffer.state @e : memref<64x32xf32>
  %e = ddp.state_load @e : tensor<64x32xf32>
  %m = ddp.add_residual %g plus %e : tensor<64x32xf32>
  // CHECK: %[[P:.*]] = memref.alloc() {{.*}} : memref<64x2xf32>
  // CHECK: ddp.buffer.project %[[G]] plus %[[E]] times %[[Q]] into %[[P]]
  %p0 = ddp.project %m times %q : tensor<64x32xf32> times tensor<32x2xf32>
  // CHECK: ddp.buffer.allreduce sum %[[P]] role powersgd_p
  %p1 = ddp.allreduce sum %p0 role powersgd_p : tensor<64x2xf32>
  %p = ddp.orthogonalize %p1 : tensor<64x2xf32>
  // CHECK: %[[NQ:.*]] = memref.alloc() {{.*}} : memref<32x2xf32>
  // CHECK: ddp.buffer.project transposed %[[G]] plus %[[E]] times %[[P]] into %[[NQ]]
  %nq0 = ddp.backproject %m times %p : tensor<64x32xf32> times tensor<64x2xf32>
  %nq = ddp.allreduce mean %nq0 role powersgd_q : tensor<32x2xf32>
  // CHECK: ddp.buffer.reconstruct %[[P]] times %[[NQ]] from %[[G]] plus %[[E]] into %[[G]]
  %mh = ddp.reconstruct %p times %nq : tensor<64x2xf32> times tensor<32x2xf32>
  %ne = ddp.update_residual %m minus %mh : tensor<64x32xf32>
  // The new error is already in @e's buffer: no copy for it.
  // CHECK-NOT: ddp.buffer.state @e
  // CHECK: %[[QS:.*]] = ddp.buffer.state @q : memref<32x2xf32>
  // CHECK-NEXT: ddp.buffer.copy %[[NQ]] into %[[QS]]
  ddp.state_store %ne, @e : tensor<64x32xf32>
  ddp.state_store %nq, @q : tensor<32x2xf32>
  // CHECK: ddp.buffer.wait %[[REQ]]
  %r = ddp.wait %h : !ddp.request<tensor<32xf32>>
  // CHECK: return %[[G]], %[[B]]
  return %mh, %r : tensor<64x32xf32>, tensor<32xf32>
}

// -----

// A state read after it was stored must not see the new value: the load
// copies the state buffer instead of aliasing it.
ddp.state @s : tensor<4xf32>
// CHECK-LABEL: func.func @read_after_store
func.func @read_after_store(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: %[[S:.*]] = ddp.buffer.state @s : memref<4xf32>
  // CHECK: %[[OLD:.*]] = memref.alloc() {{.*}} : memref<4xf32>
  // CHECK: ddp.buffer.copy %[[S]] into %[[OLD]]
  %old = ddp.state_load @s : tensor<4xf32>
  ddp.state_store %x, @s : tensor<4xf32>
  %r = ddp.allreduce sum %old : tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// An argument read again after an in-place allreduce is copied first.
// CHECK-LABEL: func.func @reuse(
// CHECK-SAME: %[[X:.*]]: memref<8xf32>
func.func @reuse(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // CHECK: %[[C:.*]] = memref.alloc
  // CHECK: memref.copy %[[X]], %[[C]]
  // CHECK: ddp.buffer.allreduce sum %[[C]]
  %r = ddp.allreduce sum %x : tensor<8xf32>
  %s = ddp.scale %x by world_size : tensor<8xf32>
  return %r, %s : tensor<8xf32>, tensor<8xf32>
}
