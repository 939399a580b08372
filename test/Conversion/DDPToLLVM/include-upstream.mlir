// RUN: ddp-opt %s --convert-ddp-to-llvm=include-upstream=true | FileCheck %s
// RUN: ddp-opt %s --convert-ddp-to-llvm=include-upstream=true | FileCheck %s --check-prefix=PURE

// With include-upstream, one conversion lowers the runtime calls, cf (a
// failed assert reports through ddprt_fail, with its location and message,
// then aborts if the host's handler returns), memref (allocations through
// the generic functions the host defines, not malloc/free; aligned ones, so
// that a buffer's allocated pointer is its aligned one) and func; only the
// unrealized casts between them are left for reconcile-unrealized-casts.

// CHECK-DAG: llvm.func @_mlir_memref_to_llvm_aligned_alloc(i64, i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @_mlir_memref_to_llvm_free(!llvm.ptr)
// CHECK-DAG: llvm.func @abort()
// CHECK-DAG: llvm.func @ddprt_fail(!llvm.ptr, !llvm.ptr, !llvm.ptr)
// CHECK-DAG: llvm.mlir.global internal constant @[[WHERE:__ddp_str_[0-9A-F]+]]("cf.assert at {{.*}}include-upstream.mlir:[[# @LINE + 25]]:3\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[MSG:__ddp_str_[0-9A-F]+]]("the gradient is finite\00")
// CHECK-NOT: llvm.func @puts
// CHECK-NOT: llvm.func @malloc
// CHECK-LABEL: llvm.func @step(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %[[OK:.*]]: i1)
// CHECK: llvm.cond_br %[[OK]], ^[[GOOD:.*]], ^[[BAD:.*]]
// CHECK: ^[[GOOD]]:
// CHECK-NOT: llvm.urem
// CHECK: llvm.call @_mlir_memref_to_llvm_aligned_alloc
// CHECK-NOT: llvm.urem
// CHECK: llvm.call @ddprt_copy(
// CHECK: llvm.call @ddprt_allreduce(
// CHECK: llvm.call @_mlir_memref_to_llvm_free
// CHECK: llvm.return
// CHECK: ^[[BAD]]:
// CHECK: %[[W:.*]] = llvm.mlir.addressof @[[WHERE]]
// CHECK: %[[M:.*]] = llvm.mlir.addressof @[[MSG]]
// CHECK: llvm.call @ddprt_fail(%{{.*}}, %[[W]], %[[M]])
// CHECK: llvm.call @abort()
// CHECK: llvm.unreachable
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

// A size that an earlier conversion (arith-to-llvm) left as a cast from i64
// to index: the memref conversion casts it back, and the two casts fold.
// PURE-LABEL: llvm.func @sized(
// PURE-SAME: %[[N:.*]]: i64)
// PURE-NOT: unrealized_conversion_cast
// PURE: llvm.getelementptr %{{.*}}[%[[N]]]
// PURE-NOT: unrealized_conversion_cast
func.func @sized(%n: i64) -> memref<?xf32> {
  %size = builtin.unrealized_conversion_cast %n : i64 to index
  %m = memref.alloc(%size) : memref<?xf32>
  return %m : memref<?xf32>
}
