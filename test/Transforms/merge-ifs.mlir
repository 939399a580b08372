// RUN: ddp-opt %s -split-input-file --merge-ifs | FileCheck %s

// One scf.if per bucket on the same condition: one if, the then regions'
// ops in their order in its then region, the else regions' in its else
// region. An if without an else merges with one that has an else.
// CHECK-LABEL: func.func @buckets(
// CHECK-SAME: %[[C:.*]]: i1, %[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>, %[[D:.*]]: memref<4xf32>
func.func @buckets(%c: i1, %a: memref<4xf32>, %b: memref<4xf32>, %d: memref<4xf32>) {
  // CHECK-NEXT: scf.if %[[C]] {
  // CHECK-NEXT:   ddp.buffer.allreduce mean %[[A]] role warmup
  // CHECK-NEXT:   ddp.buffer.allreduce mean %[[B]] role warmup
  // CHECK-NEXT:   ddp.buffer.allreduce mean %[[D]] role warmup
  // CHECK-NEXT: } else {
  // CHECK-NEXT:   ddp.buffer.allreduce sum %[[A]]
  // CHECK-NEXT:   ddp.buffer.allreduce sum %[[D]]
  // CHECK-NEXT: }
  // CHECK-NEXT: return
  scf.if %c {
    ddp.buffer.allreduce mean %a role warmup : memref<4xf32>
  } else {
    ddp.buffer.allreduce sum %a : memref<4xf32>
  }
  scf.if %c {
    ddp.buffer.allreduce mean %b role warmup : memref<4xf32>
  }
  scf.if %c {
    ddp.buffer.allreduce mean %d role warmup : memref<4xf32>
  } else {
    ddp.buffer.allreduce sum %d : memref<4xf32>
  }
  return
}

// -----

// Only adjacent ifs on the same value merge: an op between them, another
// condition, or results end a run. Runs in nested regions merge too.
// CHECK-LABEL: func.func @runs(
// CHECK-SAME: %[[C:.*]]: i1, %[[E:.*]]: i1, %[[A:.*]]: memref<4xf32>
func.func @runs(%c: i1, %e: i1, %a: memref<4xf32>) -> f32 {
  // CHECK-NEXT: scf.if %[[C]] {
  // CHECK-NEXT:   scf.if %[[E]] {
  // CHECK-NEXT:     ddp.buffer.allreduce mean %[[A]]
  // CHECK-NEXT:     ddp.buffer.allreduce sum %[[A]]
  // CHECK-NEXT:   }
  // CHECK-NEXT: }
  scf.if %c {
    scf.if %e {
      ddp.buffer.allreduce mean %a : memref<4xf32>
    }
    scf.if %e {
      ddp.buffer.allreduce sum %a : memref<4xf32>
    }
  }
  // CHECK-NEXT: scf.if %[[E]] {
  // CHECK-NEXT:   ddp.buffer.allreduce mean %[[A]]
  // CHECK-NEXT: }
  scf.if %e {
    ddp.buffer.allreduce mean %a : memref<4xf32>
  }
  // CHECK-NEXT: ddp.buffer.host_barrier
  // CHECK-NEXT: scf.if %[[E]] {
  ddp.buffer.host_barrier
  scf.if %e {
    ddp.buffer.allreduce mean %a : memref<4xf32>
  }
  // CHECK: %[[R:.*]] = scf.if %[[E]] -> (f32) {
  %r = scf.if %e -> f32 {
    %one = arith.constant 1.0 : f32
    scf.yield %one : f32
  } else {
    %two = arith.constant 2.0 : f32
    scf.yield %two : f32
  }
  // CHECK: scf.if %[[E]] {
  // CHECK-NEXT: ddp.buffer.allreduce sum %[[A]]
  // CHECK-NEXT: }
  // CHECK-NEXT: return %[[R]]
  scf.if %e {
    ddp.buffer.allreduce sum %a : memref<4xf32>
  }
  return %r : f32
}
