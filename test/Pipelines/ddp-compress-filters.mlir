// ddp-compress with more than one bucket scheme: PowerSGD, the hook and
// quantization run in this order, each on the buckets the ones before
// left and its own filter (powersgd-buckets=, hook-buckets=,
// quantize-buckets=) matches; narrow= takes what is left, and PowerSGD's
// collectives.
// RUN: ddp-opt %s --ddp-compress="powersgd-rank=2 start-iter=0 bucket-cap-mb=0 powersgd-buckets=^fc1 quantize=per-tensor quantize-buckets=^fc2 narrow=fp16" \
// RUN:   --ddp-compression-report -o %t.mlir 2>&1 | FileCheck %s --check-prefix=THREE
// THREE: 0  fc1.weight                   64x32            f32   powersgd+fp16           2 f16             2048          192   10.67x
// THREE: 1  fc3.weight                   64x32            f32   fp16                    - f16             2048         2048    1.00x
// THREE: 2  bucket of 1 [fc2.bias]       64               f32   quantize-per-tensor     - f32+i8            64           66    0.97x
// THREE: 3  bucket of 1 [fc2.weight]     2048             f32   quantize-per-tensor     - f32+i8          2048         2050    1.00x
// THREE: total: 4 tensors, 3 compressed, 2 narrowed; elements 6208 -> 4356 (1.43x); bytes 24832 -> 6608 (3.76x)

// The last scheme without a filter takes every bucket left.
// RUN: ddp-opt %s --ddp-compress="powersgd-rank=2 start-iter=0 bucket-cap-mb=0 powersgd-buckets=^fc1 quantize=per-tensor" \
// RUN:   --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=REST
// REST: fc1.weight {{.*}} powersgd
// REST: bucket of 1 [fc3.weight] {{.*}} quantize-per-tensor
// REST: bucket of 1 [fc2.bias] {{.*}} quantize-per-tensor
// REST: bucket of 1 [fc2.weight] {{.*}} quantize-per-tensor
// REST: total: 4 tensors, 4 compressed

// The default bucket cap puts all four in one bucket: PowerSGD takes it
// whole (a name in it matches), and quantization finds nothing left.
// RUN: ddp-opt %s --ddp-compress="powersgd-rank=2 start-iter=0 powersgd-buckets=^fc1 quantize=per-tensor" \
// RUN:   --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=WHOLE --implicit-check-not=quantize
// WHOLE: fc1.weight {{.*}} powersgd
// WHOLE: fc2.weight {{.*}} powersgd
// WHOLE: fc2.bias {{.*}} uncompressed
// WHOLE: fc3.weight {{.*}} powersgd
// WHOLE: total: 4 tensors, 3 compressed

// The step runs on 2 ranks as compiled, and sends what the report says.
// REQUIRES: mpi, numpy
// RUN: %numpy_python -c "import numpy as np; rng = np.random.default_rng(0); \
// RUN:   [np.savez('%t.in%d.npz' % r, **{n: rng.standard_normal(s, dtype=np.float32) for n, s in \
// RUN:   [('fc1.weight', (64, 32)), ('fc2.weight', (64, 32)), ('fc2.bias', (64,)), ('fc3.weight', (64, 32))]}) for r in range(2)]"
// RUN: ddp-run --np=2 %t.mlir --steps=2 --inputs=%t.in{rank}.npz 2>&1 | FileCheck %s --check-prefix=SENT
// SENT: last step sent 4,356 elements (6,608 bytes) per rank

func.func @step(%w1: tensor<64x32xf32> loc("fc1.weight"), %w2: tensor<64x32xf32> loc("fc2.weight"),
                %b2: tensor<64xf32> loc("fc2.bias"), %w3: tensor<64x32xf32> loc("fc3.weight"))
    -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64xf32>, tensor<64x32xf32>) {
  %0 = ddp.allreduce mean %w1 : tensor<64x32xf32>
  %1 = ddp.allreduce mean %w2 : tensor<64x32xf32>
  %2 = ddp.allreduce mean %b2 : tensor<64xf32>
  %3 = ddp.allreduce mean %w3 : tensor<64x32xf32>
  return %0, %1, %2, %3 : tensor<64x32xf32>, tensor<64x32xf32>, tensor<64xf32>, tensor<64x32xf32>
}
