// What ddp-opt prints, space for space: one space between an op's words,
// enums included. (MLIR 22's generated attribute printers start with a
// space of their own; the assembly formats absorb it with ``. An MLIR that
// no longer emits it fails here: drop the `` then.)
// RUN: ddp-opt %s | FileCheck %s --strict-whitespace

// CHECK-LABEL: func.func @tensors(
// CHECK-NEXT: {{^    }}%0 = ddp.allreduce sum %arg0 role compressed group node : tensor<4xf32>
// CHECK-NEXT: {{^    }}%1 = ddp.allreduce_start mean %arg0 role uncompressed group across_nodes : tensor<4xf32>
// CHECK-NEXT: {{^    }}%2 = ddp.wait %1 : !ddp.request<tensor<4xf32>>
// CHECK-NEXT: {{^    }}%3 = ddp.allgather %arg0 role gradient : tensor<4xf32>
// CHECK-NEXT: {{^    }}%4 = ddp.scale %0 by inverse_world_size : tensor<4xf32>
// CHECK-NEXT: {{^    }}%5 = ddp.cast %4 scaled by world_size scheme <"fp16"> : tensor<4xf32> to tensor<4xf16>
func.func @tensors(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<?x4xf32>, tensor<4xf16>) {
  %r = ddp.allreduce sum %x role compressed group node : tensor<4xf32>
  %h = ddp.allreduce_start mean %x role uncompressed group across_nodes : tensor<4xf32>
  %w = ddp.wait %h : !ddp.request<tensor<4xf32>>
  %g = ddp.allgather %x role gradient : tensor<4xf32>
  %s = ddp.scale %r by inverse_world_size : tensor<4xf32>
  %c = ddp.cast %s scaled by world_size scheme <"fp16"> : tensor<4xf32> to tensor<4xf16>
  return %w, %g, %c : tensor<4xf32>, tensor<?x4xf32>, tensor<4xf16>
}

// CHECK-LABEL: func.func @buffers(
// CHECK-NEXT: {{^    }}ddp.buffer.allreduce mean %arg0 role uncompressed group node : memref<32xf32>
// CHECK-NEXT: {{^    }}%0 = ddp.buffer.allreduce_start sum %arg0 role compressed : memref<32xf32> -> !ddp.request<memref<32xf32>>
// CHECK-NEXT: {{^    }}ddp.buffer.wait %0 : !ddp.request<memref<32xf32>>
// CHECK-NEXT: {{^    }}ddp.buffer.scale %arg0 by world_size : memref<32xf32>
// CHECK-NEXT: {{^    }}ddp.buffer.cast %arg0 scaled by inverse_world_size into %arg1 : memref<32xf32> into memref<32xf16>
func.func @buffers(%b: memref<32xf32>, %h: memref<32xf16>) {
  ddp.buffer.allreduce mean %b role uncompressed group node : memref<32xf32>
  %r = ddp.buffer.allreduce_start sum %b role compressed : memref<32xf32> -> !ddp.request<memref<32xf32>>
  ddp.buffer.wait %r : !ddp.request<memref<32xf32>>
  ddp.buffer.scale %b by world_size : memref<32xf32>
  ddp.buffer.cast %b scaled by inverse_world_size into %h : memref<32xf32> into memref<32xf16>
  return
}
