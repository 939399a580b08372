// RUN: ddp-opt %s --allow-unregistered-dialect --ddp-check-lowerable -split-input-file -verify-diagnostics
// RUN: ddp-opt %S/Inputs/unbufferizable.mlir --allow-unregistered-dialect --ddp-lower-to-llvm -verify-diagnostics

// Every tensor op needs a bufferization model before ddp-lower-to-llvm
// bufferizes; what has none is reported once per op kind, at its first
// location (a host without the models gets the same, naming the call that
// registers them: examples/embed/test.sh).
func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'foo.bar' is not a registered op, so ddp-lower-to-llvm cannot bufferize it}}
  %0 = "foo.bar"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "foo.bar"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = ddp.allreduce mean %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// Ops without tensors need no model.
func.func @scalars(%x: f32) -> f32 {
  %0 = "foo.baz"(%x) : (f32) -> f32
  return %0 : f32
}

// -----

// A hook's per-bucket state template cannot be allocated: ddp-apply-hook
// declares one of each bucket's size.
// expected-error @+1 {{state 'error' has type 'tensor<?xf32>', with a dynamic size: only a hook's state may (--ddp-apply-hook declares one of each bucket's size); give it a static shape}}
ddp.state @error : tensor<?xf32>

// -----

// ddp-plan only chooses: a bucket still annotated was compressed by no
// stage, and would travel plain without a word.
module attributes {ddp.plan = {buckets = []}} {
  func.func @planned(%g: tensor<64xf32>) -> tensor<64xf32> {
    // expected-error @+1 {{this bucket is planned as #ddp.compression<"fp16"> but was never compressed (it would be sent plain): compress with ddp-compress{plan=...} in place of ddp-plan, or follow ddp-plan with the stages that honour its decisions: insert-powersgd{planned}, ddp-apply-planned-schemes, insert-fp16-compression{planned}, insert-bf16-compression{planned}}}
    %0 = ddp.allreduce mean %g {ddp.planned = #ddp.compression<"fp16">} : tensor<64xf32>
    return %0 : tensor<64xf32>
  }
}
