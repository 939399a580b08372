// RUN: ddp-opt %s --ddp-split-functions=max-ops=4 | FileCheck %s

// A function over max-ops nested ops becomes calls of private parts, in
// program order. Values used across a cut are arguments and results;
// constants stay first in the function and are rebuilt in each part; no cut
// lies where a stack allocation is live, so the alloca and its uses share a
// part.

// CHECK-LABEL: func.func @step(
// CHECK-SAME:      %[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>, %[[FLAG:.*]]: i1)
// CHECK:         %[[P0:.*]]:2 = call @step.part0(%[[A]], %[[B]], %[[FLAG]]) : (memref<4xf32>, memref<4xf32>, i1) -> (f32, memref<4xf32>)
// CHECK-NEXT:    call @step.part1(%[[P0]]#0, %[[P0]]#1) : (f32, memref<4xf32>) -> ()
// CHECK-NEXT:    %[[P2:.*]] = call @step.part2(%[[FLAG]]) : (i1) -> i1
// CHECK-NEXT:    return %[[P0]]#1, %[[P2]]

// Each part is marked: it frees only buffers the step allocated.
// CHECK-LABEL: func.func private @step.part0(
// CHECK-SAME:    attributes {ddp.part}
// CHECK:         arith.constant 0 : index
// CHECK:         memref.load
// CHECK:         memref.store
// CHECK:         scf.if
// CHECK:         return

// CHECK-LABEL: func.func private @step.part1(
// CHECK:         arith.constant 0 : index
// CHECK-NEXT:    memref.alloca()
// CHECK-NEXT:    memref.store
// CHECK-NEXT:    memref.load
// CHECK-NEXT:    memref.store
// CHECK-NEXT:    return

// CHECK-LABEL: func.func private @step.part2(
// CHECK-NEXT:    arith.xori
// CHECK-NEXT:    return
func.func @step(%a: memref<4xf32>, %b: memref<4xf32>, %flag: i1) -> (memref<4xf32>, i1) {
  %c0 = arith.constant 0 : index
  %x = memref.load %a[%c0] : memref<4xf32>
  %y = arith.addf %x, %x : f32
  memref.store %y, %b[%c0] : memref<4xf32>
  %r = scf.if %flag -> (memref<4xf32>) {
    scf.yield %a : memref<4xf32>
  } else {
    scf.yield %b : memref<4xf32>
  }
  %slot = memref.alloca() : memref<1xf32>
  memref.store %y, %slot[%c0] : memref<1xf32>
  %z = memref.load %slot[%c0] : memref<1xf32>
  memref.store %z, %r[%c0] : memref<4xf32>
  %n = arith.xori %flag, %flag : i1
  return %r, %n : memref<4xf32>, i1
}

// A function within max-ops is left as it is.
// CHECK-LABEL: func.func @small(
// CHECK-NEXT:    return
func.func @small(%a: memref<4xf32>) -> memref<4xf32> {
  return %a : memref<4xf32>
}

// A started allreduce may be waited for in a later part: its request is an
// argument (convert-ddp-to-llvm passes it as a pointer).
// CHECK-LABEL: func.func @started(
// CHECK:         %[[P:.*]]:2 = call @started.part0(
// CHECK:         call @started.part2(%[[P]]#0) : (!ddp.request<memref<4xf32>>) -> ()
// CHECK-LABEL: func.func private @started.part0(
// CHECK:         ddp.buffer.allreduce_start
// CHECK:         return %{{.*}}, %{{.*}} : !ddp.request<memref<4xf32>>, f32
// CHECK-LABEL: func.func private @started.part2(
// CHECK-SAME:      %[[R:.*]]: !ddp.request<memref<4xf32>>)
// CHECK-NEXT:    ddp.buffer.wait %[[R]]
func.func @started(%a: memref<4xf32>, %b: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %r = ddp.buffer.allreduce_start mean %a : memref<4xf32> -> !ddp.request<memref<4xf32>>
  %x = memref.load %b[%c0] : memref<4xf32>
  %y = arith.addf %x, %x : f32
  %z = arith.mulf %y, %y : f32
  memref.store %z, %b[%c0] : memref<4xf32>
  %w = memref.load %b[%c0] : memref<4xf32>
  %v = arith.addf %w, %z : f32
  memref.store %v, %b[%c0] : memref<4xf32>
  ddp.buffer.wait %r : !ddp.request<memref<4xf32>>
  return
}

// The branches of a top-level scf.if (a step versioned on PowerSGD's
// warm-up) are cut too; values from outside them are arguments.
// CHECK-LABEL: func.func @versioned(
// CHECK:         scf.if
// CHECK-NEXT:      func.call @versioned.part0(
// CHECK:         } else {
// CHECK-NEXT:      func.call @versioned.part2(
// CHECK-LABEL: func.func private @versioned.part0(
// CHECK-SAME:      %{{.*}}: memref<4xf32>, %{{.*}}: f32
func.func @versioned(%a: memref<4xf32>, %flag: i1) {
  %c0 = arith.constant 0 : index
  %s = memref.load %a[%c0] : memref<4xf32>
  scf.if %flag {
    %x = memref.load %a[%c0] : memref<4xf32>
    %y = arith.addf %x, %s : f32
    %z = arith.mulf %y, %y : f32
    memref.store %z, %a[%c0] : memref<4xf32>
    %w = arith.addf %z, %s : f32
    memref.store %w, %a[%c0] : memref<4xf32>
  } else {
    %x = memref.load %a[%c0] : memref<4xf32>
    %y = arith.subf %x, %s : f32
    %z = arith.mulf %y, %y : f32
    memref.store %z, %a[%c0] : memref<4xf32>
    %w = arith.subf %z, %s : f32
    memref.store %w, %a[%c0] : memref<4xf32>
  }
  return
}
