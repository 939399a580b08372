// A hook whose result size depends on the world size, which only the run
// knows: n - W + 1 elements of a bucket of n, wrong on more than one rank.
// hooks.test checks that ddp-run stops with the pass's message.
func.func private @world_shrink(%g: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = tensor.dim %g, %c0 : tensor<?xf32>
  %w = ddp.world_size : index
  %m = arith.subi %n, %w : index
  %k = arith.addi %m, %c1 : index
  %s = tensor.extract_slice %g[0] [%k] [1] : tensor<?xf32> to tensor<?xf32>
  %r = ddp.allreduce mean %s : tensor<?xf32>
  return %r : tensor<?xf32>
}
