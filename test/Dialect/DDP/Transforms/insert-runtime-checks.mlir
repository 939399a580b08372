// RUN: ddp-opt %s -split-input-file --ddp-insert-runtime-checks | FileCheck %s

// A dynamic index is checked against the tensor's size before the read,
// with the op's name in the message and its location on the assert.
// CHECK-LABEL: func.func @extract(
// CHECK-SAME: %[[T:.*]]: tensor<4xf32>, %[[I:.*]]: index
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK: %[[GE:.*]] = arith.cmpi sge, %[[I]], %[[C0]]
// CHECK: %[[LT:.*]] = arith.cmpi slt, %[[I]], %[[C4]]
// CHECK: %[[IN:.*]] = arith.andi %[[GE]], %[[LT]]
// CHECK: cf.assert %[[IN]], "tensor.extract: out-of-bounds access"
// CHECK: tensor.extract %[[T]][%[[I]]]
func.func @extract(%t: tensor<4xf32>, %i: index) -> f32 {
  %v = tensor.extract %t[%i] : tensor<4xf32>
  return %v : f32
}

// -----

// Integer division: the divisor is not zero and, when signed, the quotient
// fits (the minimum divided by -1 traps as division by zero does).
// CHECK-LABEL: func.func @divide(
// CHECK-SAME: %[[A:.*]]: i32, %[[B:.*]]: i32
// CHECK: %[[Z:.*]] = arith.constant 0 : i32
// CHECK: %[[NZ:.*]] = arith.cmpi ne, %[[B]], %[[Z]]
// CHECK: cf.assert %[[NZ]], "arith.divsi: integer division by zero"
// CHECK: %[[MIN:.*]] = arith.constant -2147483648 : i32
// CHECK: %[[ISMIN:.*]] = arith.cmpi eq, %[[A]], %[[MIN]]
// CHECK: %[[M1:.*]] = arith.constant -1 : i32
// CHECK: %[[ISM1:.*]] = arith.cmpi eq, %[[B]], %[[M1]]
// CHECK: %[[BOTH:.*]] = arith.andi %[[ISMIN]], %[[ISM1]]
// CHECK: %[[FITS:.*]] = arith.xori %[[BOTH]], %true
// CHECK: cf.assert %[[FITS]], "arith.divsi: signed integer overflow (the minimum divided by -1)"
// CHECK: arith.divsi %[[A]], %[[B]]
// Unsigned: only the divisor.
// CHECK: cf.assert {{.*}}, "arith.remui: integer division by zero"
// CHECK-NOT: cf.assert
// CHECK: arith.remui
// A constant divisor that cannot fail is not checked; -1 still is, for
// signed division; 0 always fails.
// CHECK-NOT: cf.assert
// CHECK: arith.floordivsi %[[A]], %{{.*}} : i32
// CHECK: cf.assert {{.*}}, "arith.divsi: signed integer overflow (the minimum divided by -1)"
// CHECK: arith.divsi %[[A]], %{{.*}} : i32
// CHECK: cf.assert {{.*}}, "arith.divui: integer division by zero"
// CHECK: arith.divui %[[A]], %{{.*}} : i32
func.func @divide(%a: i32, %b: i32) -> (i32, i32, i32, i32, i32) {
  %q = arith.divsi %a, %b : i32
  %r = arith.remui %a, %b : i32
  %c7 = arith.constant 7 : i32
  %f = arith.floordivsi %a, %c7 : i32
  %cm1 = arith.constant -1 : i32
  %n = arith.divsi %a, %cm1 : i32
  %c0 = arith.constant 0 : i32
  %z = arith.divui %a, %c0 : i32
  return %q, %r, %f, %n, %z : i32, i32, i32, i32, i32
}

// -----

// Float division and ops without checks are left alone.
// CHECK-LABEL: func.func @untouched(
// CHECK-NOT: cf.assert
// CHECK: arith.divf
func.func @untouched(%a: f32, %b: f32) -> f32 {
  %q = arith.divf %a, %b : f32
  return %q : f32
}

// -----

// tensor.insert_slice (upstream has no model for it): the slice lies in
// the destination; tensor.empty: its dynamic sizes are not negative.
// CHECK-LABEL: func.func @insert_and_empty(
// CHECK: tensor.dim
// CHECK: cf.assert %{{.*}}, "tensor.insert_slice: out-of-bounds slice"
// CHECK: tensor.insert_slice
// CHECK: %[[NONNEG:.*]] = arith.cmpi sge, %{{.*}}, %{{.*}} : index
// CHECK: cf.assert %[[NONNEG]], "tensor.empty: negative size"
// CHECK: tensor.empty
func.func @insert_and_empty(%s: tensor<4xf32>, %d: tensor<8xf32>, %i: index, %n: index) -> (tensor<8xf32>, tensor<?xf32>) {
  %w = tensor.insert_slice %s into %d[%i] [4] [1] : tensor<4xf32> into tensor<8xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  return %w, %e : tensor<8xf32>, tensor<?xf32>
}

// -----

// tensor.cast to a static size: the dynamic dimension it fixes matches.
// CHECK-LABEL: func.func @cast(
// CHECK: %[[D:.*]] = tensor.dim %{{.*}}, %{{.*}} : tensor<?x4xf32>
// CHECK: %[[OK:.*]] = arith.cmpi eq, %[[D]], %{{.*}} : index
// CHECK: cf.assert %[[OK]], "tensor.cast: dimension 0 is not 5"
// CHECK: tensor.cast
func.func @cast(%t: tensor<?x4xf32>) -> tensor<5x4xf32> {
  %c = tensor.cast %t : tensor<?x4xf32> to tensor<5x4xf32>
  return %c : tensor<5x4xf32>
}
