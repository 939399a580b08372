// Two buckets long enough for ddp-split-reductions (split-reductions.test):
// a 3 x 2000 gradient and a 4000 one, one bucket each.
func.func @step(%g: tensor<3x2000xf32>, %h: tensor<4000xf32>) -> (tensor<3x2000xf32>, tensor<4000xf32>) {
  %a = ddp.allreduce mean %g : tensor<3x2000xf32>
  %b = ddp.allreduce mean %h : tensor<4000xf32>
  return %a, %b : tensor<3x2000xf32>, tensor<4000xf32>
}
