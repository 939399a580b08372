// RUN: ddp-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(ddp-two-level))' | FileCheck %s
// RUN: ddp-opt %s --split-input-file --ddp-compress="two-level=node-mean powersgd-rank=2 fuse=false overlap=false" | FileCheck %s --check-prefix=PSGD
// RUN: ddp-opt %s --split-input-file --ddp-compress="two-level=node-mean narrow=bf16 fuse=false overlap=false" | FileCheck %s --check-prefix=BF16
// RUN: ddp-opt %s --split-input-file --ddp-compress="two-level=collectives powersgd-rank=2 fuse=false overlap=false" | FileCheck %s --check-prefix=COLL
// RUN: ddp-opt %s --ddp-compress="plan=%S/Inputs/plan-1gbps.json two-level=node-mean fuse=false overlap=false" | FileCheck %s --check-prefix=PLAN
// The compression report counts what crosses the network, as the runtime's
// counters do: the same rows as without two levels, whichever side of the
// compression they are on.
// RUN: ddp-opt %s --ddp-compress="two-level=collectives powersgd-rank=2 start-iter=0" --ddp-compression-report=output=- -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: ddp-opt %s --ddp-compress="two-level=node-mean powersgd-rank=2 start-iter=0" --ddp-compression-report=output=- -o /dev/null | FileCheck %s --check-prefix=REPORT
// REPORT: 0 @step:%arg0 64x32 f32 powersgd 2 f32 2048 192 10.67x
// REPORT: 1 @step:%arg1 64 f32 uncompressed - f32 64 64 1.00x
// REPORT: total: 2 tensors, 1 compressed; elements 2112 -> 256 (8.25x)
// RUN: not ddp-opt %s --split-input-file --ddp-compress="two-level=node-mean quantize=per-tensor" 2>&1 | FileCheck %s --check-prefix=GATHER

// Each world allreduce becomes the same reduction within the node, then
// across nodes, keeping its kind and role; a started one keeps its start
// and wait; an allreduce already narrowed to a group is left alone.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[W:[^:]*]]: tensor<64x32xf32>, %[[B:[^:]*]]: tensor<64xf32>, %[[C:[^:]*]]: tensor<8xf64>
// CHECK: %[[N:.*]]:2 = ddp.allreduce mean %[[W]], %[[B]] group node : tensor<64x32xf32>, tensor<64xf32>
// CHECK: %[[X:.*]]:2 = ddp.allreduce mean %[[N]]#0, %[[N]]#1 group across_nodes : tensor<64x32xf32>, tensor<64xf32>
// CHECK: %[[S:.*]] = ddp.allreduce sum %[[C]] role compressed group node : tensor<8xf64>
// CHECK: %[[H:.*]] = ddp.allreduce_start sum %[[S]] role compressed group across_nodes : tensor<8xf64>
// CHECK: ddp.wait %[[H]]
// CHECK: ddp.allreduce sum %[[C]] group node : tensor<8xf64>
// CHECK-NOT: ddp.allreduce
// CHECK: return
func.func @step(%w: tensor<64x32xf32>, %b: tensor<64xf32>, %c: tensor<8xf64>)
    -> (tensor<64x32xf32>, tensor<64xf32>, tensor<8xf64>, tensor<8xf64>) {
  %r:2 = ddp.allreduce mean %w, %b : tensor<64x32xf32>, tensor<64xf32>
  %h = ddp.allreduce_start sum %c role compressed : tensor<8xf64>
  %s = ddp.wait %h : !ddp.request<tensor<8xf64>>
  %n = ddp.allreduce sum %c group node : tensor<8xf64>
  return %r#0, %r#1, %s, %n : tensor<64x32xf32>, tensor<64xf32>, tensor<8xf64>, tensor<8xf64>
}

// Compression after it sees only what crosses the network: PowerSGD's
// factors and the bias go across nodes, the node's mean stays exact, and a
// sum bucket is scaled back by the number of nodes.
// PSGD-LABEL: func.func @step(
// PSGD: ddp.allreduce mean %arg0, %arg1 group node
// PSGD-NOT: group node
// PSGD: ddp.allreduce_start mean {{.*}} role uncompressed group across_nodes : tensor<64xf32>
// PSGD: ddp.project
// PSGD: ddp.allreduce sum {{.*}} role compressed group across_nodes : tensor<64x2xf32>
// PSGD: ddp.allreduce mean {{.*}} role compressed group across_nodes : tensor<32x2xf32>
// PSGD: ddp.reconstruct

// BF16-LABEL: func.func @step(
// BF16: ddp.allreduce mean %arg0, %arg1 group node : tensor<64x32xf32>, tensor<64xf32>
// BF16: ddp.scale {{.*}} by inverse_node_count
// BF16: ddp.allreduce sum {{.*}} group across_nodes : tensor<64x32xbf16>, tensor<64xbf16>
// A sum is scaled back by the number of nodes, not the world size.
// BF16: ddp.scale {{.*}} by inverse_node_count
// BF16: ddp.allreduce_start sum {{.*}} role compressed group across_nodes : tensor<8xbf16>
// BF16: ddp.scale {{.*}} by node_count

// After compression, every collective is split, PowerSGD's factors too:
// each rank projects its own gradient, as without two levels.
// COLL-LABEL: func.func @step(
// COLL: ddp.allreduce mean %arg0, %arg1 role warmup group node
// COLL: role warmup group across_nodes
// COLL: } else {
// COLL: ddp.allreduce mean %arg1 role uncompressed group node : tensor<64xf32>
// COLL: ddp.allreduce_start mean {{.*}} role uncompressed group across_nodes : tensor<64xf32>
// COLL: ddp.project %{{.*}} times %{{.*}} :
// COLL: ddp.allreduce sum {{.*}} role compressed group node : tensor<64x2xf32>
// COLL: ddp.allreduce sum {{.*}} role compressed group across_nodes : tensor<64x2xf32>
// COLL: ddp.allreduce mean {{.*}} role compressed group node : tensor<32x2xf32>
// COLL: ddp.allreduce mean {{.*}} role compressed group across_nodes : tensor<32x2xf32>

// ddp-plan plans the level that crosses the network: one bucket (the
// across-nodes allreduce of both tensors), narrowed to fp16 on this 1 Gb/s
// profile, while the mean within the node stays exact in f32.
// PLAN: ddp.plan = {buckets = [{choice = "fp16", elements = 2112
// PLAN-NOT: choice =
// PLAN: ddp.allreduce mean %arg0, %arg1 group node : tensor<64x32xf32>, tensor<64xf32>
// PLAN: ddp.allreduce sum {{.*}} group across_nodes : tensor<64x32xf16>, tensor<64xf16>

// GATHER: error: insert-quantization: the scheme 'quantize-per-tensor' gathers over every rank and cannot reduce a bucket across_nodes; across nodes, compress with PowerSGD or fp16/bf16
