// RUN: ddp-opt %s | FileCheck %s
// RUN: ddp-opt %s | ddp-opt | FileCheck %s

// A literal LLVM struct of 16 or more members prints once, as an alias: a
// lowered step returns one struct of a memref descriptor per gradient, and
// every llvm.insertvalue into it would print the whole struct again.
// Smaller structs (memref descriptors) print in place.

// CHECK: !llvm_struct = !llvm.struct<(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)>
// CHECK-LABEL: llvm.func @many_results
// CHECK-SAME: (%{{.*}}: !llvm.struct<(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)>) -> !llvm_struct
// CHECK: llvm.mlir.poison : !llvm_struct
// CHECK: llvm.insertvalue %{{.*}}, %{{.*}}[15] : !llvm_struct
ddp.state @ddp.step.loads_the_dialect : i64
llvm.func @many_results(%small: !llvm.struct<(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)>) -> !llvm.struct<(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)> {
  %0 = llvm.mlir.poison : !llvm.struct<(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)>
  %1 = llvm.extractvalue %small[0] : !llvm.struct<(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)>
  %2 = llvm.insertvalue %1, %0[15] : !llvm.struct<(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)>
  llvm.return %2 : !llvm.struct<(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)>
}
