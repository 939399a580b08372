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

// CHECK-LABEL: func.func private @step.part0(
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
