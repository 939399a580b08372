// RUN: ddp-opt %s -split-input-file --ddp-tile-and-fuse | FileCheck %s
// RUN: not ddp-opt %s -split-input-file --ddp-tile-and-fuse=tile-elements=0 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: ddp-tile-and-fuse: tile-elements must be at least 1, got 0

// A quantizer's end: the ranks' dequantized values summed (ranks outermost)
// into a fill, then divided by the world size. Tiled over the elements:
// fill, sum and division of a tile meet in cache; nothing of the whole size
// is computed outside the loop.
// CHECK-LABEL: func.func @dequantize_and_average(
// CHECK-SAME: %[[Q:.*]]: tensor<?x1x10000xi8>, %[[S:.*]]: tensor<?x1xf32>
// CHECK-NOT: linalg.
// CHECK: scf.forall (%[[I:.*]]) = (0) to (10000) step (4096) shared_outs(
// CHECK: %[[N:.*]] = affine.min
// CHECK: tensor.extract_slice %[[Q]][0, 0, %[[I]]] [%{{.*}}, 1, %[[N]]] [1, 1, 1]
// CHECK: %[[E:.*]] = tensor.empty(%[[N]]) : tensor<1x?xf32>
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<1x?xf32>)
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "parallel"]{{.*}} outs(%[[Z]] : tensor<1x?xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[SUM]] : tensor<1x?xf32>)
// CHECK: arith.divf
// CHECK: scf.forall.in_parallel
// CHECK: tensor.parallel_insert_slice
// CHECK: tensor.collapse_shape
func.func @dequantize_and_average(%q: tensor<?x1x10000xi8>, %scale: tensor<?x1xf32>, %n: f32) -> tensor<10000xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x10000xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x10000xf32>) -> tensor<1x10000xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(r, c, i) -> (r, c, i)>, affine_map<(r, c, i) -> (r, c)>, affine_map<(r, c, i) -> (c, i)>],
                       iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%q, %scale : tensor<?x1x10000xi8>, tensor<?x1xf32>) outs(%z : tensor<1x10000xf32>) {
  ^bb0(%x: i8, %sc: f32, %acc: f32):
    %f = arith.uitofp %x : i8 to f32
    %m = arith.mulf %f, %sc : f32
    %a = arith.addf %acc, %m : f32
    linalg.yield %a : f32
  } -> tensor<1x10000xf32>
  %e2 = tensor.empty() : tensor<1x10000xf32>
  %avg = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<1x10000xf32>) outs(%e2 : tensor<1x10000xf32>) {
  ^bb0(%x: f32, %o: f32):
    %d = arith.divf %x, %n : f32
    linalg.yield %d : f32
  } -> tensor<1x10000xf32>
  %c = tensor.collapse_shape %avg [[0, 1]] : tensor<1x10000xf32> into tensor<10000xf32>
  return %c : tensor<10000xf32>
}

// -----

// Per channel: rows of 512, tiles of 8 rows.
// CHECK-LABEL: func.func @channels(
// CHECK: scf.forall (%{{.*}}) = (0) to (100) step (8)
// CHECK-NOT: scf.for
// CHECK: linalg.fill
// CHECK: iterator_types = ["reduction", "parallel", "parallel"]
// CHECK: arith.divf
func.func @channels(%q: tensor<?x100x512xi8>, %n: f32) -> tensor<100x512xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<100x512xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<100x512xf32>) -> tensor<100x512xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(r, c, i) -> (r, c, i)>, affine_map<(r, c, i) -> (c, i)>],
                       iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%q : tensor<?x100x512xi8>) outs(%z : tensor<100x512xf32>) {
  ^bb0(%x: i8, %acc: f32):
    %f = arith.uitofp %x : i8 to f32
    %a = arith.addf %acc, %f : f32
    linalg.yield %a : f32
  } -> tensor<100x512xf32>
  %avg = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<100x512xf32>) outs(%e : tensor<100x512xf32>) {
  ^bb0(%x: f32, %o: f32):
    %d = arith.divf %x, %n : f32
    linalg.yield %d : f32
  } -> tensor<100x512xf32>
  return %avg : tensor<100x512xf32>
}

// -----

