// RUN: ddp-opt %s --split-input-file --convert-ddp-to-llvm=include-upstream=true --verify-diagnostics | FileCheck %s

// A launch of a compiled kernel: ddprt_launch_kernel with the image as a
// NUL-terminated constant, the kernel's name, the grid and block, and an
// array of pointers to the parameters (a memref as its descriptor's fields,
// each in a stack slot), its status checked. Buffers in device memory come
// from ddprt_device_alloc (their size in bytes) and go back through
// ddprt_device_free. Nothing of the GPU dialect is left.
// CHECK-NOT: gpu.container_module
// CHECK-DAG: llvm.mlir.global internal constant @[[IMAGE:__ddp_str_[0-9A-F_]+]]("// PTX of @k\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[NAME:__ddp_str_[0-9A-F_]+]]("k\00")
// CHECK-LABEL: llvm.func @step(
// CHECK-SAME:    %[[N:[^:]*]]: i64
// The image's address once per function, at its entry.
// CHECK-NEXT:    %[[IMAGE_PTR:.*]] = llvm.mlir.addressof @[[IMAGE]]
// CHECK:         %[[FIVE:.*]] = llvm.mlir.constant(5 : i64) : i64
// CHECK-NEXT:    %[[PARAMS:.*]] = llvm.alloca %[[FIVE]] x !llvm.ptr
// CHECK:         %[[END:.*]] = llvm.getelementptr %{{.*}}[%[[N]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK:         %[[BYTES:.*]] = llvm.ptrtoint %[[END]] : !llvm.ptr to i64
// CHECK:         %[[STATUS:.*]] = llvm.call @ddprt_device_alloc(%[[CTX:.*]], %[[BYTES]], %[[SLOT:.*]]) :
// CHECK:         llvm.call @ddprt_check(%[[CTX]], %[[STATUS]],
// CHECK:         llvm.load %[[SLOT]] : !llvm.ptr -> !llvm.ptr
// CHECK-COUNT-5: llvm.store %{{.*}}, %{{.*}} : !llvm.ptr, !llvm.ptr
// CHECK:         %[[NAME_PTR:.*]] = llvm.mlir.addressof @[[NAME]]
// CHECK:         %[[LAUNCHED:.*]] = llvm.call @ddprt_launch_kernel(%[[CTX]], %[[IMAGE_PTR]], %[[NAME_PTR]], %[[N]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[PARAMS]])
// CHECK:         llvm.call @ddprt_check(%[[CTX]], %[[LAUNCHED]],
// CHECK:         %[[FREED:.*]] = llvm.call @ddprt_device_free(%[[CTX]], %{{.*}}) :
// CHECK:         llvm.call @ddprt_check(%[[CTX]], %[[FREED]],
// CHECK-NOT:     gpu.
module attributes {gpu.container_module} {
  gpu.binary @k [#gpu.object<#nvvm.target<chip = "sm_90">, "// PTX of @k">]
  func.func @step(%n: index) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    %buffer = memref.alloc(%n) {ddp.device_memory} : memref<?xf32>
    gpu.launch_func @k::@k blocks in (%n, %c1, %c1) threads in (%c256, %c1, %c1) args(%buffer : memref<?xf32>)
    memref.dealloc %buffer {ddp.device_memory} : memref<?xf32>
    return
  }
}

// -----

// A launch of a kernel whose module was not compiled.
module attributes {gpu.container_module} {
  gpu.module @missing {
    gpu.func @k() kernel {
      gpu.return
    }
  }
  func.func @step() {
    %c1 = arith.constant 1 : index
    // expected-error @below {{launches a kernel of @missing, which is not a gpu.binary: compile the GPU modules first (gpu-module-to-binary)}}
    // expected-error @below {{failed to legalize operation 'gpu.launch_func'}}
    gpu.launch_func @missing::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
}
