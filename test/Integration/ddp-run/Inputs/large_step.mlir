// A step with one gradient of 512 x 1024: large enough that its quantizer's
// loops run on several threads (compiled-code.test).
func.func @step(%g: tensor<512x1024xf32> loc("w")) -> tensor<512x1024xf32> {
  %r = ddp.allreduce mean %g : tensor<512x1024xf32> loc("w")
  return %r : tensor<512x1024xf32>
}
