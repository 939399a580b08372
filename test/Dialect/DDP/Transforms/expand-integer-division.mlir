// RUN: ddp-opt %s --ddp-expand-integer-division | FileCheck %s

// The rounding divisions become ops with an LLVM lowering; nothing else
// changes: minimumf and maximumf stay (upstream's arith-expand would make
// them compares and selects, which LLVM does not vectorize as reductions).
// CHECK-LABEL: func.func @divisions(
func.func @divisions(%a: i32, %b: i32, %x: f32, %y: f32) -> (i32, i32, i32, f32, f32) {
  // CHECK-NOT: arith.ceildivsi
  // CHECK-NOT: arith.ceildivui
  // CHECK-NOT: arith.floordivsi
  // CHECK: arith.divsi
  // CHECK: arith.minimumf %{{.*}}, %{{.*}} : f32
  // CHECK-NEXT: arith.maximumf %{{.*}}, %{{.*}} : f32
  %0 = arith.ceildivsi %a, %b : i32
  %1 = arith.ceildivui %a, %b : i32
  %2 = arith.floordivsi %a, %b : i32
  %3 = arith.minimumf %x, %y : f32
  %4 = arith.maximumf %x, %y : f32
  return %0, %1, %2, %3, %4 : i32, i32, i32, f32, f32
}
