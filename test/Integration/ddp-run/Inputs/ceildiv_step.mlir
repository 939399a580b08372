// A step that rounds a division up (misbehaving-steps.test).
func.func @step(%g: tensor<4xf32>, %n: tensor<1xi64>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %d = tensor.extract %n[%c0] : tensor<1xi64>
  %hundred = arith.constant 100 : i64
  %q = arith.ceildivsi %hundred, %d : i64
  %f = arith.sitofp %q : i64 to f32
  %r = ddp.allreduce mean %g : tensor<4xf32>
  %w = tensor.insert %f into %r[%c0] : tensor<4xf32>
  return %w : tensor<4xf32>
}
