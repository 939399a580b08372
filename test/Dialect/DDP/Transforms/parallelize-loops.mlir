// RUN: ddp-opt %s -split-input-file --ddp-parallelize-loops | FileCheck %s
// RUN: ddp-opt %s -split-input-file --ddp-parallelize-loops=parallel=false | FileCheck %s --check-prefix=OFF
// RUN: not ddp-opt %s -split-input-file --ddp-parallelize-loops=min-iterations=0 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: ddp-parallelize-loops: min-iterations must be at least 1, got 0

// A bufferized tile loop of ddp-tile-and-fuse over a million elements: one
// scf.parallel, its tiles' buffers allocated and freed in each iteration.
// CHECK-LABEL: func.func @tiles(
// CHECK-NOT: scf.forall
// CHECK: scf.parallel (%[[I:.*]]) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) {
// CHECK: affine.min
// CHECK: memref.alloc
// CHECK: linalg.generic
// CHECK: memref.dealloc
// CHECK: scf.reduce
// OFF-LABEL: func.func @tiles(
// OFF-NOT: scf.parallel
// OFF: scf.for
// OFF: linalg.generic
#id = affine_map<(d0) -> (d0)>
func.func @tiles(%x: memref<1048576xf32>, %y: memref<1048576xf32>) {
  scf.forall (%i) = (0) to (1048576) step (4096) {
    %n = affine.min affine_map<(d0) -> (-d0 + 1048576, 4096)>(%i)
    %in = memref.subview %x[%i] [%n] [1] : memref<1048576xf32> to memref<?xf32, strided<[1], offset: ?>>
    %out = memref.subview %y[%i] [%n] [1] : memref<1048576xf32> to memref<?xf32, strided<[1], offset: ?>>
    %tile = memref.alloc(%n) : memref<?xf32>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%in : memref<?xf32, strided<[1], offset: ?>>) outs(%tile : memref<?xf32>) {
    ^bb0(%a: f32, %b: f32):
      %m = arith.mulf %a, %a : f32
      linalg.yield %m : f32
    }
    memref.copy %tile, %out : memref<?xf32> to memref<?xf32, strided<[1], offset: ?>>
    memref.dealloc %tile : memref<?xf32>
  }
  return
}

// -----

// Three tiles of 4096 are 12288 iterations, fewer than min-iterations: the
// tile loop runs on one thread, as scf.for.
// CHECK-LABEL: func.func @few_tiles(
// CHECK-NOT: scf.parallel
// CHECK: scf.for
// CHECK: linalg.generic
#id = affine_map<(d0) -> (d0)>
func.func @few_tiles(%x: memref<12288xf32>, %y: memref<12288xf32>) {
  scf.forall (%i) = (0) to (12288) step (4096) {
    %n = affine.min affine_map<(d0) -> (-d0 + 12288, 4096)>(%i)
    %in = memref.subview %x[%i] [%n] [1] : memref<12288xf32> to memref<?xf32, strided<[1], offset: ?>>
    %out = memref.subview %y[%i] [%n] [1] : memref<12288xf32> to memref<?xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%in : memref<?xf32, strided<[1], offset: ?>>) outs(%out : memref<?xf32, strided<[1], offset: ?>>) {
    ^bb0(%a: f32, %b: f32):
      %m = arith.mulf %a, %a : f32
      linalg.yield %m : f32
    }
  }
  return
}

// -----

// A tile loop that calls a function stays on one thread.
// CHECK-LABEL: func.func @calls(
// CHECK-NOT: scf.parallel
// CHECK: scf.for
// CHECK: call @observe
func.func private @observe(index)
func.func @calls(%x: memref<1048576xf32>) {
  scf.forall (%i) = (0) to (1048576) step (4096) {
    %in = memref.subview %x[%i] [4096] [1] : memref<1048576xf32> to memref<4096xf32, strided<[1], offset: ?>>
    %zero = arith.constant 0.0 : f32
    linalg.fill ins(%zero : f32) outs(%in : memref<4096xf32, strided<[1], offset: ?>>)
    func.call @observe(%i) : (index) -> ()
  }
  return
}

// -----

