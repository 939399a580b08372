// RUN: ddp-opt %s --split-functions=max-ops=4 | FileCheck %s

// A function over max-ops nested ops becomes calls of private parts, in
// program order. Values used across a cut are arguments and results;
// invariants (constants, and pure ops of the arguments) stay
// first in the function and are rebuilt in each part that uses them; no cut
// lies where a stack allocation is live, so the alloca and its uses share a
// part.

// CHECK-LABEL: func.func @step(
// CHECK-SAME:      %[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>, %[[FLAG:.*]]: i1)
// CHECK-NEXT:    arith.constant 0 : index
// CHECK-NEXT:    %[[N:.*]] = arith.xori %[[FLAG]], %[[FLAG]]
// CHECK-NEXT:    %[[P0:.*]] = call @step.part0(%[[A]], %[[B]]) : (memref<4xf32>, memref<4xf32>) -> f32
// CHECK-NEXT:    call @step.part1(%[[P0]], %[[B]]) : (f32, memref<4xf32>) -> ()
// CHECK-NEXT:    return %[[B]], %[[N]]

// Each part is marked: it frees only buffers the step allocated.
// CHECK-LABEL: func.func private @step.part0(
// CHECK-SAME:    attributes {split_functions.part}
// CHECK:         arith.constant 0 : index
// CHECK-NEXT:    memref.load
// CHECK-NEXT:    arith.addf
// CHECK-NEXT:    memref.store
// CHECK-NEXT:    memref.alloca()
// CHECK-NEXT:    memref.store
// CHECK-NEXT:    memref.load
// CHECK-NEXT:    return

// CHECK-LABEL: func.func private @step.part1(
// CHECK:         arith.constant 0 : index
// CHECK-NEXT:    memref.store
// CHECK-NEXT:    memref.load
// CHECK-NEXT:    return
func.func @step(%a: memref<4xf32>, %b: memref<4xf32>, %flag: i1) -> (memref<4xf32>, i1) {
  %c0 = arith.constant 0 : index
  %x = memref.load %a[%c0] : memref<4xf32>
  %y = arith.addf %x, %x : f32
  memref.store %y, %b[%c0] : memref<4xf32>
  %slot = memref.alloca() : memref<1xf32>
  memref.store %y, %slot[%c0] : memref<1xf32>
  %z = memref.load %slot[%c0] : memref<1xf32>
  memref.store %z, %b[%c0] : memref<4xf32>
  %w = memref.load %b[%c0] : memref<4xf32>
  %n = arith.xori %flag, %flag : i1
  return %b, %n : memref<4xf32>, i1
}

// The cut comes before deallocation: a part returns only buffers it
// allocates, and its caller owns them. A buffer allocated in one part and
// used in a later one is a result; a view of an argument and a ddp.state
// buffer are rebuilt in the part that uses them; no cut lies where another
// buffer (the result of an scf.if) is live, and one that the function
// returns keeps the ops from its definition on in the function.

// CHECK-LABEL: func.func @ownership(
// CHECK-SAME:      %[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>, %[[FLAG:.*]]: i1)
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    memref.subview %[[A]][0] [2] [1]
// CHECK-NEXT:    ddp.buffer.state @error
// CHECK-NEXT:    %[[P0:.*]]:2 = call @ownership.part0(%[[A]]) : (memref<4xf32>) -> (memref<4xf32>, f32)
// CHECK-NEXT:    call @ownership.part1(%[[P0]]#0, %[[A]], %[[B]], %[[FLAG]], %[[P0]]#1) : (memref<4xf32>, memref<4xf32>, memref<4xf32>, i1, f32) -> ()
// CHECK-NEXT:    %[[R:.*]] = scf.if %[[FLAG]] -> (memref<4xf32>) {
// CHECK:         memref.store %[[P0]]#1, %[[R]][%[[C0]]]
// CHECK-NEXT:    memref.store %[[P0]]#1, %[[R]][%[[C0]]]
// CHECK-NEXT:    memref.store %[[P0]]#1, %[[R]][%[[C0]]]
// CHECK-NEXT:    return %[[R]]

// CHECK-LABEL: func.func private @ownership.part0(
// CHECK:         %[[ALLOC:.*]] = memref.alloc()
// CHECK:         return %[[ALLOC]], %{{.*}} : memref<4xf32>, f32

