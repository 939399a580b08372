// RUN: ddp-opt %s -split-input-file --ddp-split-reductions | FileCheck %s
// RUN: not ddp-opt %s --ddp-split-reductions=chunk=1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: ddp-split-reductions: chunk must be at least 2, got 1

// A per-tensor quantizer's range over a bucket's [1 x n] view: chunks of
// 1024 reduced in parallel (each from the outputs' initial values, in
// registers), then the chunks' partial results combined per output.
// CHECK-LABEL: func.func @range(
// CHECK-SAME:    %[[X:.*]]: memref<1x9610xf32>, %[[MIN:.*]]: memref<1xf32>, %[[MAX:.*]]: memref<1xf32>
// CHECK:         %[[C1024:.*]] = arith.constant 1024 : index
// CHECK:         %[[CHUNKS:.*]] = arith.divui %{{.*}}, %[[C1024]]
// CHECK:         %[[PMIN:.*]] = memref.alloc(%[[CHUNKS]]) : memref<?x1xf32>
// CHECK:         %[[PMAX:.*]] = memref.alloc(%[[CHUNKS]]) : memref<?x1xf32>
// CHECK:         scf.parallel (%[[T:.*]], %[[P:.*]]) = (%{{.*}}, %{{.*}}) to (%[[CHUNKS]], %{{.*}})
// CHECK:           %[[FIRST:.*]] = arith.muli %[[T]], %[[C1024]]
// CHECK:           %[[END:.*]] = arith.minui
// CHECK:           %[[LO:.*]] = memref.load %[[MIN]]
// CHECK:           %[[HI:.*]] = memref.load %[[MAX]]
// CHECK:           %[[R:.*]]:2 = scf.for %{{.*}} = %[[FIRST]] to %[[END]] step %{{.*}} iter_args(%[[A:.*]] = %[[LO]], %[[B:.*]] = %[[HI]])
// CHECK:             %[[V:.*]] = memref.load %[[X]]
// CHECK:             arith.minimumf %[[A]], %[[V]]
// CHECK:             arith.maximumf %[[B]], %[[V]]
// CHECK:           memref.store %[[R]]#0, %[[PMIN]][%[[T]],
// CHECK:           memref.store %[[R]]#1, %[[PMAX]][%[[T]],
// CHECK:         scf.parallel
// CHECK:           scf.for %[[U:.*]] = %{{.*}} to %[[CHUNKS]]
// CHECK:             memref.load %[[PMIN]][%[[U]],
// CHECK:             arith.minimumf
// CHECK:           memref.store %{{.*}}, %[[MIN]]
// CHECK:           scf.for
// CHECK:             arith.maximumf
// CHECK:           memref.store %{{.*}}, %[[MAX]]
// CHECK:         memref.dealloc %[[PMIN]]
// CHECK:         memref.dealloc %[[PMAX]]
// CHECK-NOT:     linalg.generic
func.func @range(%x: memref<1x9610xf32>, %min: memref<1xf32>, %max: memref<1xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<1x9610xf32>) outs(%min, %max : memref<1xf32>, memref<1xf32>) {
  ^bb0(%in: f32, %lo: f32, %hi: f32):
    %a = arith.minimumf %lo, %in : f32
    %b = arith.maximumf %hi, %in : f32
    linalg.yield %a, %b : f32, f32
  }
  return
}

// -----

// A column's maximum of |x| over a reduction that comes first: the named
// op generalized, its reduction loop moved last, the term (|x|) computed
// in each chunk.
// CHECK-LABEL: func.func @columns(
// CHECK:         scf.parallel (%[[T:.*]], %[[J:.*]]) =
// CHECK:           scf.for %[[I:.*]] =
// CHECK:             %[[V:.*]] = memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<4096x8xf32>
// CHECK:             %[[ABS:.*]] = math.absf %[[V]]
// CHECK:             arith.maximumf %[[ABS]], %{{.*}}
func.func @columns(%x: memref<4096x8xf32>, %y: memref<8xf32>) {
  linalg.reduce ins(%x : memref<4096x8xf32>) outs(%y : memref<8xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %a = math.absf %in : f32
      %m = arith.maximumf %a, %acc : f32
      linalg.yield %m : f32
    }
  return
}

// -----

// Left alone: a sum (its bits depend on the order), minnumf (its choice
// between -0 and +0 is open), a reduction no longer than a chunk, and a
// combination that reads the running value twice.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT:     scf.parallel
// CHECK-COUNT-4: linalg.generic
func.func @left_alone(%x: memref<8192xf32>, %short: memref<512xf32>, %y: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%x : memref<8192xf32>) outs(%y : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%x : memref<8192xf32>) outs(%y : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.minnumf %acc, %in : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%short : memref<512xf32>) outs(%y : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %acc, %in : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%x : memref<8192xf32>) outs(%y : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %t = arith.mulf %acc, %in : f32
    %m = arith.maximumf %acc, %t : f32
    linalg.yield %m : f32
  }
  return
}
