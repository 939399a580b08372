// A step whose own code misbehaves for some inputs (misbehaving-steps.test).
func.func @step(%g: tensor<4xf32>, %i: tensor<1xi64>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %ii = tensor.extract %i[%c0] : tensor<1xi64>
  %idx = arith.index_cast %ii : i64 to index
  %v = tensor.extract %g[%idx] : tensor<4xf32>
  %r = ddp.allreduce mean %g : tensor<4xf32>
  %w = tensor.insert %v into %r[%c0] : tensor<4xf32>
  return %w : tensor<4xf32>
}
