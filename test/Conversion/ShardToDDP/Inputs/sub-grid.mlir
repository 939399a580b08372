// A data x tensor-parallel grid: the gradient average is over its
// data-parallel axis (0) only.
shard.grid @g(shape = 2x4)
func.func @step(%w: tensor<64x32xf32> loc("w")) -> tensor<64x32xf32> {
  %r = shard.all_reduce %w on @g grid_axes = [0] reduction = average : tensor<64x32xf32> -> tensor<64x32xf32>
  return %r : tensor<64x32xf32>
}
