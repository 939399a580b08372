// A step's gradient exchange, small enough to check by hand (test.sh does,
// with check.py): after ddp-bucketize, one allreduce per bucket.
//   bucket 0: fc1.weight and fc1.bias, 80 float32 (ratio 0.25: 20 sent)
//   bucket 1: fc2.weight, 15 float32 (4 sent, 3 apart); head.scale (f16)
//             stays a plain allreduce: random-k takes float32 buckets
//   temperature: 1 float32, too small (ratio 0.25 of 1 sends it all)
func.func @step(%w1: tensor<16x4xf32> loc("fc1.weight"),
                %b1: tensor<16xf32> loc("fc1.bias"),
                %w2: tensor<3x5xf32> loc("fc2.weight"),
                %s: tensor<8xf16> loc("head.scale"),
                %t: tensor<1xf32> loc("temperature"))
    -> (tensor<16x4xf32>, tensor<16xf32>, tensor<3x5xf32>, tensor<8xf16>,
        tensor<1xf32>) {
  %0:2 = ddp.allreduce mean %w1, %b1 : tensor<16x4xf32>, tensor<16xf32>
  %1:2 = ddp.allreduce mean %w2, %s : tensor<3x5xf32>, tensor<8xf16>
  %2 = ddp.allreduce mean %t : tensor<1xf32>
  return %0#0, %0#1, %1#0, %1#1, %2
      : tensor<16x4xf32>, tensor<16xf32>, tensor<3x5xf32>, tensor<8xf16>,
        tensor<1xf32>
}
