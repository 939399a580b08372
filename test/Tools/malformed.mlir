// Malformed input gets MLIR's diagnostics and a non-zero exit, never a crash.
// RUN: not ddp-opt %s --insert-powersgd=rank=2 2>&1 | FileCheck %s
// RUN: not ddp-opt %S/does-not-exist.mlir --insert-powersgd 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not ddp-opt %S/Inputs/truncated.mlir --insert-powersgd 2>&1 | FileCheck %s --check-prefix=TRUNCATED
// RUN: printf '\x00\xff\xfe garbage' | not ddp-opt --insert-powersgd 2>&1 | FileCheck %s --check-prefix=GARBAGE

// CHECK: error: custom op 'ddp.allreduce' expected a reduction (sum, mean), got 'average'
// MISSING: cannot open input file '{{.*}}does-not-exist.mlir'
// TRUNCATED: truncated.mlir:2:45: error: expected operation name in quotes
// GARBAGE: error: unexpected character

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = ddp.allreduce average %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
