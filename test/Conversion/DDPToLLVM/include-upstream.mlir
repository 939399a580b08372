// RUN: ddp-opt %s --convert-ddp-to-llvm=include-upstream=true | FileCheck %s

// With include-upstream, one conversion lowers the runtime calls, cf (an
// assert declares and calls abort), memref (allocations through the generic
// functions the host defines, not malloc/free) and func; only the
// unrealized casts between them are left for reconcile-unrealized-casts.

// CHECK-DAG: llvm.func @_mlir_memref_to_llvm_alloc(i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @_mlir_memref_to_llvm_free(!llvm.ptr)
// CHECK-DAG: llvm.func @abort()
// CHECK-NOT: llvm.func @malloc
// CHECK-LABEL: llvm.func @step(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %[[OK:.*]]: i1)
// CHECK: llvm.cond_br %[[OK]], ^[[GOOD:.*]], ^[[BAD:.*]]
// CHECK: ^[[GOOD]]:
// CHECK: llvm.call @_mlir_memref_to_llvm_alloc
// CHECK: llvm.call @ddprt_copy(
// CHECK: llvm.call @ddprt_allreduce(
// CHECK: llvm.call @_mlir_memref_to_llvm_free
// CHECK: llvm.return
// CHECK: ^[[BAD]]:
// CHECK: llvm.call @abort()
// CHECK-NOT: func.func
// CHECK-NOT: memref.
// CHECK-NOT: cf.
func.func @step(%g: memref<8xf32>, %ok: i1) {
  cf.assert %ok, "the gradient is finite"
  %copy = memref.alloc() : memref<8xf32>
  ddp.buffer.copy %g into %copy : memref<8xf32>
  ddp.buffer.allreduce mean %copy : memref<8xf32>
  memref.dealloc %copy : memref<8xf32>
  return
}
