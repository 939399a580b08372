// PowerSGD's options take PyTorch's names (PowerSGDState's arguments in
// kebab case) as well as ours, on the pass, in ddp-plan and in the
// ddp-compress pipeline, with the same meaning: the IR is the same byte
// for byte. A name that is neither is refused with the nearest valid one,
// and one option under both its names is refused too.

// RUN: ddp-opt %s --insert-powersgd="rank=2 start-iter=3 error-feedback=false seed=7 batch-same-shape=true" -o %t.ours.mlir
// RUN: ddp-opt %s --insert-powersgd="matrix-approximation-rank=2 start-powersgd-iter=3 use-error-feedback=false random-seed=7 batch-tensors-with-same-shape=true" -o %t.pytorch.mlir
// RUN: diff %t.ours.mlir %t.pytorch.mlir
// RUN: FileCheck %s --check-prefix=PASS < %t.pytorch.mlir
// PASS: ddp.state @ddp.step.step : i64 {ddp.start_iter = 3 : i64}
// PASS: ddp.state @ddp.q.w : tensor<32x2xf32>
// PASS-NOT: ddp.state @ddp.error.w

// The pipeline: powersgd-rank is also rank and matrix-approximation-rank.
// RUN: ddp-opt %s --ddp-compress="powersgd-rank=2 start-iter=3 seed=7" -o %t.pipe.ours.mlir
// RUN: ddp-opt %s --ddp-compress="rank=2 start-powersgd-iter=3 random-seed=7" -o %t.pipe.rank.mlir
// RUN: ddp-opt %s --ddp-compress="matrix-approximation-rank=2 start-iter=3 random-seed=7" -o %t.pipe.pytorch.mlir
// RUN: diff %t.pipe.ours.mlir %t.pipe.rank.mlir
// RUN: diff %t.pipe.ours.mlir %t.pipe.pytorch.mlir
// RUN: ddp-opt %s -p 'builtin.module(ddp-compress{matrix-approximation-rank=2 start-iter=3 seed=7})' -o %t.pipe.p.mlir
// RUN: diff %t.pipe.ours.mlir %t.pipe.p.mlir

// --help shows both names.
// RUN: ddp-opt --help | FileCheck %s --check-prefix=HELP
// HELP: --insert-powersgd
// HELP: --rank=<uint> {{.*}}matrix-approximation-rank
// HELP: --seed=<long> {{.*}}random-seed
// HELP: --start-iter=<long> {{.*}}start-powersgd-iter

// Typos get the nearest name; a name far from all gets the list.
// RUN: not ddp-opt %s --insert-powersgd="rnak=2" 2>&1 | FileCheck %s --check-prefix=TYPO
// TYPO: error: insert-powersgd: no such option 'rnak'; did you mean 'rank'?
// RUN: not ddp-opt %s --insert-powersgd="use-error-feedbak=false" 2>&1 | FileCheck %s --check-prefix=TYPO-PT
// TYPO-PT: error: insert-powersgd: no such option 'use-error-feedbak'; did you mean 'use-error-feedback'?
// RUN: not ddp-opt %s --ddp-compress="powersgd-rnak=2" 2>&1 | FileCheck %s --check-prefix=TYPO-PIPE
// TYPO-PIPE: error: ddp-compress: no such option 'powersgd-rnak'; did you mean 'powersgd-rank'?
// RUN: not ddp-opt %s --ddp-plan="profile=p.json min-compresion-rate=2" 2>&1 | FileCheck %s --check-prefix=TYPO-PLAN
// TYPO-PLAN: error: ddp-plan: no such option 'min-compresion-rate'; did you mean 'min-compression-rate'?
// List options are names too (they print nothing without a value).
// RUN: not ddp-opt %s --ddp-plan="profile=p.json rnaks=1,2" 2>&1 | FileCheck %s --check-prefix=TYPO-LIST
// TYPO-LIST: error: ddp-plan: no such option 'rnaks'; did you mean 'ranks'?
// RUN: not ddp-opt %s --ddp-compress="plan-choice=plain" 2>&1 | FileCheck %s --check-prefix=TYPO-PIPE-LIST
// TYPO-PIPE-LIST: error: ddp-compress: no such option 'plan-choice'; did you mean 'plan-choices'?
// RUN: not ddp-opt %s --insert-powersgd="xyzzy=1" 2>&1 | FileCheck %s --check-prefix=FAR
// FAR: error: insert-powersgd: no such option 'xyzzy'; the options are batch-same-shape, bucket-cap-mb, buckets, error-feedback, min-compression-rate, mode, orthogonalization-epsilon, planned, rank, seed, start-iter, warm-start
// Other passes answer typos the same way.
// RUN: not ddp-opt %s --ddp-bucketize="capmb=1" 2>&1 | FileCheck %s --check-prefix=BUCKET
// BUCKET: error: ddp-bucketize: no such option 'capmb'; did you mean 'cap-mb'?

// A list option may be given twice (its values add up); another may not.
// RUN: ddp-opt %s --ddp-plan="profile=%S/../Dialect/DDP/Transforms/Inputs/plan-1gbps.json choices=plain choices=fp16" -o /dev/null
// RUN: not ddp-opt %s --insert-powersgd="rank=2 rank=3" 2>&1 | FileCheck %s --check-prefix=SAME-TWICE
// SAME-TWICE: error: insert-powersgd: option 'rank' is given twice{{$}}
// Both names of one option.
// RUN: not ddp-opt %s --insert-powersgd="rank=2 matrix-approximation-rank=4" 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: insert-powersgd: option 'rank' is given twice (as 'rank' and 'matrix-approximation-rank')
// RUN: not ddp-opt %s --ddp-compress="rank=2 powersgd-rank=2" 2>&1 | FileCheck %s --check-prefix=TWICE-PIPE
// TWICE-PIPE: error: ddp-compress: option 'powersgd-rank' is given twice (as 'rank' and 'powersgd-rank')

func.func @step(%w: tensor<64x32xf32> loc("w"), %b: tensor<32xf32> loc("b"))
    -> (tensor<64x32xf32>, tensor<32xf32>) {
  %r:2 = ddp.allreduce mean %w, %b : tensor<64x32xf32>, tensor<32xf32>
  return %r#0, %r#1 : tensor<64x32xf32>, tensor<32xf32>
}
