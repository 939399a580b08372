// Top-k sparsification with error feedback: m = g + e, the k elements of m
// largest in magnitude (ddp.top_k), e = m with zeros where they were, one
// allgather of values and i32 indices, every rank's values added into zeros
// in rank order at their indices, divided by W.
// RUN: ddp-opt %s --insert-topk=ratio=0.2 2>&1 | FileCheck %s
// RUN: ddp-opt %s --insert-topk="ratio=0.2 error-feedback=false" 2>&1 | FileCheck %s --check-prefix=NOEF
// RUN: ddp-opt %s --insert-topk="ratio=1" 2>&1 | FileCheck %s --check-prefix=ALL
// RUN: ddp-opt %s --insert-topk="ratio=1e-9 buckets=^c$" 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: not ddp-opt %s --insert-topk=ratio=0 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not ddp-opt %s --insert-topk=ratio=1.5 2>&1 | FileCheck %s --check-prefix=BAD-HIGH
// RUN: not ddp-opt %s --insert-topk=ratio=nan 2>&1 | FileCheck %s --check-prefix=BAD-NAN
// BAD: error: insert-topk: ratio=0 must be in (0, 1]: the fraction of each bucket's elements each rank sends
// BAD-HIGH: error: insert-topk: ratio=1.5 must be in (0, 1]
// BAD-NAN: error: insert-topk: ratio=nan must be in (0, 1]

// A bucket per element type: f32 (w and b, 15 elements, k = 3) and f64
// (c, 40 elements, k = 8).
// CHECK-DAG: ddp.state @ddp.topk_error.step.0 : tensor<15xf32>
// CHECK-DAG: ddp.state @ddp.topk_error.step.1 : tensor<40xf64>
// CHECK-LABEL: func.func @step
// CHECK: %[[FLAT:.*]] = ddp.flatten %arg0, %arg1 scheme <"topk", {error_feedback = true, ratio = 2.000000e-01 : f64}> : tensor<2x5xf32>, tensor<5xf32> -> tensor<15xf32>
// CHECK-NEXT: ddp.count_uncompressed 15
// CHECK: %[[E:.*]] = ddp.state_load @ddp.topk_error.step.0 : tensor<15xf32>
// CHECK: %[[M:.*]] = arith.addf %[[FLAT]], %[[E]] : tensor<15xf32>
// CHECK: %[[V:.*]], %[[I:.*]] = ddp.top_k %[[M]] : tensor<15xf32> -> tensor<3xf32>, tensor<3xi32>
// The residual: m with zeros at the selected indices, stored (recovered
// from NaN like every scheme's state).
// CHECK: %[[REST:.*]] = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[T:.*]] = %[[M]]) -> (tensor<15xf32>)
// CHECK:   tensor.extract %[[I]][%{{.*}}] : tensor<3xi32>
// CHECK:   tensor.insert %{{.*}} into %[[T]][%{{.*}}] : tensor<15xf32>
// CHECK: ddp.inspect %[[REST]]
// CHECK: ddp.state_store %{{.*}}, @ddp.topk_error.step.0 : tensor<15xf32>
// CHECK: %[[G:.*]]:2 = ddp.allgather %[[V]], %[[I]] : tensor<3xf32>, tensor<3xi32>
// Ranks outermost, then the selected elements in order.
// CHECK: %[[ZEROS:.*]] = linalg.fill
// CHECK: %[[SUM:.*]] = scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[S:.*]] = %[[ZEROS]])
// CHECK:   scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[T2:.*]] = %[[S]])
// CHECK:     tensor.extract %[[G]]#1[%[[R]], %[[J]]] : tensor<?x3xi32>
// CHECK:     tensor.extract %[[G]]#0[%[[R]], %[[J]]] : tensor<?x3xf32>
// CHECK:     arith.addf
// CHECK:     tensor.insert
// CHECK: %[[W:.*]] = tensor.dim %[[G]]#0, %{{.*}} : tensor<?x3xf32>
// CHECK: %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<15xf32>)
// CHECK:   arith.divf
// CHECK: ddp.unflatten %[[MEAN]] : tensor<15xf32> -> tensor<2x5xf32>, tensor<5xf32>
// CHECK: ddp.top_k %{{.*}} : tensor<40xf64> -> tensor<8xf64>, tensor<8xi32>
// CHECK: ddp.allgather %{{.*}}, %{{.*}} : tensor<8xf64>, tensor<8xi32>

// Without error feedback: no state, the bucket itself is selected from.
// NOEF-NOT: ddp.state
// NOEF: %[[FLAT:.*]] = ddp.flatten
// NOEF-NEXT: ddp.count_uncompressed 15
// NOEF-NEXT: ddp.top_k %[[FLAT]] : tensor<15xf32> -> tensor<3xf32>, tensor<3xi32>
// NOEF-NOT: ddp.state_store

// ratio=1 sends everything (the exact mean, as a test of the machinery).
// ALL: ddp.top_k %{{.*}} : tensor<15xf32> -> tensor<15xf32>, tensor<15xi32>

// At least one element; buckets= selects by name.
// ONE-DAG: ddp.allreduce mean %arg0, %arg1 : tensor<2x5xf32>, tensor<5xf32>
// ONE-DAG: ddp.top_k %{{.*}} : tensor<40xf64> -> tensor<1xf64>, tensor<1xi32>
func.func @step(%w: tensor<2x5xf32> loc("w"), %b: tensor<5xf32> loc("b"),
                %c: tensor<40xf64> loc("c"))
    -> (tensor<2x5xf32>, tensor<5xf32>, tensor<40xf64>) {
  %r:3 = ddp.allreduce mean %w, %b, %c : tensor<2x5xf32>, tensor<5xf32>, tensor<40xf64>
  return %r#0, %r#1, %r#2 : tensor<2x5xf32>, tensor<5xf32>, tensor<40xf64>
}

// The report: one row per bucket, k values and k indices sent.
// RUN: ddp-opt %s --insert-topk=ratio=0.2 --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// REPORT: bucket of 2 [w,b] {{ *}}15 {{ *}}f32 {{ *}}topk {{ *}}- f32+i32 {{ *}}15 {{ *}}6 {{ *}}2.50x
// REPORT: bucket of 1 [c] {{ *}}40 {{ *}}f64 {{ *}}topk {{ *}}- f64+i32 {{ *}}40 {{ *}}16 {{ *}}2.50x
// REPORT: total: 3 tensors, 3 compressed; elements 55 -> 22 (2.50x); bytes 380 -> 120 (3.17x)

// The JSON report gives the scheme's options.
// RUN: ddp-opt %s --insert-topk=ratio=0.2 --ddp-compression-report=json=- -o /dev/null 2>/dev/null | FileCheck %s --check-prefix=JSON
// JSON: "decision": "topk",
// JSON-NEXT: "options": {
// JSON-NEXT: "error_feedback": true,
// JSON-NEXT: "ratio": 0.20000000000000001
