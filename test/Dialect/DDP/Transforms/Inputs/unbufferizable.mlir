// ddp-lower-to-llvm checks first (ddp-check-lowerable).
func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'foo.bar' is not a registered op, so ddp-lower-to-llvm cannot bufferize it}}
  %0 = "foo.bar"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = ddp.allreduce mean %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
