// RUN: ddp-opt %s --split-input-file --ddp-map-loops-to-gpu | FileCheck %s
// RUN: not ddp-opt %s --ddp-map-loops-to-gpu=block-size=2048 -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BLOCK
// BLOCK: error: ddp-map-loops-to-gpu: block-size must be in [1, 1024], got 2048

// A parallel loop: one thread per iteration, 256 a block, the grid rounded
// up, the linear index guarded and split into the loop's indices (the last
// one fastest), each offset by its lower bound and scaled by its step.
// CHECK-LABEL: func.func @parallel(
// CHECK-SAME:    %[[A:.*]]: memref<?x8xf32>, %[[N:.*]]: index
// CHECK-NOT:     scf.parallel
// CHECK:         %[[ROWS:.*]] = arith.maxsi
// CHECK:         %[[COLS:.*]] = arith.maxsi
// CHECK:         %[[TOTAL:.*]] = arith.muli %[[ROWS]], %[[COLS]]
// CHECK:         %[[C256:.*]] = arith.constant 256 : index
// CHECK:         %[[ROUNDED:.*]] = arith.addi %[[TOTAL]]
// CHECK:         %[[GRID:.*]] = arith.divui %[[ROUNDED]], %[[C256]]
// CHECK:         gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[GRID]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C256]],
// CHECK:           %[[BASE:.*]] = arith.muli %[[BX]], %[[C256]]
// CHECK:           %[[ID:.*]] = arith.addi %[[BASE]], %[[TX]]
// CHECK:           %[[IN:.*]] = arith.cmpi ult, %[[ID]], %[[TOTAL]]
// CHECK:           scf.if %[[IN]] {
// CHECK:             %[[J:.*]] = arith.remui %[[ID]], %[[COLS]]
// CHECK:             %[[I:.*]] = arith.divui %[[ID]], %[[COLS]]
// CHECK:             %[[IS:.*]] = arith.muli %[[I]], %{{.*}}
// CHECK:             %[[IV0:.*]] = arith.addi %{{.*}}, %[[IS]]
// CHECK:             %[[JS:.*]] = arith.muli %[[J]], %{{.*}}
// CHECK:             %[[IV1:.*]] = arith.addi %{{.*}}, %[[JS]]
// CHECK:             %[[X:.*]] = memref.load %[[A]][%[[IV0]], %[[IV1]]]
// CHECK:             math.exp %[[X]]
// CHECK:             memref.store
// CHECK:           gpu.terminator
func.func @parallel(%a: memref<?x8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i, %j) = (%c1, %c0) to (%n, %c8) step (%c1, %c2) {
    %x = memref.load %a[%i, %j] : memref<?x8xf32>
    %y = math.exp %x : f32
    memref.store %y, %a[%i, %j] : memref<?x8xf32>
    scf.reduce
  }
  return
}

// -----

// A copy of any layout: one thread per element.
// CHECK-LABEL: func.func @copy(
// CHECK-NOT:     memref.copy
// CHECK:         %[[ROWS:.*]] = memref.dim %{{.*}}, %c0
// CHECK:         %[[COLS:.*]] = memref.dim %{{.*}}, %c1
// CHECK:         gpu.launch
// CHECK:           scf.if
// CHECK:             %[[X:.*]] = memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<5x3xf32, strided<[3, 1], offset: 108>>
// CHECK:             memref.store %[[X]], %{{.*}}[%{{.*}}, %{{.*}}] : memref<5x3xf32>
func.func @copy(%a: memref<5x3xf32, strided<[3, 1], offset: 108>>, %b: memref<5x3xf32>) {
  memref.copy %a, %b : memref<5x3xf32, strided<[3, 1], offset: 108>> to memref<5x3xf32>
  return
}

// -----

// A reduction and the store of its initial value: one kernel of one thread
// that runs them as written (the CPU's order, the CPU's bits). The scalar
// arithmetic between them stays on the host, before the launch; the load
// of the result stays too (the host passes it on).
// CHECK-LABEL: func.func @reduction(
// CHECK:         %[[SCALE:.*]] = arith.mulf
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %[[ONE:.*]], {{.*}} = %[[ONE]], {{.*}} = %[[ONE]]) threads({{.*}}) in ({{.*}} = %[[ONE]], {{.*}} = %[[ONE]], {{.*}} = %[[ONE]])
// CHECK-NEXT:      memref.store %{{.*}}, %[[ACC:.*]][] : memref<f32>
// CHECK-NEXT:      scf.for
// CHECK:             memref.load %[[ACC]][]
// CHECK:             arith.mulf %{{.*}}, %[[SCALE]]
// CHECK:           gpu.terminator
// CHECK:         memref.load %[[ACC]][]
// CHECK-NOT:     gpu.launch
// CHECK:         return
func.func @reduction(%a: memref<64xf32>, %acc: memref<f32>, %s: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  memref.store %zero, %acc[] : memref<f32>
  %scale = arith.mulf %s, %s : f32
  scf.for %i = %c0 to %c64 step %c1 {
    %x = memref.load %a[%i] : memref<64xf32>
    %sum = memref.load %acc[] : memref<f32>
    %y = arith.mulf %x, %scale : f32
    %z = arith.addf %sum, %y : f32
    memref.store %z, %acc[] : memref<f32>
  }
  %r = memref.load %acc[] : memref<f32>
  return %r : f32
}

// -----

