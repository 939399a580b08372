// A hook from a library file (from=): the worked example of the user guide,
// examples/hooks/sign_ef_hook.mlir (error-feedback scaled sign), applied to
// a module that does not contain it. Its error state is declared per
// bucket; everything is statically shaped after specialisation.
// RUN: ddp-opt %s --ddp-bucketize --ddp-apply-hook="hook=sign_ef_hook from=%S/../../../../examples/hooks/sign_ef_hook.mlir" \
// RUN:   --ddp-compression-report 2>&1 | FileCheck %s
// RUN: not ddp-opt %s --ddp-apply-hook="hook=sign_ef_hook from=%t.missing.mlir" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not ddp-opt %s --ddp-apply-hook="hook=nothere from=%S/../../../../examples/hooks/sign_ef_hook.mlir" 2>&1 | FileCheck %s --check-prefix=NOHOOK
// MISSING: error: ddp-apply-hook: hook library '{{.*}}.missing.mlir': cannot read it: No such file or directory
// NOHOOK: error: ddp-apply-hook: the hook library '{{.*}}sign_ef_hook.mlir' has no function @nothere

// One f32 per rank for the scale, one i8 per element for the signs: 4x fewer
// bytes than f32, plus 4.
// CHECK: bucket of 2 [fc.bias,fc.weight] 24 f32 hook:sign_ef_hook - f32+i8 24 25
// CHECK: bytes 96 -> 28 (3.43x)
// CHECK: ddp.state @sign_ef.error.step.0 : tensor<24xf32>
// CHECK-NOT: ddp.state
// CHECK-NOT: @sign_ef_hook
// CHECK-LABEL: func.func @step
// CHECK: ddp.flatten
// CHECK: ddp.state_load @sign_ef.error.step.0 : tensor<24xf32>
// CHECK-NOT: ?x
// CHECK: ddp.allgather %{{.*}}, %{{.*}} : tensor<f32>, tensor<24xi8>
// CHECK: ddp.unflatten
func.func @step(%w: tensor<4x5xf32> loc("fc.weight"), %b: tensor<4xf32> loc("fc.bias"))
    -> (tensor<4x5xf32>, tensor<4xf32>) {
  %w2 = ddp.allreduce mean %w : tensor<4x5xf32>
  %b2 = ddp.allreduce mean %b : tensor<4xf32>
  return %w2, %b2 : tensor<4x5xf32>, tensor<4xf32>
}
