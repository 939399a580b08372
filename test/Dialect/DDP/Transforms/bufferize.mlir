// RUN: ddp-opt %s -split-input-file --ddp-fuse-kernels \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   | FileCheck %s

// PowerSGD as insert-powersgd writes it: collectives in place on the
// arguments, the error state updated in place in its runtime buffer, the
// gradient decompressed in place, Q orthogonalized in its state buffer and
// the new Q copied in, P and Q in fresh buffers. (The caller donates its
// arguments, as ddp-run does, so the uncompressed allreduce_start reduces
// the argument itself.)

ddp.state @q : tensor<32x2xf32>
ddp.state @e : tensor<64x32xf32>
// CHECK-LABEL: func.func @powersgd(
// CHECK-SAME: %[[G:.*]]: memref<64x32xf32>, %[[B:.*]]: memref<32xf32>
func.func @powersgd(%g: tensor<64x32xf32>, %b: tensor<32xf32>) -> (tensor<64x32xf32>, tensor<32xf32>) attributes {ddp.donate_arguments} {
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
  // CHECK: ddp.buffer.allreduce sum %[[P]] role compressed
  %p1 = ddp.allreduce sum %p0 role compressed : tensor<64x2xf32>
  %p = ddp.orthogonalize %p1 : tensor<64x2xf32>
  // CHECK: %[[NQ:.*]] = memref.alloc() {{.*}} : memref<32x2xf32>
  // CHECK: ddp.buffer.project transposed %[[G]] plus %[[E]] times %[[P]] into %[[NQ]]
  %nq0 = ddp.backproject %m times %p : tensor<64x32xf32> times tensor<64x2xf32>
  %nq = ddp.allreduce mean %nq0 role compressed : tensor<32x2xf32>
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

// -----

// A buffer written after allreduce_start (without being read) must not be
// the one in flight: the start reduces a copy, and wait returns the copy.
// CHECK-LABEL: func.func @write_after_start(
// CHECK-SAME: %[[G:.*]]: memref<4xf32>
func.func @write_after_start(%g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // CHECK: %[[C:.*]] = memref.alloc
  // CHECK: ddp.buffer.copy %[[G]] into %[[C]]
  // CHECK: %[[H:.*]] = ddp.buffer.allreduce_start sum %[[C]]
  %h = ddp.allreduce_start sum %g : tensor<4xf32>
  %c = arith.constant 0.0 : f32
  // CHECK: linalg.fill {{.*}} outs(%[[G]]
  %z = linalg.fill ins(%c : f32) outs(%g : tensor<4xf32>) -> tensor<4xf32>
  // CHECK: ddp.buffer.wait %[[H]]
  // CHECK: return %[[C]], %[[G]]
  %r = ddp.wait %h : !ddp.request<tensor<4xf32>>
  return %r, %z : tensor<4xf32>, tensor<4xf32>
}

// -----

// A donated argument used only by the start (and in the other branch of
// the warm-up scf.if) is reduced in place.
// CHECK-LABEL: func.func @donated_start(
// CHECK-SAME: %[[G:.*]]: memref<4xf32>
func.func @donated_start(%g: tensor<4xf32>, %warm: i1) -> tensor<4xf32> attributes {ddp.donate_arguments} {
  %r = scf.if %warm -> tensor<4xf32> {
    %w = ddp.allreduce mean %g role warmup : tensor<4xf32>
    scf.yield %w : tensor<4xf32>
  } else {
    // CHECK-NOT: ddp.buffer.copy
    // CHECK: ddp.buffer.allreduce_start mean %[[G]]
    %h = ddp.allreduce_start mean %g role uncompressed : tensor<4xf32>
    %v = ddp.wait %h : !ddp.request<tensor<4xf32>>
    scf.yield %v : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Arguments are writable (the warm-up's allreduce reduces them in place), so
// an argument its caller did not donate is reduced in place by the start
// too: both branches leave the gradient in the argument's buffer, and the
// result's ownership is known when compiling (with a copy in one branch,
// buffer deallocation kept a run-time flag per gradient).
// CHECK-LABEL: func.func @argument_start(
// CHECK-SAME: %[[G:.*]]: memref<4xf32>
func.func @argument_start(%g: tensor<4xf32>, %warm: i1) -> tensor<4xf32> {
  %r = scf.if %warm -> tensor<4xf32> {
    %w = ddp.allreduce mean %g role warmup : tensor<4xf32>
    // CHECK: scf.yield %[[G]]
    scf.yield %w : tensor<4xf32>
  } else {
    // CHECK-NOT: memref.alloc
    // CHECK-NOT: copy
    // CHECK: %[[H:.*]] = ddp.buffer.allreduce_start mean %[[G]]
    %h = ddp.allreduce_start mean %g role uncompressed : tensor<4xf32>
    // CHECK: ddp.buffer.wait %[[H]]
    // CHECK-NEXT: scf.yield %[[G]]
    %v = ddp.wait %h : !ddp.request<tensor<4xf32>>
    scf.yield %v : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// An argument the caller keeps (not writable) or reads again is reduced in
// One-Shot's copy of it, and only in that one.
// CHECK-LABEL: func.func @kept_argument_start(
// CHECK-SAME: %[[G:.*]]: memref<4xf32>
func.func @kept_argument_start(%g: tensor<4xf32> {bufferization.writable = false}) -> tensor<4xf32> {
  // CHECK: %[[C:.*]] = memref.alloc
  // CHECK-NEXT: memref.copy %[[G]], %[[C]]
  // CHECK-NEXT: %[[H:.*]] = ddp.buffer.allreduce_start sum %[[C]]
  %h = ddp.allreduce_start sum %g : tensor<4xf32>
  // CHECK-NEXT: ddp.buffer.wait %[[H]]
  // CHECK-NEXT: return %[[C]]
  %r = ddp.wait %h : !ddp.request<tensor<4xf32>>
  return %r : tensor<4xf32>
}

// -----

// A caller in the module knows that the callee's start writes its argument,
// and passes a copy of a tensor it reads again.
// CHECK-LABEL: func.func @caller(
// CHECK-SAME: %[[G:.*]]: memref<4xf32>
func.func @caller(%g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // CHECK: %[[C:.*]] = memref.alloc
  // CHECK-NEXT: memref.copy %[[G]], %[[C]]
  // CHECK-NEXT: call @callee(%[[C]])
  %r = call @callee(%g) : (tensor<4xf32>) -> tensor<4xf32>
  // CHECK-NEXT: ddp.buffer.allreduce sum %[[G]]
  %s = ddp.allreduce sum %g : tensor<4xf32>
  return %r, %s : tensor<4xf32>, tensor<4xf32>
}
// CHECK-LABEL: func.func private @callee(
// CHECK-SAME: %[[A:.*]]: memref<4xf32>
func.func private @callee(%g: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NEXT: ddp.buffer.allreduce_start sum %[[A]]
  %h = ddp.allreduce_start sum %g : tensor<4xf32>
  %r = ddp.wait %h : !ddp.request<tensor<4xf32>>
  return %r : tensor<4xf32>
}

// -----

// The state is loaded in a loop and stored after it: every iteration must
// see the state as it was, not the previous iteration's in-place update.
// The load copies.
ddp.state @acc : tensor<4xf32>
// CHECK-LABEL: func.func @load_in_loop
func.func @load_in_loop(%x: tensor<4xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    // CHECK: %[[S:.*]] = ddp.buffer.state @acc
    // CHECK: ddp.buffer.copy %[[S]] into
    %e = ddp.state_load @acc : tensor<4xf32>
    %e2 = ddp.allreduce sum %e : tensor<4xf32>
  }
  ddp.state_store %x, @acc : tensor<4xf32>
  return
}

// -----

// A call between the load and the store could read the state: copy.
ddp.state @s : tensor<4xf32>
func.func private @peek() -> tensor<4xf32> {
  %v = ddp.state_load @s : tensor<4xf32>
  return %v : tensor<4xf32>
}
// CHECK-LABEL: func.func @call_between
func.func @call_between() -> tensor<4xf32> {
  // CHECK: %[[S:.*]] = ddp.buffer.state @s
  // CHECK: ddp.buffer.copy %[[S]] into
  %e = ddp.state_load @s : tensor<4xf32>
  %e2 = ddp.allreduce sum %e : tensor<4xf32>
  %v = func.call @peek() : () -> tensor<4xf32>
  ddp.state_store %e2, @s : tensor<4xf32>
  return %v : tensor<4xf32>
}

// -----

// Host code (linalg) reading the state would touch device memory on GPUs:
// the load copies through the runtime.
ddp.state @h : tensor<4xf32>
// CHECK-LABEL: func.func @host_reader
func.func @host_reader(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: %[[S:.*]] = ddp.buffer.state @h
  // CHECK: ddp.buffer.copy %[[S]] into
  %e = ddp.state_load @h : tensor<4xf32>
  %init = tensor.empty() : tensor<4xf32>
  %sum = linalg.add ins(%e, %x : tensor<4xf32>, tensor<4xf32>) outs(%init : tensor<4xf32>) -> tensor<4xf32>
  ddp.state_store %x, @h : tensor<4xf32>
  return %sum : tensor<4xf32>
}

// -----

// Only the ops between a load and the next store of its state matter: the
// first load copies, since the second load runs before that store and would
// see an in-place update; the second works in the state's own buffer.
ddp.state @s : tensor<4xf32>
ddp.state @t : tensor<4xf32>
// CHECK-LABEL: func.func @two_loads
func.func @two_loads() {
  // CHECK: %[[S:.*]] = ddp.buffer.state @s : memref<4xf32>
  // CHECK-NEXT: %[[A:.*]] = memref.alloc
  // CHECK-NEXT: ddp.buffer.copy %[[S]] into %[[A]]
  %a = ddp.state_load @s : tensor<4xf32>
  // CHECK-NEXT: %[[B:.*]] = ddp.buffer.state @s : memref<4xf32>
  %b = ddp.state_load @s : tensor<4xf32>
  // CHECK-NEXT: ddp.buffer.allreduce sum %[[A]]
  // CHECK-NEXT: ddp.buffer.allreduce sum %[[B]]
  %x = ddp.allreduce sum %a : tensor<4xf32>
  %y = ddp.allreduce sum %b : tensor<4xf32>
  // CHECK: ddp.buffer.copy %[[B]] into
  ddp.state_store %y, @t : tensor<4xf32>
  // CHECK: ddp.buffer.copy %[[A]] into
  ddp.state_store %x, @s : tensor<4xf32>
  return
}
