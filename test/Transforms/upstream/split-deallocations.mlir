// What split-deallocations works around: upstream's deallocation frees
// the buffers of a function at its end in one bufferization.dealloc that
// also retains every result, and its simplification keeps it one op where
// it cannot prove the buffers distinct, which upstream's passes then
// revisit at every change, comparing every buffer with every retained
// value (quadratic in a step's buffers). If upstream split it by
// allocation itself, UPSTREAM below would fail and split-deallocations
// could go; SPLIT shows what it makes of the same IR.
// RUN: ddp-opt %s --ownership-based-buffer-deallocation --canonicalize \
// RUN:   --buffer-deallocation-simplification | FileCheck %s --check-prefix=UPSTREAM
// RUN: ddp-opt %s --ownership-based-buffer-deallocation --split-deallocations \
// RUN:   --canonicalize --buffer-deallocation-simplification | FileCheck %s --check-prefix=SPLIT

// A step cut into parts: every buffer a part returns is one it allocated.
// Upstream cannot know that: the two buffers the step frees are one
// dealloc that retains the two it returns, checked against each other when
// the step runs (with thousands of buffers, every step).
// UPSTREAM-LABEL: func.func @step(
// UPSTREAM: bufferization.dealloc ({{[^,]*}}, {{[^:]*}} : memref<f32>, memref<f32>) if ({{.*}}) retain ({{.*}}, {{.*}} : memref<4xf32>, memref<4xf32>)
// UPSTREAM-NOT: bufferization.dealloc
// UPSTREAM: return
// One dealloc per buffer, and nothing retained or checked.
// SPLIT-LABEL: func.func @step(
// SPLIT-COUNT-2: bufferization.dealloc ({{[^,:]*}} : memref<f32>) if (%true){{$}}
// SPLIT-NOT: bufferization.dealloc
// SPLIT: return
func.func @step(%g: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %p:2 = call @step.part0(%g) : (memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
  %q:2 = call @step.part1(%p#0) : (memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
  return %p#1, %q#0 : memref<4xf32>, memref<4xf32>
}
func.func private @step.part0(%g: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) attributes {split_functions.part} {
  %a = memref.alloc() : memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  memref.copy %g, %a : memref<4xf32> to memref<4xf32>
  memref.copy %g, %b : memref<4xf32> to memref<4xf32>
  return %a, %b : memref<4xf32>, memref<4xf32>
}
func.func private @step.part1(%g: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) attributes {split_functions.part} {
  %a = memref.alloc() : memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  memref.copy %g, %a : memref<4xf32> to memref<4xf32>
  memref.copy %g, %b : memref<4xf32> to memref<4xf32>
  return %a, %b : memref<4xf32>, memref<4xf32>
}
