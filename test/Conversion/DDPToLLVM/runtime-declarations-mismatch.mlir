// RUN: not ddp-opt %s --convert-ddp-to-llvm 2>&1 | FileCheck %s
// RUN: not ddp-opt %s --convert-ddp-to-llvm=include-upstream 2>&1 | FileCheck %s

// A module that declares a runtime function with another signature than
// its prototype in ddprt.h is refused, with the one it must have.
// CHECK: error: 'ddprt_scale' is a function of the runtime, which compiled code calls as '!llvm.func<i32 (ptr, i32, ptr, i32)>'
llvm.func @ddprt_scale(i32) -> i32
func.func @scale(%a: memref<4xf32>) {
  ddp.buffer.scale %a by inverse_world_size : memref<4xf32>
  return
}
