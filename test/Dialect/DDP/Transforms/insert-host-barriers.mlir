// RUN: ddp-opt %s --split-input-file --ddp-insert-host-barriers | FileCheck %s

// Runtime calls in a row need no barrier between them; the first host op
// that touches memory after them waits; scalar arithmetic does not.
// CHECK-LABEL: func.func @runs(
// CHECK-NEXT:    ddp.buffer.scale
// CHECK-NEXT:    ddp.buffer.allreduce
// CHECK-NEXT:    arith.addi
// CHECK-NEXT:    ddp.buffer.host_barrier
// CHECK-NEXT:    memref.load
// CHECK-NEXT:    memref.store
// CHECK-NEXT:    return
func.func @runs(%a: memref<4xf32>, %i: index) {
  ddp.buffer.scale %a by inverse_world_size : memref<4xf32>
  ddp.buffer.allreduce sum %a : memref<4xf32>
  %j = arith.addi %i, %i : index
  %x = memref.load %a[%j] : memref<4xf32>
  memref.store %x, %a[%i] : memref<4xf32>
  return
}

// -----

// A started collective keeps running through the host code after it (the
// barrier waits for the compute stream only); the return waits for what
// the calls at the end left.
// CHECK-LABEL: func.func @started(
// CHECK-NEXT:    %[[R:.*]] = ddp.buffer.allreduce_start
// CHECK-NEXT:    ddp.buffer.host_barrier
// CHECK-NEXT:    memref.load
// CHECK-NEXT:    memref.store
// CHECK-NEXT:    ddp.buffer.wait %[[R]]
// CHECK-NEXT:    ddp.buffer.host_barrier
// CHECK-NEXT:    return
func.func @started(%a: memref<4xf32>, %b: memref<4xf32>, %i: index) {
  %r = ddp.buffer.allreduce_start mean %a : memref<4xf32> -> !ddp.request<memref<4xf32>>
  %x = memref.load %b[%i] : memref<4xf32>
  memref.store %x, %b[%i] : memref<4xf32>
  ddp.buffer.wait %r : !ddp.request<memref<4xf32>>
  return
}

// -----

// A loop whose body calls the runtime: each iteration's host code waits for
// the calls of the iteration before; after the loop the device is busy.
// An scf.if whose branches only call the runtime needs no barrier before it.
// CHECK-LABEL: func.func @loop(
// CHECK:         scf.for
// CHECK-NEXT:      ddp.buffer.host_barrier
// CHECK-NEXT:      memref.load
// CHECK-NEXT:      memref.store
// CHECK-NEXT:      ddp.buffer.allreduce
// CHECK-NEXT:    }
// CHECK-NEXT:    scf.if
// CHECK-NEXT:      ddp.buffer.scale
// CHECK-NEXT:    }
// CHECK-NEXT:    ddp.buffer.host_barrier
// CHECK-NEXT:    memref.dealloc
func.func @loop(%a: memref<4xf32>, %n: index, %c: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<4xf32>
    memref.store %x, %a[%c0] : memref<4xf32>
    ddp.buffer.allreduce sum %a : memref<4xf32>
  }
  scf.if %c {
    ddp.buffer.scale %a by inverse_world_size : memref<4xf32>
  }
  memref.dealloc %a : memref<4xf32>
  return
}

// -----

// No runtime call, no barrier.
// CHECK-LABEL: func.func @host_only(
// CHECK-NOT:     ddp.buffer.host_barrier
func.func @host_only(%a: memref<4xf32>, %i: index) {
  %x = memref.load %a[%i] : memref<4xf32>
  memref.store %x, %a[%i] : memref<4xf32>
  return
}

// -----

// A kernel launch (target=cuda) is enqueued like a runtime call: the host
// waits before it reads what the kernel wrote, and not between launches.
// CHECK-LABEL: func.func @launches(
// CHECK:         gpu.launch_func @k::@k
// CHECK-NEXT:    gpu.launch_func @k::@k
// CHECK-NEXT:    ddp.buffer.host_barrier
// CHECK-NEXT:    memref.load
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @k(%a: memref<4xf32>) kernel {
      gpu.return
    }
  }
  func.func @launches(%a: memref<4xf32>) -> f32 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    %x = memref.load %a[%c0] : memref<4xf32>
    return %x : f32
  }
}

// -----

// A free of device memory (ddp-device-allocations') is enqueued after the
// kernels too: no wait before it; the free of a buffer the host can read
// waits; the return waits for the rest.
// CHECK-LABEL: func.func @frees(
// CHECK:         gpu.launch_func @k::@k
// CHECK-NEXT:    memref.dealloc %{{.*}} {ddp.device_memory}
// CHECK-NEXT:    ddp.buffer.host_barrier
// CHECK-NEXT:    memref.dealloc %{{.*}} : memref<4xf32>
// CHECK-NEXT:    memref.dealloc %{{.*}} {ddp.device_memory}
// CHECK-NEXT:    ddp.buffer.host_barrier
// CHECK-NEXT:    return
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @k(%a: memref<4xf32>) kernel {
      gpu.return
    }
  }
  func.func @frees() {
    %c1 = arith.constant 1 : index
    %device = memref.alloc() {ddp.device_memory} : memref<4xf32>
    %shared = memref.alloc() : memref<4xf32>
    %other = memref.alloc() {ddp.device_memory} : memref<4xf32>
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%device : memref<4xf32>)
    memref.dealloc %device {ddp.device_memory} : memref<4xf32>
    memref.dealloc %shared : memref<4xf32>
    memref.dealloc %other {ddp.device_memory} : memref<4xf32>
    return
  }
}
