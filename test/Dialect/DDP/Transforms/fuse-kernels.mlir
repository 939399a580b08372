// RUN: ddp-opt %s --ddp-fuse-kernels | FileCheck %s

ddp.state @e0 : tensor<64x32xf32>
ddp.state @e1 : tensor<16x72xf32>

// The fine-grained PowerSGD steps insert-powersgd emits for two tensors ...
// CHECK-LABEL: func.func @powersgd(
// CHECK-SAME: %[[G0:[^:]*]]: tensor<64x32xf32>, %[[G1:[^:]*]]: tensor<16x72xf32>, %[[Q0:[^:]*]]: tensor<32x2xf32>, %[[Q1:[^:]*]]: tensor<72x2xf32>
func.func @powersgd(%g0: tensor<64x32xf32>, %g1: tensor<16x72xf32>, %q0: tensor<32x2xf32>, %q1: tensor<72x2xf32>)
    -> (tensor<64x32xf32>, tensor<16x72xf32>) {
  %e0 = ddp.state_load @e0 : tensor<64x32xf32>
  %e1 = ddp.state_load @e1 : tensor<16x72xf32>
  %qo0 = ddp.orthogonalize %q0 : tensor<32x2xf32>
  %qo1 = ddp.orthogonalize %q1 : tensor<72x2xf32>
  %m0 = ddp.add_residual %g0 plus %e0 : tensor<64x32xf32>
  %m1 = ddp.add_residual %g1 plus %e1 : tensor<16x72xf32>
  %p0 = ddp.project %m0 times %qo0 : tensor<64x32xf32> times tensor<32x2xf32>
  %p1 = ddp.project %m1 times %qo1 : tensor<16x72xf32> times tensor<72x2xf32>
  %ps:2 = ddp.allreduce sum %p0, %p1 role compressed : tensor<64x2xf32>, tensor<16x2xf32>
  %po0 = ddp.orthogonalize %ps#0 : tensor<64x2xf32>
  %po1 = ddp.orthogonalize %ps#1 : tensor<16x2xf32>
  %n0 = ddp.backproject %m0 times %po0 : tensor<64x32xf32> times tensor<64x2xf32>
  %n1 = ddp.backproject %m1 times %po1 : tensor<16x72xf32> times tensor<16x2xf32>
  %qs:2 = ddp.allreduce mean %n0, %n1 role compressed : tensor<32x2xf32>, tensor<72x2xf32>
  %r0 = ddp.reconstruct %po0 times %qs#0 : tensor<64x2xf32> times tensor<32x2xf32>
  %r1 = ddp.reconstruct %po1 times %qs#1 : tensor<16x2xf32> times tensor<72x2xf32>
  %ne0 = ddp.update_residual %m0 minus %r0 : tensor<64x32xf32>
  %ne1 = ddp.update_residual %m1 minus %r1 : tensor<16x72xf32>
  ddp.state_store %ne0, @e0 : tensor<64x32xf32>
  ddp.state_store %ne1, @e1 : tensor<16x72xf32>
  return %r0, %r1 : tensor<64x32xf32>, tensor<16x72xf32>
}
// ... become one multi-tensor op per step, with the residual add fused into
// both projections and the residual update into the reconstruction; M = G + E
// is never stored.
// CHECK: %[[E0:.*]] = ddp.state_load @e0
// CHECK: %[[E1:.*]] = ddp.state_load @e1
// CHECK: %[[QO:.*]]:2 = ddp.orthogonalize %[[Q0]], %[[Q1]] : tensor<32x2xf32>, tensor<72x2xf32>
// CHECK: %[[P:.*]]:2 = ddp.project_residual %[[G0]], %[[G1]] plus %[[E0]], %[[E1]] times %[[QO]]#0, %[[QO]]#1
// CHECK: %[[PS:.*]]:2 = ddp.allreduce sum %[[P]]#0, %[[P]]#1 role compressed
// CHECK: %[[PO:.*]]:2 = ddp.orthogonalize %[[PS]]#0, %[[PS]]#1
// CHECK: %[[N:.*]]:2 = ddp.backproject_residual %[[G0]], %[[G1]] plus %[[E0]], %[[E1]] times %[[PO]]#0, %[[PO]]#1
// CHECK: %[[QS:.*]]:2 = ddp.allreduce mean %[[N]]#0, %[[N]]#1 role compressed
// CHECK: %[[R:.*]]:4 = ddp.reconstruct_residual %[[PO]]#0, %[[PO]]#1 times %[[QS]]#0, %[[QS]]#1 from %[[G0]], %[[G1]] plus %[[E0]], %[[E1]]
// CHECK: ddp.state_store %[[R]]#2, @e0
// CHECK: ddp.state_store %[[R]]#3, @e1
// CHECK: return %[[R]]#0, %[[R]]#1
// CHECK-NOT: ddp.add_residual
// CHECK-NOT: ddp.update_residual

