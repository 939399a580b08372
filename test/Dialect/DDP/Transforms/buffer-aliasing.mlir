// The aliasing analyses of the ddp bufferization models
// (ddp/Dialect/DDP/Transforms/BufferAliasing.h), reported by
// test-ddp-buffer-aliasing: whether ddp.allreduce_start reduces a gradient in
// its own buffer, and whether ddp.state_load returns the state's own buffer.
// RUN: ddp-opt %s --test-ddp-buffer-aliasing -verify-diagnostics -o /dev/null

ddp.state @e : tensor<4x4xf32>
ddp.state @other : tensor<4x4xf32>

// allreduce_start: a function argument whose other use is in the other
// branch of the warm-up scf.if (upstream insideMutuallyExclusiveRegions).
func.func @arg_exclusive(%g: tensor<8xf32>, %c: i1) -> tensor<8xf32> {
  %r = scf.if %c -> tensor<8xf32> {
    %a = ddp.allreduce mean %g : tensor<8xf32>
    scf.yield %a : tensor<8xf32>
  } else {
    // expected-remark @below {{input #0 is reduced in its own buffer}}
    %h = ddp.allreduce_start mean %g : tensor<8xf32>
    %w = ddp.wait %h : !ddp.request<tensor<8xf32>>
    scf.yield %w : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// The old value is read after the start: reduce a copy.
func.func @arg_read_later(%g: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-remark @below {{input #0 is reduced in a copy}}
  %h = ddp.allreduce_start mean %g : tensor<8xf32>
  %w = ddp.wait %h : !ddp.request<tensor<8xf32>>
  %s = ddp.scale %g by world_size : tensor<8xf32>
  return %w, %s : tensor<8xf32>, tensor<8xf32>
}

// A fresh allocation written only by ddp ops before the start (as One-Shot
// leaves a bufferized producer).
func.func @fresh(%x: memref<8xf32>) -> tensor<8xf32> {
  %m = memref.alloc() : memref<8xf32>
  ddp.buffer.copy %x into %m : memref<8xf32>
  %t = bufferization.to_tensor %m : memref<8xf32> to tensor<8xf32>
  // expected-remark @below {{input #0 is reduced in its own buffer}}
  %h = ddp.allreduce_start mean %t : tensor<8xf32>
  %w = ddp.wait %h : !ddp.request<tensor<8xf32>>
  return %w : tensor<8xf32>
}

// A function argument seen through to_tensor.
func.func @not_fresh(%x: memref<8xf32>) -> tensor<8xf32> {
  %t = bufferization.to_tensor %x : memref<8xf32> to tensor<8xf32>
  // expected-remark @below {{input #0 is reduced in its own buffer}}
  %h = ddp.allreduce_start mean %t : tensor<8xf32>
  %w = ddp.wait %h : !ddp.request<tensor<8xf32>>
  return %w : tensor<8xf32>
}

// state_load: a store of the state follows and nothing uses the loaded
// value after it: the state's own buffer.
func.func @stored(%g: tensor<4x4xf32>) {
  // expected-remark @below {{returns the state's own buffer}}
  %e = ddp.state_load @e : tensor<4x4xf32>
  %n = ddp.scale %e by world_size : tensor<4x4xf32>
  // expected-note @below {{the next store}}
  ddp.state_store %n, @e : tensor<4x4xf32>
  return
}

// The loaded value is used after the store: a copy.
func.func @used_after_store(%g: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-remark @below {{returns a copy}}
  %e = ddp.state_load @e : tensor<4x4xf32>
  %n = ddp.scale %e by world_size : tensor<4x4xf32>
  // expected-note @below {{the next store}}
  ddp.state_store %n, @e : tensor<4x4xf32>
  return %e : tensor<4x4xf32>
}

// No store follows: a copy.
func.func @never_stored() -> tensor<4x4xf32> {
  // expected-remark @below {{returns a copy}}
  %e = ddp.state_load @e : tensor<4x4xf32>
  return %e : tensor<4x4xf32>
}

// A store in a loop between the load and the next store: a copy.
func.func @store_in_loop(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-remark @below {{returns a copy}}
  %e = ddp.state_load @e : tensor<4x4xf32>
  scf.for %i = %c0 to %n step %c1 {
    ddp.state_store %e, @e : tensor<4x4xf32>
  }
  ddp.state_store %e, @e : tensor<4x4xf32>
  return
}

// Another load of the state before the store: the first is a copy.
func.func @other_load_between() {
  // expected-remark @below {{returns a copy}}
  %e = ddp.state_load @e : tensor<4x4xf32>
  // expected-remark @below {{returns the state's own buffer}}
  %f = ddp.state_load @e : tensor<4x4xf32>
  // expected-note @below {{the next store}}
  ddp.state_store %e, @e : tensor<4x4xf32>
  return
}

// Load and store in the same loop iteration.
func.func @loop_around_load(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    // expected-remark @below {{returns the state's own buffer}}
    %e = ddp.state_load @e : tensor<4x4xf32>
    %s = ddp.scale %e by world_size : tensor<4x4xf32>
    // expected-note @below {{the next store}}
    ddp.state_store %s, @e : tensor<4x4xf32>
  }
  return
}
