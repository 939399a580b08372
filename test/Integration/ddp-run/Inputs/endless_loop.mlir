// A step whose own code misbehaves for some inputs (misbehaving-steps.test).
func.func @step(%g: tensor<4xf32>, %n: tensor<2xi64>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %limit = tensor.extract %n[%c0] : tensor<2xi64>
  %increment = tensor.extract %n[%c1] : tensor<2xi64>
  %zero = arith.constant 0 : i64
  %end = scf.while (%i = %zero) : (i64) -> i64 {
    %more = arith.cmpi slt, %i, %limit : i64
    scf.condition(%more) %i : i64
  } do {
  ^bb0(%i: i64):
    %next = arith.addi %i, %increment : i64
    scf.yield %next : i64
  }
  %f = arith.sitofp %end : i64 to f32
  %r = ddp.allreduce mean %g : tensor<4xf32>
  %w = tensor.insert %f into %r[%c0] : tensor<4xf32>
  return %w : tensor<4xf32>
}
