// RUN: ddp-opt %s -split-input-file --split-deallocations | FileCheck %s

// The end of a step after ownership-based deallocation: the arguments are
// listed with ownership false, the clones returned for them with true, a
// scratch buffer with its own condition. Each allocation gets its own
// dealloc, the arguments share one (they may alias each other), and a
// retained value that no listed buffer comes from is not owned through it.
// The scf.if on a constant that chose between the argument and its clone is
// folded first.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[A0:.*]]: memref<4xf32>, %[[A1:.*]]: memref<4xf32>, %[[C:.*]]: i1
func.func @step(%arg0: memref<4xf32>, %arg1: memref<4xf32>, %c: i1)
    -> (memref<4xf32>, memref<4xf32>, i1, i1, i1) {
  %false = arith.constant false
  %true = arith.constant true
  // CHECK-NOT: scf.if
  // CHECK: %[[K0:.*]] = bufferization.clone %[[A0]]
  %r0 = scf.if %false -> memref<4xf32> {
    scf.yield %arg0 : memref<4xf32>
  } else {
    %k = bufferization.clone %arg0 : memref<4xf32> to memref<4xf32>
    scf.yield %k : memref<4xf32>
  }
  // CHECK: %[[K1:.*]] = bufferization.clone %[[A1]]
  %r1 = bufferization.clone %arg1 : memref<4xf32> to memref<4xf32>
  // CHECK: %[[S:.*]] = memref.alloc
  %s = memref.alloc() : memref<4xf32>
  %v = memref.subview %s[0] [2] [1] : memref<4xf32> to memref<2xf32, strided<[1]>>
  %b0, %o0, %z0, %t0 = memref.extract_strided_metadata %arg0 : memref<4xf32> -> memref<f32>, index, index, index
  %b1, %o1, %z1, %t1 = memref.extract_strided_metadata %arg1 : memref<4xf32> -> memref<f32>, index, index, index
  %bk0, %ok0, %zk0, %tk0 = memref.extract_strided_metadata %r0 : memref<4xf32> -> memref<f32>, index, index, index
  %bk1, %ok1, %zk1, %tk1 = memref.extract_strided_metadata %r1 : memref<4xf32> -> memref<f32>, index, index, index
  // CHECK-DAG: bufferization.dealloc (%{{.*}}, %{{.*}} : memref<f32>, memref<f32>) if (%false{{.*}}, %false{{.*}}){{$}}
  // CHECK-DAG: %[[U0:.*]] = bufferization.dealloc (%{{.*}} : memref<f32>) if (%true{{.*}}) retain (%[[K0]] : memref<4xf32>)
  // CHECK-DAG: %[[U1:.*]] = bufferization.dealloc (%{{.*}} : memref<f32>) if (%true{{.*}}) retain (%[[K1]] : memref<4xf32>)
  // CHECK-DAG: %[[U2:.*]] = bufferization.dealloc (%[[S]] : memref<4xf32>) if (%[[C]]) retain (%{{.*}} : memref<2xf32, strided<[1]>>)
  // CHECK-NOT: bufferization.dealloc
  // CHECK: return %[[K0]], %[[K1]], %[[U0]], %[[U1]], %[[U2]]
  %u:3 = bufferization.dealloc (%b0, %b1, %bk0, %bk1, %s : memref<f32>, memref<f32>, memref<f32>, memref<f32>, memref<4xf32>)
      if (%false, %false, %true, %true, %c) retain (%r0, %r1, %v : memref<4xf32>, memref<4xf32>, memref<2xf32, strided<[1]>>)
  return %r0, %r1, %u#0, %u#1, %u#2 : memref<4xf32>, memref<4xf32>, i1, i1, i1
}

// -----

// A retained argument: no allocation listed is one of the arguments, so it
// is not owned through this dealloc.
// CHECK-LABEL: func.func @retained_argument(
func.func @retained_argument(%arg0: memref<4xf32>) -> (memref<4xf32>, i1) {
  %true = arith.constant true
  %s = memref.alloc() : memref<4xf32>
  // CHECK: bufferization.dealloc (%{{.*}} : memref<4xf32>) if (%true){{$}}
  // CHECK: %[[NO:.*]] = arith.constant false
  // CHECK: return %{{.*}}, %[[NO]]
  %u = bufferization.dealloc (%s : memref<4xf32>) if (%true) retain (%arg0 : memref<4xf32>)
  return %arg0, %u : memref<4xf32>, i1
}

// -----

// A buffer of unknown origin (a loop's iteration argument) may alias any
// other: the dealloc stays as it is.
// CHECK-LABEL: func.func @unknown_origin(
func.func @unknown_origin(%arg0: memref<4xf32>, %n: index) -> i1 {
  %true = arith.constant true
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = memref.alloc() : memref<4xf32>
  %l = scf.for %i = %c0 to %n step %c1 iter_args(%x = %arg0) -> memref<4xf32> {
    scf.yield %x : memref<4xf32>
  }
  // CHECK: bufferization.dealloc (%{{.*}}, %{{.*}} : memref<4xf32>, memref<4xf32>) if (%true, %true) retain
  // CHECK-NOT: bufferization.dealloc
  %u = bufferization.dealloc (%s, %l : memref<4xf32>, memref<4xf32>) if (%true, %true) retain (%arg0 : memref<4xf32>)
  return %u : i1
}

// -----

// The step after split-functions: each buffer a part returns is one it
// allocated, distinct from the others, so each gets its own dealloc. The
// results of a call of any other function may alias each other: their
// dealloc stays as it is.
// CHECK-LABEL: func.func @parts(
func.func @parts(%arg0: memref<4xf32>) -> i1 {
  %true = arith.constant true
  // CHECK: %[[P:.*]]:2 = call @parts.part0
  %p:2 = call @parts.part0(%arg0) : (memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
  // CHECK: %[[Q:.*]]:2 = call @other
  %q:2 = call @other(%arg0) : (memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
  // CHECK: bufferization.dealloc (%[[P]]#0 : memref<4xf32>) if (%true){{$}}
  // CHECK-NEXT: bufferization.dealloc (%[[P]]#1 : memref<4xf32>) if (%true){{$}}
  // CHECK-NEXT: %[[NO:.*]] = arith.constant false
  %u = bufferization.dealloc (%p#0, %p#1 : memref<4xf32>, memref<4xf32>) if (%true, %true) retain (%arg0 : memref<4xf32>)
  // CHECK-NEXT: bufferization.dealloc (%[[Q]]#0, %[[Q]]#1 : memref<4xf32>, memref<4xf32>) if (%true, %true){{$}}
  bufferization.dealloc (%q#0, %q#1 : memref<4xf32>, memref<4xf32>) if (%true, %true)
  // CHECK-NEXT: return %[[NO]]
  return %u : i1
}
func.func private @parts.part0(%arg0: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) attributes {split_functions.part} {
  %a = memref.alloc() : memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  return %a, %b : memref<4xf32>, memref<4xf32>
}
func.func private @other(%arg0: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %a = memref.alloc() : memref<4xf32>
  return %a, %a : memref<4xf32>, memref<4xf32>
}
