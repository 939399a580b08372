// A module written for upstream MLIR works unmodified with the insertion
// passes: linalg and tensor ops stay, shard.all_reduce becomes compressed
// communication.
// RUN: ddp-opt %s --insert-powersgd=rank=2 | FileCheck %s
// RUN: ddp-opt %s --insert-fp16-compression | FileCheck %s --check-prefix=FP16
// RUN: ddp-opt %s --ddp-compress="powersgd-rank=2 start-iter=0 narrow=bf16" | FileCheck %s --check-prefix=PIPE

shard.grid @dp(shape = 8)

// CHECK-LABEL: func.func @train_step(
// CHECK: %[[G:.*]] = linalg.matmul
// CHECK: scf.if
// CHECK:   ddp.allreduce mean %{{.*}}, %[[G]] role warmup : tensor<128xf32>, tensor<128x64xf32>
// CHECK:   ddp.allreduce_start mean %{{.*}} role uncompressed : tensor<128xf32>
// CHECK:   ddp.allreduce sum %{{.*}} role compressed : tensor<128x2xf32>
// CHECK: linalg.generic
// CHECK-NOT: shard.all_reduce
// FP16-LABEL: func.func @train_step(
// FP16: ddp.allreduce sum %{{.*}} : tensor<128x64xf16>
// FP16: ddp.allreduce sum %{{.*}} : tensor<128xf16>
// PIPE-LABEL: func.func @train_step(
// PIPE: ddp.cast %{{.*}} scaled by inverse_world_size scheme <"bf16"> : tensor<128xf32> to tensor<128xbf16>
// PIPE: ddp.project_residual
// PIPE: ddp.allreduce_start sum %{{.*}} role compressed : tensor<128x2xbf16>
func.func @train_step(%x: tensor<128x32xf32>, %dy: tensor<32x64xf32>, %db: tensor<128xf32>,
                      %w: tensor<128x64xf32>) -> tensor<128x64xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<128x64xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<128x64xf32>) -> tensor<128x64xf32>
  %g = linalg.matmul ins(%x, %dy : tensor<128x32xf32>, tensor<32x64xf32>) outs(%acc : tensor<128x64xf32>) -> tensor<128x64xf32>
  %gw = shard.all_reduce %g on @dp grid_axes = [0] reduction = average : tensor<128x64xf32> -> tensor<128x64xf32>
  %gb = shard.all_reduce %db on @dp grid_axes = [0] reduction = average : tensor<128xf32> -> tensor<128xf32>
  %lr = arith.constant 0.1 : f32
  %new = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                         iterator_types = ["parallel", "parallel"]}
      ins(%gw : tensor<128x64xf32>) outs(%w : tensor<128x64xf32>) {
  ^bb0(%gi: f32, %wi: f32):
    %d = arith.mulf %gi, %lr : f32
    %n = arith.subf %wi, %d : f32
    linalg.yield %n : f32
  } -> tensor<128x64xf32>
  return %new : tensor<128x64xf32>
}

// The insertion passes and the pipeline refuse a gradient average over part
// of a grid (the data-parallel axis of a 2x4 data x tensor-parallel grid)
// instead of leaving it uncompressed with a remark.
// RUN: not ddp-opt %S/Inputs/sub-grid.mlir --insert-powersgd=rank=2 2>&1 | FileCheck %s --check-prefix=SUBGRID
// RUN: not ddp-opt %S/Inputs/sub-grid.mlir --insert-fp16-compression 2>&1 | FileCheck %s --check-prefix=SUBGRID
// RUN: not ddp-opt %S/Inputs/sub-grid.mlir --insert-quantization 2>&1 | FileCheck %s --check-prefix=SUBGRID
// RUN: not ddp-opt %S/Inputs/sub-grid.mlir --ddp-compress=powersgd-rank=2 2>&1 | FileCheck %s --check-prefix=SUBGRID
// SUBGRID: sub-grid.mlir:{{[0-9]+}}:{{[0-9]+}}: error: shard.all_reduce cannot become a ddp collective: it reduces over part of grid 'g' (2x4) only (axis 1 is not reduced)
// The grid's size goes with the step (ddp.world_size), for the hosts.
// RUN: ddp-opt %s --insert-powersgd=rank=2 | FileCheck %s --check-prefix=WORLD
// RUN: ddp-opt %s --insert-fp16-compression | FileCheck %s --check-prefix=WORLD
// RUN: ddp-opt %s --insert-quantization | FileCheck %s --check-prefix=WORLD
// WORLD: attributes {{{.*}}ddp.world_size = 8 : i64
