// RUN: not ddp-opt %s --insert-powersgd=rank=0 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not ddp-opt %s --insert-powersgd=min-compression-rate=-1 2>&1 | FileCheck %s --check-prefix=RATE
// RUN: not ddp-opt %s --insert-powersgd=start-iter=-5 2>&1 | FileCheck %s --check-prefix=START
// RUN: not ddp-opt %s --insert-powersgd=orthogonalization-epsilon=-1e-3 2>&1 | FileCheck %s --check-prefix=EPS
// RUN: not ddp-opt %s --insert-powersgd=bucket-cap-mb=-2 2>&1 | FileCheck %s --check-prefix=CAP
// RUN: not ddp-opt %s --insert-powersgd=mode=blocked 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not ddp-opt %s --insert-powersgd=rank=two 2>&1 | FileCheck %s --check-prefix=NOTNUM
// RUN: not ddp-opt %s --insert-powersgd=ranks=2 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not ddp-opt %s --ddp-bucketize=cap-mb=-1 2>&1 | FileCheck %s --check-prefix=BUCKET
// RUN: not ddp-opt %s --ddp-compress="narrow=fp8" 2>&1 | FileCheck %s --check-prefix=NARROW

// RANK: error: insert-powersgd: rank must be >= 1, got 0
// RATE: error: insert-powersgd: min-compression-rate must be a finite number >= 0, got -1
// START: error: insert-powersgd: start-iter must be >= 0, got -5
// EPS: error: insert-powersgd: orthogonalization-epsilon must be a finite number >= 0, got -0.001
// CAP: error: insert-powersgd: bucket-cap-mb must be a finite number >= 0, got -2
// MODE: Cannot find option named 'blocked'!
// NOTNUM: for the --rank option: 'two' value invalid for uint argument!
// UNKNOWN: error: insert-powersgd: no such option 'ranks'; did you mean 'rank'?
// BUCKET: error: ddp-bucketize: cap-mb must be a number of MiB in [0, 1.07374e+09], got -1
// NARROW: Cannot find option named 'fp8'!

func.func @f(%w: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %0 = ddp.allreduce mean %w : tensor<64x32xf32>
  return %0 : tensor<64x32xf32>
}
