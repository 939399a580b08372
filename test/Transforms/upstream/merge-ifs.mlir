// What merge-ifs works around: upstream's canonicalizer merges adjacent
// scf.if ops on one condition itself (CombineIfs), two at a time, which is
// quadratic in the number of ifs. The result is the same with and without
// merge-ifs; only the time differs, which a test cannot assert: run
// `bash bench/run_ddp_opt_bench.sh` (its "upstream alone" rows lower without
// the workarounds). If upstream stopped merging these ifs, UPSTREAM below
// would fail and merge-ifs would be doing upstream's work.
// RUN: ddp-opt %s --canonicalize | FileCheck %s --check-prefix=UPSTREAM
// RUN: ddp-opt %s --canonicalize -o %t.upstream.mlir
// RUN: ddp-opt %s --merge-ifs --canonicalize -o %t.merged.mlir
// RUN: diff %t.upstream.mlir %t.merged.mlir

// UPSTREAM-LABEL: func.func @buckets(
// UPSTREAM: scf.if
// UPSTREAM-COUNT-3: memref.store
// UPSTREAM: } else {
// UPSTREAM-COUNT-2: memref.store
// UPSTREAM-NOT: scf.if
func.func @buckets(%c: i1, %a: memref<4xf32>, %v: f32, %w: f32) {
  %i0 = arith.constant 0 : index
  %i1 = arith.constant 1 : index
  %i2 = arith.constant 2 : index
  scf.if %c {
    memref.store %v, %a[%i0] : memref<4xf32>
  } else {
    memref.store %w, %a[%i0] : memref<4xf32>
  }
  scf.if %c {
    memref.store %v, %a[%i1] : memref<4xf32>
  }
  scf.if %c {
    memref.store %v, %a[%i2] : memref<4xf32>
  } else {
    memref.store %w, %a[%i2] : memref<4xf32>
  }
  return
}