// Left whole: a producer every tile would need all of (a minimum over the
// whole bucket), a producer with a second user, a matmul (the runtime's
// BLAS computes it), and a consumer of two tiles or less.
#id = affine_map<(d0) -> (d0)>
#all = affine_map<(d0) -> ()>
// CHECK-LABEL: func.func @left_whole(
// CHECK-NOT: scf.for
// CHECK: return
func.func @left_whole(%x: tensor<100000xf32>, %init: tensor<f32>, %a: tensor<64x256xf32>,
                      %b: tensor<256x256xf32>, %small: tensor<8000xf32>)
    -> (tensor<100000xf32>, tensor<100000xf32>, tensor<100000xf32>, tensor<64x256xf32>, tensor<8000xf32>) {
  %min = linalg.generic {indexing_maps = [#id, #all], iterator_types = ["reduction"]}
      ins(%x : tensor<100000xf32>) outs(%init : tensor<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %m = arith.minimumf %acc, %v : f32
    linalg.yield %m : f32
  } -> tensor<f32>
  %e = tensor.empty() : tensor<100000xf32>
  %shifted = linalg.generic {indexing_maps = [#id, #all, #id], iterator_types = ["parallel"]}
      ins(%x, %min : tensor<100000xf32>, tensor<f32>) outs(%e : tensor<100000xf32>) {
  ^bb0(%v: f32, %m: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    linalg.yield %d : f32
  } -> tensor<100000xf32>
  // Two users of %shifted.
  %neg = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%shifted : tensor<100000xf32>) outs(%e : tensor<100000xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  } -> tensor<100000xf32>
  %abs = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%shifted : tensor<100000xf32>) outs(%e : tensor<100000xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = math.absf %v : f32
    linalg.yield %n : f32
  } -> tensor<100000xf32>
  %zero = arith.constant 0.0 : f32
  %ec = tensor.empty() : tensor<64x256xf32>
  %zc = linalg.fill ins(%zero : f32) outs(%ec : tensor<64x256xf32>) -> tensor<64x256xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<64x256xf32>, tensor<256x256xf32>) outs(%zc : tensor<64x256xf32>) -> tensor<64x256xf32>
  %relu = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<64x256xf32>) outs(%ec : tensor<64x256xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.maximumf %v, %zero : f32
    linalg.yield %r : f32
  } -> tensor<64x256xf32>
  %es = tensor.empty() : tensor<8000xf32>
  %sq = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%small : tensor<8000xf32>) outs(%es : tensor<8000xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.mulf %v, %v : f32
    linalg.yield %r : f32
  } -> tensor<8000xf32>
  %sq2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%sq : tensor<8000xf32>) outs(%es : tensor<8000xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.mulf %v, %v : f32
    linalg.yield %r : f32
  } -> tensor<8000xf32>
  return %shifted, %neg, %abs, %relu, %sq2 : tensor<100000xf32>, tensor<100000xf32>, tensor<100000xf32>, tensor<64x256xf32>, tensor<8000xf32>
}

// -----

// Rows wider than a tile: the per-row minimum is read by every tile of its
// row; computed once, before the loops, not once per tile.
// CHECK-LABEL: func.func @wide_rows(
// CHECK: %[[MIN:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: scf.forall ({{.*}}) = (0, 0) to (4, 10000) step (1, 4096)
// CHECK-NOT: "reduction"
// CHECK: arith.subf
func.func @wide_rows(%x: tensor<4x10000xf32>, %init: tensor<4xf32>) -> tensor<4x10000xf32> {
  %min = linalg.generic {indexing_maps = [affine_map<(r, i) -> (r, i)>, affine_map<(r, i) -> (r)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x10000xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %m = arith.minimumf %acc, %v : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %e = tensor.empty() : tensor<4x10000xf32>
  %shifted = linalg.generic {indexing_maps = [affine_map<(r, i) -> (r, i)>, affine_map<(r, i) -> (r)>, affine_map<(r, i) -> (r, i)>],
                             iterator_types = ["parallel", "parallel"]}
      ins(%x, %min : tensor<4x10000xf32>, tensor<4xf32>) outs(%e : tensor<4x10000xf32>) {
  ^bb0(%v: f32, %m: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    linalg.yield %d : f32
  } -> tensor<4x10000xf32>
  return %shifted : tensor<4x10000xf32>
}
