// RUN: ddp-opt %s | ddp-opt | FileCheck %s
// RUN: ddp-opt %s --mlir-print-op-generic | ddp-opt | FileCheck %s

// CHECK: ddp.state @step : i64
// CHECK: ddp.state @q : tensor<32x2xf32>
// CHECK: ddp.state @err : tensor<64x32xf32>
ddp.state @step : i64
ddp.state @q : tensor<32x2xf32>
ddp.state @err : tensor<64x32xf32>

// CHECK-LABEL: func @communication
// CHECK-SAME: (%[[W:.*]]: tensor<64x32xf32>, %[[B:.*]]: tensor<64xf32>, %[[I:.*]]: tensor<4xf64>)
func.func @communication(%w: tensor<64x32xf32>, %b: tensor<64xf32>, %i: tensor<4xf64>)
    -> (tensor<64x32xf32>, tensor<64xf32>, tensor<4xf64>, tensor<64xf32>) {
  // CHECK: %[[R:.*]]:2 = ddp.allreduce mean %[[W]], %[[B]] : tensor<64x32xf32>, tensor<64xf32>
  %r:2 = ddp.allreduce mean %w, %b : tensor<64x32xf32>, tensor<64xf32>
  // CHECK: %[[S:.*]] = ddp.allreduce sum %[[I]] role warmup : tensor<4xf64>
  %s = ddp.allreduce sum %i role warmup : tensor<4xf64>
  // CHECK: %[[N:.*]] = ddp.allreduce mean %[[W]] group node : tensor<64x32xf32>
  %n = ddp.allreduce mean %w group node : tensor<64x32xf32>
  // CHECK: ddp.allreduce sum %[[N]] role compressed group across_nodes : tensor<64x32xf32>
  %x = ddp.allreduce sum %n role compressed group across_nodes : tensor<64x32xf32>
  // CHECK: ddp.allreduce_start mean %[[B]] group across_nodes : tensor<64xf32>
  %hx = ddp.allreduce_start mean %b group across_nodes : tensor<64xf32>
  %wx = ddp.wait %hx : !ddp.request<tensor<64xf32>>
  // CHECK: %[[H:.*]] = ddp.allreduce_start mean %[[B]] role uncompressed : tensor<64xf32>
  %h = ddp.allreduce_start mean %b role uncompressed : tensor<64xf32>
  // CHECK: %[[U:.*]] = ddp.wait %[[H]] : !ddp.request<tensor<64xf32>>
  %u = ddp.wait %h : !ddp.request<tensor<64xf32>>
  // CHECK: return %[[R]]#0, %[[R]]#1, %[[S]], %[[U]]
  return %r#0, %r#1, %s, %u : tensor<64x32xf32>, tensor<64xf32>, tensor<4xf64>, tensor<64xf32>
}

// CHECK-LABEL: func @scale_and_cast
func.func @scale_and_cast(%x: tensor<8xf32>, %y: tensor<2x3xf32>) -> (tensor<8xf32>, tensor<2x3xbf16>) {
  // CHECK: %[[S:.*]]:2 = ddp.scale %{{.*}}, %{{.*}} by inverse_world_size : tensor<8xf32>, tensor<2x3xf32>
  %s:2 = ddp.scale %x, %y by inverse_world_size : tensor<8xf32>, tensor<2x3xf32>
  // CHECK: %[[H:.*]] = ddp.cast %[[S]]#0 : tensor<8xf32> to tensor<8xf16>
  %h = ddp.cast %s#0 : tensor<8xf32> to tensor<8xf16>
  // CHECK: %[[F:.*]] = ddp.cast %[[H]] scaled by world_size : tensor<8xf16> to tensor<8xf32>
  %f = ddp.cast %h scaled by world_size : tensor<8xf16> to tensor<8xf32>
  // CHECK: ddp.cast %[[S]]#1 scaled by inverse_world_size : tensor<2x3xf32> to tensor<2x3xbf16>
  %g = ddp.cast %s#1 scaled by inverse_world_size : tensor<2x3xf32> to tensor<2x3xbf16>
  // A cast that narrows what is sent names the compression.
  // CHECK: ddp.cast %[[S]]#1 scaled by inverse_world_size scheme <"bf16"> : tensor<2x3xf32> to tensor<2x3xbf16>
  %gs = ddp.cast %s#1 scaled by inverse_world_size scheme <"bf16"> : tensor<2x3xf32> to tensor<2x3xbf16>
  // CHECK: ddp.cast %[[S]]#0 scheme <"fp16"> : tensor<8xf32> to tensor<8xf16>
  %hs = ddp.cast %s#0 scheme <"fp16"> : tensor<8xf32> to tensor<8xf16>
  return %f, %g : tensor<8xf32>, tensor<2x3xbf16>
}

