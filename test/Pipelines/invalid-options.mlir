// Every bad pipeline option gets a message naming it and a non-zero exit
// (an option of ddp-lower-to-llvm failed with no message at all, and with
// powersgd-rank=0 PowerSGD's values were never checked).
// RUN: not ddp-opt %s --ddp-lower-to-llvm=bogus=1 2>&1 | FileCheck %s --check-prefix=LOWER
// LOWER: error: ddp-lower-to-llvm takes no options, got 'bogus=1'
// RUN: not ddp-opt %s --pass-pipeline='builtin.module(ddp-lower-to-llvm{bogus=1})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=LOWER
// RUN: not ddp-opt %s --ddp-compress="powersgd-rank=0 min-compression-rate=-1" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=RATE
// RATE: error: ddp-compress: min-compression-rate must be a finite number >= 0, got -1
// RUN: not ddp-opt %s --ddp-compress="start-iter=-3" 2>&1 | FileCheck %s --check-prefix=START
// START: error: ddp-compress: start-iter must be >= 0, got -3
// RUN: not ddp-opt %s --ddp-compress="powersgd-rank=2 orthogonalization-epsilon=nan" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=EPS
// EPS: error: ddp-compress: orthogonalization-epsilon must be a finite number >= 0, got nan
// RUN: not ddp-opt %s --ddp-compress="bucket-cap-mb=-1" 2>&1 | FileCheck %s --check-prefix=CAP
// CAP: error: ddp-compress: bucket-cap-mb must be a finite number >= 0, got -1
// RUN: not ddp-opt %s --ddp-compress="powersgd-rank=0 bogus=3" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: no such option bogus
// RUN: not ddp-opt %s --ddp-compress="narrow=fp8" 2>&1 | FileCheck %s --check-prefix=NARROW
// NARROW: for the --narrow option: Cannot find option named 'fp8'!
// Valid options still work.
// RUN: ddp-opt %s --ddp-compress="powersgd-rank=0 narrow=bf16" -o /dev/null
// RUN: ddp-opt %s --ddp-lower-to-llvm= -o /dev/null

func.func @step(%g: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %r = ddp.allreduce mean %g : tensor<64x32xf32>
  return %r : tensor<64x32xf32>
}
