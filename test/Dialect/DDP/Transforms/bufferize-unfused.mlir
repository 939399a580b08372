// RUN: ddp-opt %s --one-shot-bufferize="bufferize-function-boundaries" -verify-diagnostics -split-input-file

// Without ddp-fuse-kernels, add_residual has no runtime call.
func.func @unfused(%g: tensor<4x4xf32>, %e: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{has no runtime call of its own; run --ddp-fuse-kernels first}}
  // expected-error @+1 {{failed to bufferize op}}
  %m = ddp.add_residual %g plus %e : tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}
