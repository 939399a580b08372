// RUN: ddp-opt %s --ddp-merge-gpu-modules | FileCheck %s

// gpu-kernel-outlining's modules of one kernel each become one module, the
// kernels named after the modules they came from, the launches pointed at
// them. A module with a target already, or more than one kernel, stays.
// CHECK:     gpu.module @step_kernel {
// CHECK-NEXT:  gpu.func @step_kernel(
// CHECK:       gpu.func @step_kernel_0(
// CHECK:       gpu.func @step_kernel_1(
// CHECK:     }
// CHECK-NOT: gpu.module @step_kernel_0
// CHECK-NOT: gpu.module @step_kernel_1
// CHECK:     gpu.module @compiled [#nvvm.target]
// CHECK:     gpu.module @two
// CHECK-LABEL: func.func @step(
// CHECK:       gpu.launch_func @step_kernel::@step_kernel blocks
// CHECK:       gpu.launch_func @step_kernel::@step_kernel_0 blocks
// CHECK:       gpu.launch_func @step_kernel::@step_kernel_1 blocks
// CHECK:       gpu.launch_func @step_kernel::@step_kernel_0 blocks
// CHECK:       gpu.launch_func @compiled::@k blocks
// CHECK:       gpu.launch_func @two::@b blocks
module attributes {gpu.container_module} {
  gpu.module @step_kernel {
    gpu.func @step_kernel(%a: memref<4xf32>) kernel {
      gpu.return
    }
  }
  gpu.module @step_kernel_0 {
    gpu.func @step_kernel(%a: memref<4xf32>, %x: f32) kernel {
      gpu.return
    }
  }
  gpu.module @step_kernel_1 {
    gpu.func @step_kernel() kernel {
      gpu.return
    }
  }
  gpu.module @compiled [#nvvm.target] {
    gpu.func @k() kernel {
      gpu.return
    }
  }
  gpu.module @two {
    gpu.func @a() kernel {
      gpu.return
    }
    gpu.func @b() kernel {
      gpu.return
    }
  }
  func.func @step(%a: memref<4xf32>, %x: f32) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @step_kernel::@step_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @step_kernel_0::@step_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>, %x : f32)
    gpu.launch_func @step_kernel_1::@step_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @step_kernel_0::@step_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>, %x : f32)
    gpu.launch_func @compiled::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @two::@b blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
}
