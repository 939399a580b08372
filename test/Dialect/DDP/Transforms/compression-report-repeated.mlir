// A value reduced several times gets one row per reduction, counted like
// any other (it used to be one row whose elements were counted once and
// whose sent elements five times: 2.13x instead of 10.67x), whether the
// reductions share a bucket or not, compressed or not.
// RUN: ddp-opt %s --insert-powersgd=rank=2 --ddp-compression-report=output=- -o /dev/null \
// RUN:   | FileCheck %s --check-prefix=BUCKET
// RUN: ddp-opt %s --insert-powersgd="rank=2 bucket-cap-mb=0" --ddp-fuse-kernels \
// RUN:   --ddp-compression-report=output=- -o /dev/null | FileCheck %s --check-prefix=APART
// RUN: ddp-opt %s --insert-fp16-compression --ddp-compression-report=output=- -o /dev/null \
// RUN:   | FileCheck %s --check-prefix=FP16

// BUCKET-COUNT-5: @step:%arg0 64x32 f32 powersgd 2 f32 2048 192 10.67x
// BUCKET: total: 5 tensors, 5 compressed; elements 10240 -> 960 (10.67x); bytes 40960 -> 3840 (10.67x)
// APART-COUNT-5: @step:%arg0 64x32 f32 powersgd 2 f32 2048 192 10.67x
// APART: total: 5 tensors, 5 compressed; elements 10240 -> 960 (10.67x)
// FP16-COUNT-5: @step:%arg0 64x32 f32 fp16 - f16 2048 2048 1.00x
// FP16: total: 5 tensors, 0 compressed, 5 narrowed; elements 10240 -> 10240 (1.00x); bytes 40960 -> 20480 (2.00x)

func.func @step(%g: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %a = ddp.allreduce mean %g : tensor<64x32xf32>
  %b = ddp.allreduce mean %g : tensor<64x32xf32>
  %c = ddp.allreduce mean %g : tensor<64x32xf32>
  %d = ddp.allreduce mean %g : tensor<64x32xf32>
  %e = ddp.allreduce mean %g : tensor<64x32xf32>
  %s1 = arith.addf %a, %b : tensor<64x32xf32>
  %s2 = arith.addf %c, %d : tensor<64x32xf32>
  %s3 = arith.addf %s1, %s2 : tensor<64x32xf32>
  %s4 = arith.addf %s3, %e : tensor<64x32xf32>
  return %s4 : tensor<64x32xf32>
}