// CHECK-LABEL: func @powersgd_fine_grained
func.func @powersgd_fine_grained(%g: tensor<64x32xf32>, %step: i64) -> tensor<64x32xf32> {
  // CHECK: %[[Q0:.*]] = ddp.random_normal %{{.*}} seed 7 stream 3 : tensor<32x2xf32>
  %q0 = ddp.random_normal %step seed 7 stream 3 : tensor<32x2xf32>
  // CHECK: %[[Q:.*]] = ddp.orthogonalize %[[Q0]] {epsilon = 1.000000e-08 : f64} : tensor<32x2xf32>
  %q = ddp.orthogonalize %q0 {epsilon = 1.0e-8 : f64} : tensor<32x2xf32>
  // CHECK: %[[E:.*]] = ddp.state_load @err : tensor<64x32xf32>
  %e = ddp.state_load @err : tensor<64x32xf32>
  // CHECK: %[[M:.*]] = ddp.add_residual %{{.*}} plus %[[E]] : tensor<64x32xf32>
  %m = ddp.add_residual %g plus %e : tensor<64x32xf32>
  // CHECK: %[[P:.*]] = ddp.project %[[M]] times %[[Q]] : tensor<64x32xf32> times tensor<32x2xf32>
  %p = ddp.project %m times %q : tensor<64x32xf32> times tensor<32x2xf32>
  // CHECK: %[[PO:.*]] = ddp.orthogonalize %[[P]] : tensor<64x2xf32>
  %po = ddp.orthogonalize %p : tensor<64x2xf32>
  // CHECK: %[[Q1:.*]] = ddp.backproject %[[M]] times %[[PO]] : tensor<64x32xf32> times tensor<64x2xf32>
  %q1 = ddp.backproject %m times %po : tensor<64x32xf32> times tensor<64x2xf32>
  // The scheme the projections belong to.
  // CHECK: ddp.project %[[M]] times %[[Q]] scheme <"powersgd"> : tensor<64x32xf32> times tensor<32x2xf32>
  %ps = ddp.project %m times %q scheme <"powersgd"> : tensor<64x32xf32> times tensor<32x2xf32>
  // CHECK: ddp.backproject %[[M]] times %[[PO]] scheme <"lowrank", {rank = 2 : i64}> : tensor<64x32xf32> times tensor<64x2xf32>
  %qs = ddp.backproject %m times %po scheme <"lowrank", {rank = 2 : i64}> : tensor<64x32xf32> times tensor<64x2xf32>
  // CHECK: %[[MH:.*]] = ddp.reconstruct %[[PO]] times %[[Q1]] : tensor<64x2xf32> times tensor<32x2xf32>
  %mh = ddp.reconstruct %po times %q1 : tensor<64x2xf32> times tensor<32x2xf32>
  // CHECK: %[[E1:.*]] = ddp.update_residual %[[M]] minus %[[MH]] : tensor<64x32xf32>
  %e1 = ddp.update_residual %m minus %mh : tensor<64x32xf32>
  // CHECK: ddp.state_store %[[E1]], @err : tensor<64x32xf32>
  ddp.state_store %e1, @err : tensor<64x32xf32>
  // CHECK: ddp.state_store %[[Q1]], @q : tensor<32x2xf32>
  ddp.state_store %q1, @q : tensor<32x2xf32>
  return %mh : tensor<64x32xf32>
}

