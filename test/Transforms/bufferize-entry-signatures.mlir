// RUN: ddp-opt %s -split-input-file --bufferize-entry-signatures | FileCheck %s
// RUN: ddp-opt %s -split-input-file --bufferize-entry-signatures \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   --buffer-deallocation-pipeline --ddp-donate-arguments \
// RUN:   | FileCheck %s --check-prefix=BUF

// An entry point: tensor arguments become identity-layout memrefs read
// through restrict/writable to_tensor ops, tensor results are returned
// through read-only to_buffer ops; other arguments stay as they are.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[G:.*]]: memref<4x8xf32>, %[[N:.*]]: i64, %[[B:.*]]: memref<?xbf16>)
// CHECK-SAME: -> (memref<4x8xf32>, i64, memref<?xbf16>)
// CHECK-DAG: %[[TG:.*]] = bufferization.to_tensor %[[G]] restrict writable : memref<4x8xf32> to tensor<4x8xf32>
// CHECK-DAG: %[[TB:.*]] = bufferization.to_tensor %[[B]] restrict writable : memref<?xbf16> to tensor<?xbf16>
// CHECK: %[[R:.*]] = ddp.allreduce mean %[[TG]]
// CHECK: %[[MR:.*]] = bufferization.to_buffer %[[R]] read_only : tensor<4x8xf32> to memref<4x8xf32>
// CHECK: %[[MB:.*]] = bufferization.to_buffer %[[TB]] read_only : tensor<?xbf16> to memref<?xbf16>
// CHECK: return %[[MR]], %[[N]], %[[MB]]
// BUF-LABEL: func.func @step(
// BUF-SAME: %[[G:.*]]: memref<4x8xf32>, %[[N:.*]]: i64, %[[B:.*]]: memref<?xbf16>)
// BUF: ddp.buffer.allreduce mean %[[G]]
// BUF: return %[[G]], %[[N]], %[[B]]
func.func @step(%g: tensor<4x8xf32>, %n: i64, %b: tensor<?xbf16>)
    -> (tensor<4x8xf32>, i64, tensor<?xbf16>) attributes {ddp.donate_arguments} {
  %r = ddp.allreduce mean %g : tensor<4x8xf32>
  return %r, %n, %b : tensor<4x8xf32>, i64, tensor<?xbf16>
}

// -----

// An argument the caller keeps is read through a to_tensor that is not
// writable, and the attribute goes: One-Shot reduces a copy of it, as it
// does for such an argument of a tensor signature.
// CHECK-LABEL: func.func @kept(
// CHECK-SAME: %[[G:.*]]: memref<4xf32>) -> memref<4xf32>
// CHECK-NOT: bufferization.writable
// CHECK: bufferization.to_tensor %[[G]] restrict : memref<4xf32> to tensor<4xf32>
// BUF-LABEL: func.func @kept(
// BUF-SAME: %[[G:.*]]: memref<4xf32>
// BUF: %[[C:.*]] = memref.alloc
// BUF: memref.copy %[[G]], %[[C]]
// BUF: ddp.buffer.allreduce_start sum %[[C]]
// BUF: return %[[C]]
func.func @kept(%g: tensor<4xf32> {bufferization.writable = false}) -> tensor<4xf32> {
  %h = ddp.allreduce_start sum %g : tensor<4xf32>
  %r = ddp.wait %h : !ddp.request<tensor<4xf32>>
  return %r : tensor<4xf32>
}

// -----

// One tensor returned twice: one result is the (donated) argument, the other
// a copy, as with One-Shot's own signature.
// BUF-LABEL: func.func @twice(
// BUF-SAME: %[[G:.*]]: memref<64xf32>
// BUF: %[[C:.*]] = bufferization.clone %[[G]]
// BUF: return %[[G]], %[[C]]
func.func @twice(%g: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) attributes {ddp.donate_arguments} {
  %r = ddp.allreduce mean %g : tensor<64xf32>
  return %r, %r : tensor<64xf32>, tensor<64xf32>
}

// -----

// A function the module calls keeps its tensor signature (its callers need
// One-Shot's analysis of it); its caller, an entry point, is rewritten.
// CHECK-LABEL: func.func private @callee(
// CHECK-SAME: %{{.*}}: tensor<4xf32>) -> tensor<4xf32>
// CHECK-LABEL: func.func @caller(
// CHECK-SAME: %[[G:.*]]: memref<4xf32>) -> memref<4xf32>
// CHECK: %[[T:.*]] = bufferization.to_tensor %[[G]] restrict writable
// CHECK: call @callee(%[[T]])
func.func private @callee(%g: tensor<4xf32>) -> tensor<4xf32> {
  %r = ddp.allreduce mean %g : tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func @caller(%g: tensor<4xf32>) -> tensor<4xf32> {
  %r = call @callee(%g) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Left to One-Shot: declarations, unranked tensors, tensors with an
// encoding; and nothing to do without tensors.
// CHECK-LABEL: func.func private @declared(tensor<4xf32>) -> tensor<4xf32>
// CHECK-LABEL: func.func @unranked(
// CHECK-SAME: %{{.*}}: tensor<*xf32>, %{{.*}}: tensor<4xf32>) -> tensor<4xf32>
// CHECK-LABEL: func.func @encoded(
// CHECK-SAME: %{{.*}}: tensor<4xf32, "enc">) -> tensor<4xf32, "enc">
// CHECK-LABEL: func.func @scalars(
// CHECK-SAME: %{{.*}}: i64) -> i64
// CHECK-NOT: bufferization.to_tensor
func.func private @declared(tensor<4xf32>) -> tensor<4xf32>
func.func @unranked(%u: tensor<*xf32>, %g: tensor<4xf32>) -> tensor<4xf32> {
  return %g : tensor<4xf32>
}
func.func @encoded(%g: tensor<4xf32, "enc">) -> tensor<4xf32, "enc"> {
  return %g : tensor<4xf32, "enc">
}
func.func @scalars(%n: i64) -> i64 {
  return %n : i64
}
