// RUN: ddp-opt %s --ownership-based-buffer-deallocation --canonicalize --buffer-deallocation-simplification --bufferization-lower-deallocations | FileCheck %s

// ddp-lower-to-llvm's deallocation frees a tile's buffer inside the tile
// loop (scf.forall, from ddp-tile-and-fuse), once per iteration: the
// context has scf's BufferDeallocationOpInterface models (without them the
// pass left the loop alone and every tile's buffer leaked).
// CHECK-LABEL: func.func @tile_buffers(
// CHECK: scf.forall
// CHECK: %[[T:.*]] = memref.alloc() : memref<4096xf32>
// CHECK: linalg.generic
// CHECK: memref.dealloc %[[T]]
// CHECK-NOT: memref.dealloc
// CHECK: return
#id = affine_map<(d0) -> (d0)>
func.func @tile_buffers(%x: memref<1048576xf32>, %y: memref<1048576xf32>) {
  scf.forall (%i) = (0) to (1048576) step (4096) {
    %in = memref.subview %x[%i] [4096] [1] : memref<1048576xf32> to memref<4096xf32, strided<[1], offset: ?>>
    %out = memref.subview %y[%i] [4096] [1] : memref<1048576xf32> to memref<4096xf32, strided<[1], offset: ?>>
    %tile = memref.alloc() : memref<4096xf32>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%in : memref<4096xf32, strided<[1], offset: ?>>) outs(%tile : memref<4096xf32>) {
    ^bb0(%a: f32, %b: f32):
      %m = arith.mulf %a, %a : f32
      linalg.yield %m : f32
    }
    memref.copy %tile, %out : memref<4096xf32> to memref<4096xf32, strided<[1], offset: ?>>
  }
  return
}
