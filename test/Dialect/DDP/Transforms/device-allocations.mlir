// RUN: ddp-opt %s --ddp-device-allocations | FileCheck %s

// Buffers only kernels and runtime calls touch (directly or through views)
// go to the runtime's device memory, allocation and free; every other
// buffer stays where the host reads it.
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @k(%a: memref<64xf32>) kernel {
      gpu.return
    }
  }
  func.func private @consume(memref<64xf32>)

  // CHECK-LABEL: func.func @step(
  // CHECK:         %[[DEVICE:.*]] = memref.alloc() {ddp.device_memory} : memref<64xf32>
  // CHECK:         %[[VIEWED:.*]] = memref.alloc() {ddp.device_memory} : memref<8x8xf32>
  // CHECK:         %[[HOST_READ:.*]] = memref.alloc() : memref<64xf32>
  // CHECK:         %[[RETURNED:.*]] = memref.alloc() : memref<64xf32>
  // CHECK:         %[[CALLED:.*]] = memref.alloc() : memref<64xf32>
  // CHECK:         %[[NEVER_FREED:.*]] = memref.alloc() : memref<64xf32>
  // CHECK:         %[[BOOK:.*]] = memref.alloc() : memref<2xindex>
  // CHECK:         memref.dealloc %[[DEVICE]] {ddp.device_memory}
  // CHECK:         memref.dealloc %[[VIEWED]] {ddp.device_memory}
  // CHECK:         memref.dealloc %[[HOST_READ]] :
  // CHECK:         memref.dealloc %[[CALLED]] :
  // CHECK:         memref.dealloc %[[BOOK]] :
  func.func @step(%i: index) -> (memref<64xf32>, f32) {
    %c1 = arith.constant 1 : index
    %device = memref.alloc() : memref<64xf32>
    %viewed = memref.alloc() : memref<8x8xf32>
    %host_read = memref.alloc() : memref<64xf32>
    %returned = memref.alloc() : memref<64xf32>
    %called = memref.alloc() : memref<64xf32>
    %never_freed = memref.alloc() : memref<64xf32>
    %book = memref.alloc() : memref<2xindex>
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%device : memref<64xf32>)
    ddp.buffer.allreduce sum %device : memref<64xf32>
    %flat = memref.collapse_shape %viewed [[0, 1]] : memref<8x8xf32> into memref<64xf32>
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%flat : memref<64xf32>)
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%host_read : memref<64xf32>)
    %x = memref.load %host_read[%i] : memref<64xf32>
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%returned : memref<64xf32>)
    func.call @consume(%called) : (memref<64xf32>) -> ()
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%never_freed : memref<64xf32>)
    memref.store %i, %book[%c1] : memref<2xindex>
    memref.dealloc %device : memref<64xf32>
    memref.dealloc %viewed : memref<8x8xf32>
    memref.dealloc %host_read : memref<64xf32>
    memref.dealloc %called : memref<64xf32>
    memref.dealloc %book : memref<2xindex>
    return %returned, %x : memref<64xf32>, f32
  }
}
