func.func @f(%x: tensor<4xf32>) {
  %0 = ddp.allreduce mean %x : tensor<4xf32>
