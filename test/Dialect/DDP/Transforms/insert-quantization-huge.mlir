// Sizes the padding cannot represent are refused with a remark, not
// lowered into a buffer of 2^65 bytes.
// RUN: ddp-opt %s --insert-quantization="granularity=per-channel channel-size=9223372036854775807" 2>&1 | FileCheck %s
// CHECK: remark: insert-quantization leaves a bucket of 1 tensor(s) of 'f32' (@step:%arg0) as a plain allreduce: padded to channels of 9223372036854775807 elements it would hold more bytes than a 64-bit count
// CHECK: ddp.allreduce mean %arg0 : tensor<1099511627776xf32>
// CHECK-NOT: ddp.flatten
func.func @step(%g: tensor<1099511627776xf32>) -> tensor<1099511627776xf32> {
  %r = ddp.allreduce mean %g : tensor<1099511627776xf32>
  return %r : tensor<1099511627776xf32>
}