// Runtime calls stay on the host with the control flow around them; the
// loops inside that control flow become kernels. A loop that allocates, or
// yields a value, stays on the host, as does the deallocation's
// bookkeeping (index and i1 buffers).
// CHECK-LABEL: func.func @host(
// CHECK:         scf.if
// CHECK-NEXT:      ddp.buffer.allreduce
// CHECK:           gpu.launch
// CHECK:             scf.if
// CHECK:               memref.store
// CHECK:         scf.for
// CHECK:           memref.alloc
// CHECK:         scf.for {{.*}} iter_args
// CHECK:         memref.store %{{.*}} : memref<2xindex>
// CHECK-NOT:     gpu.launch
// CHECK:         return
func.func @host(%a: memref<64xf32>, %flag: i1, %p: index, %book: memref<2xindex>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  scf.if %flag {
    ddp.buffer.allreduce sum %a : memref<64xf32>
    scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
      memref.store %zero, %a[%i] : memref<64xf32>
      scf.reduce
    }
  }
  scf.for %i = %c0 to %c64 step %c1 {
    %t = memref.alloc() : memref<4xf32>
    memref.store %zero, %t[%c0] : memref<4xf32>
    %x = memref.load %t[%c0] : memref<4xf32>
    memref.store %x, %a[%i] : memref<64xf32>
    memref.dealloc %t : memref<4xf32>
  }
  %r = scf.for %i = %c0 to %c64 step %c1 iter_args(%s = %zero) -> f32 {
    %x = memref.load %a[%i] : memref<64xf32>
    %y = arith.addf %s, %x : f32
    scf.yield %y : f32
  }
  memref.store %p, %book[%c0] : memref<2xindex>
  return %r : f32
}


// -----

// Host memory the device cannot address (the host's stack, a global) stays
// with the host (the store of what the host read goes to the device), and
// so does a loop around a parallel loop (a kernel of one thread runs its
// loops in order): the parallel loop inside becomes the kernel.
// CHECK-LABEL: func.func @host_memory(
// CHECK:         memref.copy %{{.*}}, %[[STACK:.*]] : memref<4xf32> to memref<4xf32>
// CHECK:         scf.for
// CHECK-NEXT:      memref.load %{{.*}} : memref<4xf32>
// CHECK:           gpu.launch
// CHECK-NEXT:        memref.store
// CHECK:         scf.for
// CHECK-NOT:       memref.load
// CHECK:           gpu.launch
// CHECK:             memref.load
// CHECK:         return
memref.global "private" constant @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
func.func @host_memory(%a: memref<4xf32>, %b: memref<4x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %stack = memref.alloca() : memref<4xf32>
  memref.copy %a, %stack : memref<4xf32> to memref<4xf32>
  %t = memref.get_global @table : memref<4xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %t[%i] : memref<4xf32>
    memref.store %x, %a[%i] : memref<4xf32>
  }
  scf.for %i = %c0 to %c4 step %c1 {
    scf.parallel (%j) = (%c0) to (%c4) step (%c1) {
      %x = memref.load %a[%j] : memref<4xf32>
      memref.store %x, %b[%i, %j] : memref<4x4xf32>
      scf.reduce
    }
  }
  return
}

// -----

// A scalar the host would read only to store what it computes from it (a
// loss divided by the batch, stored as the step's result) joins the kernel
// of the reduction before it: the host reads nothing, and does not wait.
// A scalar the host needs (returned) is read on the host.
// CHECK-LABEL: func.func @loss(
// CHECK:         gpu.launch
// CHECK:           scf.for
// CHECK:             memref.store %{{.*}}, %[[ACC:.*]][] : memref<f32>
// CHECK-NEXT:      }
// CHECK-NEXT:      %[[SUM:.*]] = memref.load %[[ACC]][] : memref<f32>
// CHECK-NEXT:      %[[NEG:.*]] = arith.negf %[[SUM]]
// CHECK-NEXT:      %[[MEAN:.*]] = arith.divf %[[NEG]]
// CHECK-NEXT:      memref.store %[[MEAN]], %{{.*}}[] : memref<f32>
// CHECK-NEXT:      gpu.terminator
// CHECK:         %[[R:.*]] = memref.load %[[ACC]][]
// CHECK-NEXT:    return %[[R]]
func.func @loss(%a: memref<64xf32>, %acc: memref<f32>, %out: memref<f32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 64.0 : f32
  memref.store %zero, %acc[] : memref<f32>
  scf.for %i = %c0 to %c64 step %c1 {
    %x = memref.load %a[%i] : memref<64xf32>
    %sum = memref.load %acc[] : memref<f32>
    %z = arith.addf %sum, %x : f32
    memref.store %z, %acc[] : memref<f32>
  }
  %total = memref.load %acc[] : memref<f32>
  %neg = arith.negf %total : f32
  %mean = arith.divf %neg, %n : f32
  memref.store %mean, %out[] : memref<f32>
  %r = memref.load %acc[] : memref<f32>
  return %r : f32
}

// -----

// A parallel loop between the load and the store it feeds is a launch of
// its own: the load stays on the host (one kernel cannot hold both).
// CHECK-LABEL: func.func @split_chain(
// CHECK:         %[[V:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK:         gpu.launch
// CHECK:         gpu.launch
// CHECK-NEXT:      memref.store %[[V]]
func.func @split_chain(%acc: memref<f32>, %a: memref<64xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  %v = memref.load %acc[] : memref<f32>
  scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
    memref.store %zero, %a[%i] : memref<64xf32>
    scf.reduce
  }
  memref.store %v, %out[] : memref<f32>
  return
}
