// RUN: ddp-opt %s --convert-ddp-to-llvm | FileCheck %s
// RUN: ddp-opt %s --convert-ddp-to-llvm=include-upstream | FileCheck %s --check-prefix=UPSTREAM

// The runtime's functions and constants are declared before the bodies are
// converted, and what nothing refers to afterwards is removed: only the
// functions the calls use remain, and a declaration the module had is
// used as it is, not declared again.
// CHECK-LABEL: module
// CHECK-NEXT: llvm.func @ddprt_current_context() -> !llvm.ptr
// CHECK-NEXT: llvm.func @ddprt_check(!llvm.ptr, i32, !llvm.ptr)
// CHECK-NEXT: llvm.mlir.global internal constant @__ddp_str_{{[0-9A-F]+}}("ddp.scale at {{.*}}")
// CHECK-NEXT: llvm.mlir.global internal constant @__ddp_tab_{{[0-9A-F]+}}(dense<[0, 0, 4]> : tensor<3xi64>)
// CHECK-NEXT: llvm.func @ddprt_scale(!llvm.ptr, i32, !llvm.ptr, i32) -> i32
// CHECK-NEXT: llvm.func @ddprt_fail(!llvm.ptr, !llvm.ptr, !llvm.ptr)
// CHECK-NEXT: func.func @scale(
// UPSTREAM-LABEL: module
// UPSTREAM-COUNT-1: llvm.func @ddprt_scale(
// UPSTREAM-NOT: llvm.func @ddprt_allreduce(
llvm.func @ddprt_scale(!llvm.ptr, i32, !llvm.ptr, i32) -> i32
// A declaration nothing calls, written by the module: kept.
llvm.func @ddprt_fail(!llvm.ptr, !llvm.ptr, !llvm.ptr)
func.func @scale(%a: memref<4xf32>) {
  ddp.buffer.scale %a by inverse_world_size : memref<4xf32>
  return
}
