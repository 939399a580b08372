// A step that writes a row where its input says (misbehaving-steps.test).
func.func @step(%g: tensor<8x12xf32>, %i: tensor<1xi64>) -> tensor<8x12xf32> {
  %c0 = arith.constant 0 : index
  %ii = tensor.extract %i[%c0] : tensor<1xi64>
  %idx = arith.index_cast %ii : i64 to index
  %r = ddp.allreduce mean %g : tensor<8x12xf32>
  %s = tensor.extract_slice %g[0, 0] [1, 12] [1, 1] : tensor<8x12xf32> to tensor<1x12xf32>
  %w = tensor.insert_slice %s into %r[%idx, 0] [1, 12] [1, 1] : tensor<1x12xf32> into tensor<8x12xf32>
  return %w : tensor<8x12xf32>
}