// CHECK-LABEL: func @powersgd_fused
func.func @powersgd_fused(%g0: tensor<64x32xf32>, %e0: tensor<64x32xf32>, %q0: tensor<32x2xf32>,
                          %g1: tensor<8x4xf16>, %e1: tensor<8x4xf16>, %q1: tensor<4x1xf16>)
    -> (tensor<64x32xf32>, tensor<8x4xf16>, tensor<64x32xf32>, tensor<8x4xf16>) {
  // CHECK: %[[P:.*]]:2 = ddp.project_residual %{{.*}}, %{{.*}} plus %{{.*}}, %{{.*}} times %{{.*}}, %{{.*}} : tensor<64x32xf32>, tensor<8x4xf16> times tensor<32x2xf32>, tensor<4x1xf16>
  %p:2 = ddp.project_residual %g0, %g1 plus %e0, %e1 times %q0, %q1
      : tensor<64x32xf32>, tensor<8x4xf16> times tensor<32x2xf32>, tensor<4x1xf16>
  // CHECK: %[[Q:.*]]:2 = ddp.backproject_residual {{.*}} times %[[P]]#0, %[[P]]#1 : tensor<64x32xf32>, tensor<8x4xf16> times tensor<64x2xf32>, tensor<8x1xf16>
  %q:2 = ddp.backproject_residual %g0, %g1 plus %e0, %e1 times %p#0, %p#1
      : tensor<64x32xf32>, tensor<8x4xf16> times tensor<64x2xf32>, tensor<8x1xf16>
  // CHECK: ddp.project_residual {{.*}} times %{{.*}}, %{{.*}} scheme <"powersgd"> : tensor<64x32xf32>
  %ps:2 = ddp.project_residual %g0, %g1 plus %e0, %e1 times %q0, %q1 scheme <"powersgd">
      : tensor<64x32xf32>, tensor<8x4xf16> times tensor<32x2xf32>, tensor<4x1xf16>
  // CHECK: ddp.backproject_residual {{.*}} times %[[P]]#0, %[[P]]#1 scheme <"powersgd"> : tensor<64x32xf32>
  %qs:2 = ddp.backproject_residual %g0, %g1 plus %e0, %e1 times %p#0, %p#1 scheme <"powersgd">
      : tensor<64x32xf32>, tensor<8x4xf16> times tensor<64x2xf32>, tensor<8x1xf16>
  // CHECK: %[[R:.*]]:4 = ddp.reconstruct_residual %[[P]]#0, %[[P]]#1 times %[[Q]]#0, %[[Q]]#1 from {{.*}} plus {{.*}} : tensor<64x2xf32>, tensor<8x1xf16> times tensor<32x2xf32>, tensor<4x1xf16> from tensor<64x32xf32>, tensor<8x4xf16>
  %r:4 = ddp.reconstruct_residual %p#0, %p#1 times %q#0, %q#1 from %g0, %g1 plus %e0, %e1
      : tensor<64x2xf32>, tensor<8x1xf16> times tensor<32x2xf32>, tensor<4x1xf16> from tensor<64x32xf32>, tensor<8x4xf16>
  return %r#0, %r#1, %r#2, %r#3 : tensor<64x32xf32>, tensor<8x4xf16>, tensor<64x32xf32>, tensor<8x4xf16>
}

// CHECK-LABEL: func @step_counter
func.func @step_counter() -> i64 {
  // CHECK: %[[S:.*]] = ddp.state_load @step : i64
  %s = ddp.state_load @step : i64
  %one = arith.constant 1 : i64
  %n = arith.addi %s, %one : i64
  // CHECK: ddp.state_store %{{.*}}, @step : i64
  ddp.state_store %n, @step : i64
  return %s : i64
}

// CHECK-LABEL: func @report_nonfinite
func.func @report_nonfinite(%finite: i1) {
  // CHECK: ddp.report_nonfinite %{{.*}}, "an average"{{$}}
  ddp.report_nonfinite %finite, "an average"
  // CHECK: ddp.report_nonfinite %{{.*}}, "a state" this_rank_only
  ddp.report_nonfinite %finite, "a state" this_rank_only
  return
}