// The view and the state, rebuilt from the argument; the scf.if result and
// its uses, in one part.
// CHECK-LABEL: func.func private @ownership.part1(
// CHECK-SAME:      %[[FRESH:.*]]: memref<4xf32>, %[[A:.*]]: memref<4xf32>, %{{.*}}: memref<4xf32>, %{{.*}}: i1, %[[X:.*]]: f32)
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[VIEW:.*]] = memref.subview %[[A]][0] [2] [1]
// CHECK-NEXT:    %[[STATE:.*]] = ddp.buffer.state @error
// CHECK-NEXT:    %[[Y:.*]] = memref.load %[[FRESH]]
// CHECK-NEXT:    memref.store %[[Y]], %[[VIEW]]
// CHECK-NEXT:    memref.store %[[Y]], %[[STATE]]
// CHECK-NEXT:    %[[S:.*]] = scf.if
// CHECK:         memref.store %[[X]], %[[S]]
// CHECK-NEXT:    memref.store %[[X]], %[[S]]
// CHECK-NEXT:    memref.store %[[X]], %[[S]]
// CHECK-NEXT:    return
ddp.state @error : tensor<4xf32>
func.func @ownership(%a: memref<4xf32>, %b: memref<4xf32>, %flag: i1) -> memref<4xf32> {
  %c0 = arith.constant 0 : index
  %fresh = memref.alloc() : memref<4xf32>
  %x = memref.load %a[%c0] : memref<4xf32>
  memref.store %x, %fresh[%c0] : memref<4xf32>
  memref.store %x, %fresh[%c0] : memref<4xf32>
  %view = memref.subview %a[0] [2] [1] : memref<4xf32> to memref<2xf32, strided<[1]>>
  %state = ddp.buffer.state @error : memref<4xf32>
  %y = memref.load %fresh[%c0] : memref<4xf32>
  memref.store %y, %view[%c0] : memref<2xf32, strided<[1]>>
  memref.store %y, %state[%c0] : memref<4xf32>
  %s = scf.if %flag -> (memref<4xf32>) {
    scf.yield %a : memref<4xf32>
  } else {
    scf.yield %b : memref<4xf32>
  }
  memref.store %x, %s[%c0] : memref<4xf32>
  memref.store %x, %s[%c0] : memref<4xf32>
  memref.store %x, %s[%c0] : memref<4xf32>
  %r = scf.if %flag -> (memref<4xf32>) {
    scf.yield %a : memref<4xf32>
  } else {
    scf.yield %b : memref<4xf32>
  }
  memref.store %x, %r[%c0] : memref<4xf32>
  memref.store %x, %r[%c0] : memref<4xf32>
  memref.store %x, %r[%c0] : memref<4xf32>
  return %r : memref<4xf32>
}

// A part is as large as it was cut to be: it is not cut again.
// CHECK-LABEL: func.func private @cut(
// CHECK-NOT:     call
// CHECK:         return
func.func private @cut(%a: memref<4xf32>) attributes {split_functions.part} {
  %c0 = arith.constant 0 : index
  %x = memref.load %a[%c0] : memref<4xf32>
  memref.store %x, %a[%c0] : memref<4xf32>
  memref.store %x, %a[%c0] : memref<4xf32>
  memref.store %x, %a[%c0] : memref<4xf32>
  memref.store %x, %a[%c0] : memref<4xf32>
  return
}

// A function within max-ops is left as it is, its invariants where they
// were.
// CHECK-LABEL: func.func @small(
// CHECK-NEXT:    return
func.func @small(%a: memref<4xf32>) -> memref<4xf32> {
  return %a : memref<4xf32>
}
// CHECK-LABEL: func.func @small_in_order(
// CHECK-NEXT:    arith.constant
// CHECK-NEXT:    memref.load
// CHECK-NEXT:    arith.xori
// CHECK-NEXT:    return
func.func @small_in_order(%a: memref<4xf32>, %flag: i1) -> (f32, i1) {
  %c0 = arith.constant 0 : index
  %x = memref.load %a[%c0] : memref<4xf32>
  %n = arith.xori %flag, %flag : i1
  return %x, %n : f32, i1
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