// Scale next to cast becomes a scaled cast, in both directions.
// CHECK-LABEL: func.func @casts(
// CHECK: %[[D:.*]]:2 = ddp.cast %arg0, %arg1 scaled by inverse_world_size : tensor<8xf32>, tensor<4xf32> to tensor<8xf16>, tensor<4xf16>
// CHECK: %[[R:.*]]:2 = ddp.allreduce sum %[[D]]#0, %[[D]]#1
// CHECK: %[[U:.*]]:2 = ddp.cast %[[R]]#0, %[[R]]#1 scaled by world_size : tensor<8xf16>, tensor<4xf16> to tensor<8xf32>, tensor<4xf32>
// CHECK: return %[[U]]#0, %[[U]]#1
// CHECK-NOT: ddp.scale
func.func @casts(%a: tensor<8xf32>, %b: tensor<4xf32>) -> (tensor<8xf32>, tensor<4xf32>) {
  %s:2 = ddp.scale %a, %b by inverse_world_size : tensor<8xf32>, tensor<4xf32>
  %h:2 = ddp.cast %s#0, %s#1 : tensor<8xf32>, tensor<4xf32> to tensor<8xf16>, tensor<4xf16>
  %r:2 = ddp.allreduce sum %h#0, %h#1 : tensor<8xf16>, tensor<4xf16>
  %f:2 = ddp.cast %r#0, %r#1 : tensor<8xf16>, tensor<4xf16> to tensor<8xf32>, tensor<4xf32>
  %w:2 = ddp.scale %f#0, %f#1 by world_size : tensor<8xf32>, tensor<4xf32>
  return %w#0, %w#1 : tensor<8xf32>, tensor<4xf32>
}

// Ops are not merged across a use of an earlier one: the second orthogonalize
// consumes the first one's result.
// CHECK-LABEL: func.func @dependent(
// CHECK: %[[A:.*]] = ddp.orthogonalize %arg0 : tensor<8x2xf32>
// CHECK: %[[B:.*]] = ddp.orthogonalize %[[A]] : tensor<8x2xf32>
// Different configurations are not merged either.
// CHECK: ddp.orthogonalize %arg0 {epsilon = 1.000000e-03 : f64}
// CHECK: ddp.orthogonalize %[[B]] : tensor<8x2xf32>
func.func @dependent(%p: tensor<8x2xf32>) -> (tensor<8x2xf32>, tensor<8x2xf32>) {
  %a = ddp.orthogonalize %p : tensor<8x2xf32>
  %b = ddp.orthogonalize %a : tensor<8x2xf32>
  %c = ddp.orthogonalize %p {epsilon = 1.0e-3 : f64} : tensor<8x2xf32>
  %d = ddp.orthogonalize %b : tensor<8x2xf32>
  return %c, %d : tensor<8x2xf32>, tensor<8x2xf32>
}

// M = G + E used by something other than the PowerSGD steps stays, and the
// fused ops still read G and E.
// CHECK-LABEL: func.func @shared_sum(
// CHECK: %[[M:.*]] = ddp.add_residual %arg0 plus %arg1
// CHECK: ddp.project_residual %arg0 plus %arg1 times %arg2
// CHECK: return %[[M]]
func.func @shared_sum(%g: tensor<8x4xf32>, %e: tensor<8x4xf32>, %q: tensor<4x1xf32>) -> (tensor<8x4xf32>, tensor<8x1xf32>) {
  %m = ddp.add_residual %g plus %e : tensor<8x4xf32>
  %p = ddp.project %m times %q : tensor<8x4xf32> times tensor<4x1xf32>
  return %m, %p : tensor<8x4xf32>, tensor<8x1xf32>
}

// A cast's scheme survives fusion in both directions, and casts of
// different schemes (or one with none) stay apart: each names what it sends.
// CHECK-LABEL: func.func @cast_schemes(
// CHECK: ddp.cast %arg0, %arg1 scaled by inverse_world_size scheme <"fp16"> : tensor<8xf32>, tensor<4xf32> to tensor<8xf16>, tensor<4xf16>
// CHECK: ddp.cast %arg2 scaled by inverse_world_size : tensor<2xf32> to tensor<2xf16>
// CHECK: ddp.cast %{{.*}} scaled by world_size scheme <"bf16"> : tensor<2xf32> to tensor<2xbf16>
func.func @cast_schemes(%a: tensor<8xf32>, %b: tensor<4xf32>, %c: tensor<2xf32>)
    -> (tensor<8xf16>, tensor<4xf16>, tensor<2xf16>, tensor<2xbf16>) {
  %s:3 = ddp.scale %a, %b, %c by inverse_world_size : tensor<8xf32>, tensor<4xf32>, tensor<2xf32>
  %h = ddp.cast %s#0 scheme <"fp16"> : tensor<8xf32> to tensor<8xf16>
  %i = ddp.cast %s#1 scheme <"fp16"> : tensor<4xf32> to tensor<4xf16>
  %j = ddp.cast %s#2 : tensor<2xf32> to tensor<2xf16>
  %k = ddp.cast %c scheme <"bf16"> : tensor<2xf32> to tensor<2xbf16>
  %l = ddp.scale %k by world_size : tensor<2xbf16>
  return %h, %i, %j, %l : tensor<8xf16>, tensor<4xf16>, tensor<2xf16>, tensor<2xbf16>
}
