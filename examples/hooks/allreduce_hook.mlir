// PyTorch's allreduce_hook, the simplest hook: the bucket's mean over the
// ranks in one allreduce. Combined with a narrowing pass it is
// bf16_compress_wrapper(allreduce_hook):
//   ddp-opt --ddp-bucketize --ddp-apply-hook="hook=allreduce_hook from=allreduce_hook.mlir" \
//     --insert-bf16-compression model.mlir
func.func private @allreduce_hook(%bucket: tensor<?xf32>) -> tensor<?xf32> {
  %mean = ddp.allreduce mean %bucket : tensor<?xf32>
  return %mean : tensor<?xf32>
}
