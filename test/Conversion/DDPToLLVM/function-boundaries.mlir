// RUN: ddp-opt %s --convert-ddp-to-llvm=include-upstream=true --canonicalize | FileCheck %s

// How include-upstream converts functions and calls. A public function has
// convert-func-to-llvm's signature (a memref is its descriptor's fields),
// whether this pass converts it (plain functions) or upstream does (here,
// one with argument attributes). A private function that is only called,
// with static memrefs, and returns only buffers it allocates (aligned, so
// allocated = aligned), passes one pointer per memref (llvm.bareptr): the
// parts split-functions cuts a step into. One that returns a view of
// its argument, or whose symbol is used other than by a call, keeps the
// descriptors, as does a private function that is not a part (`split_functions.part`,
// set by split-functions: a part frees only buffers the step
// allocated, whose allocated pointer is the aligned one).

// Only the aligned allocation function is declared.
// CHECK-NOT: @_mlir_memref_to_llvm_alloc(
// CHECK-LABEL: llvm.func @entry(
// CHECK-SAME: %[[A0:[a-z0-9]+]]: !llvm.ptr, %[[A1:[a-z0-9]+]]: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %[[I:[a-z0-9]+]]: i64)
// CHECK-SAME: -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
// CHECK: %[[PART:.*]] = llvm.call @entry.part0(%[[A1]]) : (!llvm.ptr) -> !llvm.ptr
// CHECK: llvm.call @_mlir_memref_to_llvm_free(%[[PART]])
// CHECK: llvm.call @keeps_view(%[[A0]], %[[A1]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: llvm.call @escapes(%[[A0]], %[[A1]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: llvm.return
func.func @entry(%g: memref<4xf32>, %i: index) -> memref<4xf32> {
  %p = func.call @entry.part0(%g) : (memref<4xf32>) -> memref<4xf32>
  memref.dealloc %p : memref<4xf32>
  %v = func.call @keeps_view(%g) : (memref<4xf32>) -> memref<2x2xf32>
  func.call @escapes(%g) : (memref<4xf32>) -> ()
  return %g : memref<4xf32>
}

// CHECK-LABEL: llvm.func @entry.part0(
// CHECK-SAME: %[[G:.*]]: !llvm.ptr) -> !llvm.ptr attributes {llvm.bareptr, split_functions.part, sym_visibility = "private"}
// CHECK: %[[NEW:.*]] = llvm.call @_mlir_memref_to_llvm_aligned_alloc(
// CHECK: llvm.return %[[NEW]] : !llvm.ptr
func.func private @entry.part0(%g: memref<4xf32>) -> memref<4xf32> attributes {split_functions.part} {
  %new = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  memref.copy %g, %new : memref<4xf32> to memref<4xf32>
  return %new : memref<4xf32>
}

// CHECK-LABEL: llvm.func @keeps_view(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64)
// CHECK-SAME: -> !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
// CHECK-NOT: llvm.bareptr
func.func private @keeps_view(%g: memref<4xf32>) -> memref<2x2xf32> attributes {split_functions.part} {
  %v = memref.reinterpret_cast %g to offset: [0], sizes: [2, 2], strides: [2, 1] : memref<4xf32> to memref<2x2xf32>
  return %v : memref<2x2xf32>
}

// CHECK-LABEL: llvm.func @escapes(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64)
// CHECK-NOT: llvm.bareptr
func.func private @escapes(%g: memref<4xf32>) attributes {split_functions.part} {
  return
}

// CHECK-LABEL: llvm.func @with_attributes(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64 {llvm.noundef})
func.func @with_attributes(%g: memref<4xf32>, %i: i64 {llvm.noundef}) {
  %f = func.constant @escapes : (memref<4xf32>) -> ()
  return
}

// A buffer chosen by an scf.if (lowered in the same conversion) between two
// it allocates still qualifies.
// CHECK-LABEL: llvm.func @chooses(
// CHECK-SAME: %{{.*}}: i1) -> !llvm.ptr attributes {llvm.bareptr, split_functions.part, sym_visibility = "private"}
func.func private @chooses(%c: i1) -> memref<4xf32> attributes {split_functions.part} {
  %r = scf.if %c -> memref<4xf32> {
    %a = memref.alloc() : memref<4xf32>
    scf.yield %a : memref<4xf32>
  } else {
    %b = memref.alloc() : memref<4xf32>
    scf.yield %b : memref<4xf32>
  }
  return %r : memref<4xf32>
}

func.func @calls_chooses(%c: i1) {
  %r = func.call @chooses(%c) : (i1) -> memref<4xf32>
  memref.dealloc %r : memref<4xf32>
  return
}

// Not a part: the descriptors, though it qualifies otherwise.
// CHECK-LABEL: llvm.func @not_a_part(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64)
// CHECK-SAME: -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
// CHECK-NOT: llvm.bareptr
func.func private @not_a_part(%g: memref<4xf32>) -> memref<4xf32> {
  %new = memref.alloc() : memref<4xf32>
  memref.copy %g, %new : memref<4xf32> to memref<4xf32>
  return %new : memref<4xf32>
}

func.func @calls_not_a_part(%g: memref<4xf32>) {
  %r = func.call @not_a_part(%g) : (memref<4xf32>) -> memref<4xf32>
  memref.dealloc %r : memref<4xf32>
  return
}