// One dimension: the whole loop is the parallel one (each thread's part of
// it is a plain loop the vectorizer takes).
// CHECK-LABEL: func.func @flat(
// CHECK: scf.parallel (%[[I:.*]]) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) {
// CHECK: memref.load %{{.*}}[%[[I]]]
// CHECK: arith.mulf
// CHECK: memref.store
// CHECK-NOT: linalg.generic
// CHECK: return
// OFF-LABEL: func.func @flat(
// OFF: linalg.generic
#id = affine_map<(d0) -> (d0)>
func.func @flat(%x: memref<1048576xf32>, %y: memref<1048576xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : memref<1048576xf32>) outs(%y : memref<1048576xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// A bucket's [1 x n] view: the loop of one iteration stays; the parallel
// loop is the one over the elements.
// CHECK-LABEL: func.func @unit_rows(
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step
// CHECK-NEXT: scf.parallel (%[[I:.*]]) =
// CHECK-NOT: scf.for
// CHECK: arith.addf
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @unit_rows(%x: memref<1x1048576xf32>, %y: memref<1x1048576xf32>) {
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<1x1048576xf32>) outs(%y : memref<1x1048576xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Rows: the rows are the parallel loop, each row's elements a sequential
// loop inside it (the vectorizer's).
// CHECK-LABEL: func.func @rows(
// CHECK: scf.parallel (%[[R:.*]]) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) {
// CHECK-NEXT: scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step
// CHECK: memref.load %{{.*}}[%[[R]], %[[C]]]
// Reductions (a minimum per column, a minimum per row) and small ops stay
// linalg ops, for convert-linalg-to-loops.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT: scf.parallel
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// A value per row is loaded once per row, before the row's loop; a
// scalar once, before the parallel loop.
// CHECK: %[[S:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK: scf.parallel (%[[R:.*]]) =
// CHECK-NEXT: %[[M:.*]] = memref.load %{{.*}}[%[[R]]] : memref<512xf32>
// CHECK-NEXT: scf.for %[[C:.*]] =
// CHECK-NEXT: memref.load %{{.*}}[%[[R]], %[[C]]]
// CHECK-NEXT: arith.divf %{{.*}}, %[[M]]
// CHECK-NEXT: arith.mulf %{{.*}}, %[[S]]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel"]
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @rows(%x: memref<512x1024xf32>, %y: memref<512x1024xf32>) {
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<512x1024xf32>) outs(%y : memref<512x1024xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  }
  return
}
func.func @left_alone(%x: memref<512x1024xf32>, %min: memref<1024xf32>,
                      %rowmin: memref<512xf32>, %small: memref<1000xf32>,
                      %scaled: memref<512x1024xf32>, %scale: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (c)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<512x1024xf32>) outs(%min : memref<1024xf32>) {
  ^bb0(%a: f32, %m: f32):
    %s = arith.minimumf %a, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<512x1024xf32>) outs(%rowmin : memref<512xf32>) {
  ^bb0(%a: f32, %m: f32):
    %s = arith.minimumf %a, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> ()>, affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %rowmin, %scale : memref<512x1024xf32>, memref<512xf32>, memref<f32>)
      outs(%scaled : memref<512x1024xf32>) {
  ^bb0(%a: f32, %m: f32, %k: f32, %o: f32):
    %s = arith.divf %a, %m : f32
    %t = arith.mulf %s, %k : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%small : memref<1000xf32>) {
  ^bb0(%a: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A contraction lowered as loops (contractions=loops), like any op with a
// reduction, stays on one thread: its sum over K accumulates in memory,
// which a thread's vector loop could not keep in registers.
// CHECK-LABEL: func.func @matmul(
// CHECK-NOT: scf.parallel
// CHECK: linalg.matmul
func.func @matmul(%a: memref<4x1024xf32>, %b: memref<1024x1024xf32>, %c: memref<4x1024xf32>) {
  linalg.matmul ins(%a, %b : memref<4x1024xf32>, memref<1024x1024xf32>) outs(%c : memref<4x1024xf32>)
  return
}

// -----

// Its parallel loops together are the parallel loop when the outer one
// alone has too few iterations (4 rows), never the innermost loop.
// CHECK-LABEL: func.func @collapsed(
// CHECK: scf.parallel (%[[A:.*]], %[[B:.*]]) = (%{{.*}}, %{{.*}}) to (%{{.*}}, %{{.*}}) step
// CHECK-NEXT: scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT: memref.load %{{.*}}[%[[A]], %[[B]], %[[C]]]
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[A]], %[[B]], %[[C]]]
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @collapsed(%x: memref<4x128x512xf32>, %y: memref<4x128x512xf32>) {
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<4x128x512xf32>) outs(%y : memref<4x128x512xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  }
  return
}
