// RUN: ddp-opt %s --convert-ddp-to-llvm | FileCheck %s
// RUN: ddp-opt %s --convert-ddp-to-llvm | FileCheck %s --check-prefix=NAMES

// Each buffer op is one runtime call for its bucket, with the context from
// ddprt_current_context and the status checked with the op's location:
// several ops in one function. ops.mlir has one test per op pattern.

ddp.state @step : i64
ddp.state @q : tensor<32x2xf32>

// CHECK-DAG: llvm.func @ddprt_current_context() -> !llvm.ptr
// CHECK-DAG: llvm.func @ddprt_check(!llvm.ptr, i32, !llvm.ptr)
// CHECK-DAG: llvm.func @ddprt_allreduce(!llvm.ptr, i32, i32, !llvm.ptr, i32) -> i32
// CHECK-DAG: llvm.func @ddprt_project(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i32) -> i32
// CHECK-DAG: llvm.func @ddprt_state_get(!llvm.ptr, !llvm.ptr, i32, i64, !llvm.ptr) -> i32
// CHECK-DAG: llvm.mlir.global internal constant @{{.*}}("ddp.allreduce at {{.*}}ddp-to-llvm.mlir:{{[0-9]+}}:3\00")
// CHECK-DAG: llvm.mlir.global internal constant @{{.*}}("q\00")
// Two buffers in one stack array: {data, dtype f32 = 0, numel} from the
// op's constant table.
// CHECK-DAG: llvm.mlir.global internal constant @[[TABLE:__ddp_tab_[0-9A-F]+]](dense<[0, 0, 2048, 0, 0, 32]> : tensor<6xi64>)
// CHECK-NOT: {{^ *}}ddp.state

// The context is read once, at the function's entry, for every call.
// CHECK-LABEL: func.func @calls
// CHECK-DAG: %[[CTX:.*]] = llvm.call @ddprt_current_context()
// CHECK-DAG: %[[ARRAY:.*]] = llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64)>
// The residual group is empty: a null pointer.
// CHECK-DAG: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
func.func @calls(%g: memref<64x32xf32>, %b: memref<32xf32>, %p: memref<64x2xf32>) -> i64 {
  // CHECK: llvm.mlir.addressof @[[TABLE]]
  // CHECK: %[[STATUS:.*]] = llvm.call @ddprt_allreduce(%[[CTX]], %{{.*}}, %{{.*}}, %[[ARRAY]], %{{.*}})
  // CHECK: llvm.call @ddprt_check(%[[CTX]], %[[STATUS]], %{{.*}})
  ddp.buffer.allreduce mean %g, %b role uncompressed : memref<64x32xf32>, memref<32xf32>
  // CHECK: llvm.call @ddprt_state_get(%[[CTX]]
  // CHECK: llvm.call @ddprt_state_data
  %q = ddp.buffer.state @q : memref<32x2xf32>
  // CHECK: llvm.call @ddprt_project(%[[CTX]], %{{.*}}, %[[NULL]], %{{.*}}, %{{.*}}, %{{.*}})
  // CHECK-NOT: ddprt_current_context
  ddp.buffer.project %g times %q into %p : memref<64x32xf32> times memref<32x2xf32> into memref<64x2xf32>
  // The step counter is read and written in host memory.
  // CHECK: %[[DATA:.*]] = llvm.call @ddprt_state_data
  // CHECK: llvm.load %[[DATA]] : !llvm.ptr -> i64
  %s = ddp.state_load @step : i64
  // CHECK: llvm.store %{{.*}}, %{{.*}} : i64, !llvm.ptr
  ddp.state_store %s, @step : i64
  return %s : i64
}

// A bucket's op carries its gradients' names; ddprt_check's text names them
// (in order), so that a message about "tensor #1" can be read.
// NAMES: llvm.mlir.global internal constant @{{.*}}("ddp.allreduce (fc1.weight, fc2.weight)\00")
func.func @named(%a: memref<4xf32>, %b: memref<8xf32>) {
  ddp.buffer.allreduce mean %a, %b : memref<4xf32>, memref<8xf32> loc(fused["fc1.weight", "fc2.weight"])
  return
}

// The runtime reads the arrays it is passed during the call only: the calls
// of a function share one stack array per type, size and place in the call
// (two calls, one alloca), and each fills it right before it calls.
// CHECK-LABEL: func.func @shared_arrays
// CHECK-COUNT-1: llvm.alloca %{{.*}} x !llvm.struct<(ptr, i32, i64)>
// CHECK-NOT: llvm.alloca
// CHECK: "llvm.intr.memcpy"(%[[SHARED:.*]], %{{.*}}, %{{.*}})
// CHECK: llvm.call @ddprt_allreduce(%{{.*}}, %{{.*}}, %{{.*}}, %[[SHARED]], %{{.*}})
// CHECK: "llvm.intr.memcpy"(%[[SHARED]], %{{.*}}, %{{.*}})
// CHECK: llvm.call @ddprt_allreduce(%{{.*}}, %{{.*}}, %{{.*}}, %[[SHARED]], %{{.*}})
func.func @shared_arrays(%a: memref<4xf32>, %b: memref<8xf32>, %c: memref<16xf32>, %d: memref<2xf32>) {
  ddp.buffer.allreduce mean %a, %b : memref<4xf32>, memref<8xf32>
  ddp.buffer.allreduce sum %c, %d : memref<16xf32>, memref<2xf32>
  return
}