// CHECK-LABEL: func @inspect
func.func @inspect(%q: tensor<32x2xbf16>) -> (i1, i1) {
  // CHECK: %{{.*}}, %{{.*}} = ddp.inspect %{{.*}} : tensor<32x2xbf16>
  %finite, %nonzero = ddp.inspect %q : tensor<32x2xbf16>
  return %finite, %nonzero : i1, i1
}

// CHECK-LABEL: func @count_uncompressed
func.func @count_uncompressed() {
  // CHECK: ddp.count_uncompressed 2112
  ddp.count_uncompressed 2112
  return
}

// CHECK-LABEL: func @top_k
func.func @top_k(%m: tensor<2112xf32>, %h: tensor<64xbf16>)
    -> (tensor<21xf32>, tensor<21xi32>, tensor<64xbf16>, tensor<64xi64>) {
  // CHECK: %{{.*}}, %{{.*}} = ddp.top_k %{{.*}} : tensor<2112xf32> -> tensor<21xf32>, tensor<21xi32>
  %values, %indices = ddp.top_k %m : tensor<2112xf32> -> tensor<21xf32>, tensor<21xi32>
  // Every element, with wide indices.
  // CHECK: ddp.top_k %{{.*}} : tensor<64xbf16> -> tensor<64xbf16>, tensor<64xi64>
  %all, %order = ddp.top_k %h : tensor<64xbf16> -> tensor<64xbf16>, tensor<64xi64>
  return %values, %indices, %all, %order : tensor<21xf32>, tensor<21xi32>, tensor<64xbf16>, tensor<64xi64>
}

// Compression schemes: the flat bucket, gathers of any runtime type, the
// world size.
// CHECK-LABEL: func @buckets
// CHECK-SAME: (%[[W:.*]]: tensor<4x3xf32>, %[[B:.*]]: tensor<3xf32>, %[[Q:.*]]: tensor<15xi8>, %[[S:.*]]: tensor<f32>)
func.func @buckets(%w: tensor<4x3xf32>, %b: tensor<3xf32>, %q: tensor<15xi8>, %s: tensor<f32>)
    -> (tensor<4x3xf32>, tensor<3xf32>, tensor<?xf32>, tensor<?x15xi8>, index) {
  // CHECK: %[[F:.*]] = ddp.flatten %[[W]], %[[B]] scheme <"hook:h"> : tensor<4x3xf32>, tensor<3xf32> -> tensor<15xf32>
  %f = ddp.flatten %w, %b scheme <"hook:h"> : tensor<4x3xf32>, tensor<3xf32> -> tensor<15xf32>
  // A scheme's options travel with its name.
  // CHECK: ddp.flatten %[[W]] scheme <"topk", {error_feedback = true, ratio = 1.000000e-02 : f64}>
  %t = ddp.flatten %w scheme <"topk", {error_feedback = true, ratio = 0.01 : f64}> : tensor<4x3xf32> -> tensor<12xf32>
  // CHECK: %[[G:.*]]:2 = ddp.allgather %[[S]], %[[Q]] : tensor<f32>, tensor<15xi8>
  %gs, %gq = ddp.allgather %s, %q : tensor<f32>, tensor<15xi8>
  // CHECK: ddp.allgather %[[F]] role gradient : tensor<15xf32>
  %gf = ddp.allgather %f role gradient : tensor<15xf32>
  // CHECK: %[[N:.*]] = ddp.world_size : index
  %n = ddp.world_size : index
  // CHECK: %[[U:.*]]:2 = ddp.unflatten %[[F]] : tensor<15xf32> -> tensor<4x3xf32>, tensor<3xf32>
  %u:2 = ddp.unflatten %f : tensor<15xf32> -> tensor<4x3xf32>, tensor<3xf32>
  return %u#0, %u#1, %gs, %gq, %n : tensor<4x3xf32>, tensor<3xf32>, tensor<?xf32>, tensor<?x15xi8>, index
}
