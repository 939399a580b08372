// RUN: ddp-opt %s -split-input-file --ddp-parallelize-loops="every-loop min-iterations=1" | FileCheck %s
// RUN: ddp-opt %s -split-input-file --ddp-parallelize-loops=min-iterations=1 | FileCheck %s --check-prefix=CPU

// every-loop (ddp-lower-to-llvm{target=cuda}): every parallel loop of a
// nest, the innermost too, however small.
// CHECK-LABEL: func.func @elementwise(
// CHECK: scf.parallel (%[[I:.*]], %[[J:.*]]) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) {
// CHECK-NEXT: memref.load %{{.*}}[%[[I]], %[[J]]]
// CHECK-NOT: scf.for
// CHECK: scf.reduce
// CPU-LABEL: func.func @elementwise(
// CPU: scf.parallel (%{{.*}}) = (%c0) to (%c4) step (%c1) {
// CPU-NEXT: scf.for
func.func @elementwise(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  linalg.map { math.exp } ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>)
  return
}

// -----

// A sum over rows (a hook's sum of what every rank sent): the columns in
// parallel, each thread adding its column's rows in order, as one thread
// would.
// CHECK-LABEL: func.func @columns(
// CHECK: scf.parallel (%[[J:.*]]) = (%c0) to (%c123) step (%c1) {
// CHECK-NEXT: scf.for %[[R:.*]] = %c0 to %{{.*}} step %c1 {
// CHECK-NEXT: memref.load %{{.*}}[%[[R]], %[[J]]] : memref<?x123xf32>
// CHECK: arith.addf
// CHECK: memref.store %{{.*}}[%[[J]]] : memref<123xf32>
// CPU-LABEL: func.func @columns(
// CPU-NOT: scf.parallel
// CPU: linalg.reduce
func.func @columns(%x: memref<?x123xf32>, %y: memref<123xf32>) {
  linalg.reduce ins(%x : memref<?x123xf32>) outs(%y : memref<123xf32>) dimensions = [0]
    (%a: f32, %b: f32) {
      %s = arith.addf %a, %b : f32
      linalg.yield %s : f32
    }
  return
}

// -----

// A row's maximum (a per-channel quantizer's): the rows in parallel.
// CHECK-LABEL: func.func @rows(
// CHECK: scf.parallel (%[[I:.*]]) = (%c0) to (%c64) step (%c1) {
// CHECK-NEXT: scf.for %[[K:.*]] = %c0 to %c512 step %c1 {
// CHECK: arith.maximumf
func.func @rows(%x: memref<64x512xf32>, %y: memref<64xf32>) {
  linalg.reduce ins(%x : memref<64x512xf32>) outs(%y : memref<64xf32>) dimensions = [1]
    (%a: f32, %b: f32) {
      %m = arith.maximumf %a, %b : f32
      linalg.yield %m : f32
    }
  return
}

// -----

// A reduction to one value has no parallel loop: it stays as it is (one
// thread; ddp-map-loops-to-gpu launches it as a kernel of one thread).
// CHECK-LABEL: func.func @total(
// CHECK-NOT: scf.parallel
// CHECK: linalg.reduce
func.func @total(%x: memref<4096xf32>, %y: memref<f32>) {
  linalg.reduce ins(%x : memref<4096xf32>) outs(%y : memref<f32>) dimensions = [0]
    (%a: f32, %b: f32) {
      %s = arith.addf %a, %b : f32
      linalg.yield %s : f32
    }
  return
}

// -----

// A bucket's [1 x n] view: its loop of one iteration is part of the
// parallel loop (no host loop around a kernel), unlike on the CPU.
// CHECK-LABEL: func.func @bucket(
// CHECK-NOT: scf.for
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%c1, %c9610) step (%c1, %c1) {
// CPU-LABEL: func.func @bucket(
// CPU: scf.for %{{.*}} = %c0 to %c1 step %c1 {
// CPU-NEXT: scf.parallel (%{{.*}}) = (%c0) to (%c9610) step (%c1) {
func.func @bucket(%x: memref<1x9610xf32>, %y: memref<1x9610xf32>) {
  linalg.map { math.absf } ins(%x : memref<1x9610xf32>) outs(%y : memref<1x9610xf32>)
  return
}
