// Every bad pipeline option gets a message naming it and a non-zero exit
// (an option of ddp-lower-to-llvm failed with no message at all, and with
// powersgd-rank=0 PowerSGD's values were never checked).
// RUN: not ddp-opt %s --ddp-lower-to-llvm=bogus=1 2>&1 | FileCheck %s --check-prefix=LOWER
// LOWER: error: ddp-lower-to-llvm: no such option 'bogus'; the options are contractions, gpu-chip, libdevice, parallel-loops, runtime-checks, scale-workarounds, split-reductions, sum-order, target
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
// UNKNOWN: error: ddp-compress: no such option 'bogus'; the options are
// RUN: not ddp-opt %s --ddp-compress="narrow=fp8" 2>&1 | FileCheck %s --check-prefix=NARROW
// NARROW: for the --narrow option: Cannot find option named 'fp8'!
// Bucket schemes: PowerSGD, the hook, quantization in this order, each on
// what the ones before left: all but the last need a filter; and their
// own values.
// RUN: not ddp-opt %s --ddp-compress="quantize=per-tensor powersgd-rank=2" 2>&1 | FileCheck %s --check-prefix=TWO
// TWO: error: ddp-compress: powersgd-rank compresses every bucket, so quantize would find none left: give powersgd-rank a filter (powersgd-buckets=REGEX) to leave the other buckets to quantize
// RUN: not ddp-opt %s --ddp-compress="quantize=per-tensor hook=h" 2>&1 | FileCheck %s --check-prefix=TWOHOOK
// TWOHOOK: error: ddp-compress: hook compresses every bucket, so quantize would find none left: give hook a filter (hook-buckets=REGEX) to leave the other buckets to quantize
// The last one's filter does not help the ones before.
// RUN: not ddp-opt %s --ddp-compress="powersgd-rank=2 quantize=per-tensor quantize-buckets=bias" 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not ddp-opt %s --ddp-compress="powersgd-rank=2 powersgd-buckets=fc hook=h quantize=per-tensor" 2>&1 | FileCheck %s --check-prefix=THREE
// THREE: error: ddp-compress: hook compresses every bucket, so quantize would find none left: give hook a filter (hook-buckets=REGEX)
// RUN: not ddp-opt %s --ddp-compress="powersgd-buckets=fc quantize=per-tensor" 2>&1 | FileCheck %s --check-prefix=ALONE
// ALONE: error: ddp-compress: powersgd-buckets='fc' needs powersgd-rank
// RUN: not ddp-opt %s --ddp-compress="quantize-buckets=fc" 2>&1 | FileCheck %s --check-prefix=ALONEQ
// ALONEQ: error: ddp-compress: quantize-buckets='fc' needs quantize
// RUN: not ddp-opt %s --ddp-compress="powersgd-rank=2 powersgd-buckets=( quantize=per-tensor" 2>&1 | FileCheck %s --check-prefix=BADREGEX
// BADREGEX: error: ddp-compress: powersgd-buckets='(' is not a valid regular expression:
// RUN: not ddp-opt %s --ddp-compress="plan=p.json powersgd-rank=2 powersgd-buckets=fc" 2>&1 | FileCheck %s --check-prefix=PLANFILTER
// PLANFILTER: error: ddp-compress: plan= chooses each bucket's compression; it does not combine with powersgd-rank, hook, quantize or narrow
// RUN: not ddp-opt %s --ddp-compress="hook-from=hooks.mlir" 2>&1 | FileCheck %s --check-prefix=FROM
// FROM: error: ddp-compress: hook-from='hooks.mlir' needs hook=<name>
// RUN: not ddp-opt %s --ddp-compress="quantize=per-channel channel-size=-4" 2>&1 | FileCheck %s --check-prefix=CHANNEL
// CHANNEL: error: ddp-compress: channel-size must be positive, got -4
// RUN: not ddp-opt %s --ddp-compress="quantize=per-row" 2>&1 | FileCheck %s --check-prefix=QUANTIZE
// QUANTIZE: for the --quantize option: Cannot find option named 'per-row'!
// Valid options still work.
// RUN: ddp-opt %s --ddp-compress="powersgd-rank=0 narrow=bf16" -o /dev/null
// RUN: ddp-opt %s --ddp-lower-to-llvm= -o /dev/null

func.func @step(%g: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %r = ddp.allreduce mean %g : tensor<64x32xf32>
  return %r : tensor<64x32xf32>
}

// RUN: not ddp-opt %s --ddp-lower-to-llvm=target=tpu 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: for the --target option: Cannot find option named 'tpu'
// TARGET: error: ddp-lower-to-llvm: an option's value is invalid
