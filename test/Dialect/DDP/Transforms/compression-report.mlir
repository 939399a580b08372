// Plain allreduces: nothing compressed, ratio 1.
// RUN: ddp-opt %s --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLAIN
// After PowerSGD (rank 2): the text table on stderr, JSON in a file.
// RUN: ddp-opt %s --insert-powersgd=rank=2 --ddp-fuse-kernels --ddp-compression-report=json=%t.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=TEXT
// RUN: FileCheck %s --check-prefix=JSON < %t.json
// The report only reads the IR.
// RUN: ddp-opt %s --insert-powersgd=rank=2 --ddp-compression-report=output=%t.txt | FileCheck %s --check-prefix=IR
// RUN: FileCheck %s --check-prefix=TEXT < %t.txt
// fp16/bf16 name their decision (the narrowing cast's scheme), also after
// fusion, and after PowerSGD ("+fp16"), layerwise or batched.
// RUN: ddp-opt %s --insert-fp16-compression --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=FP16
// RUN: ddp-opt %s --insert-bf16-compression --ddp-fuse-kernels --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=BF16
// RUN: ddp-opt %s --insert-powersgd="rank=2 mode=batched" --insert-fp16-compression --ddp-fuse-kernels --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=BATCHED-FP16
// ... through a two-level allreduce (the narrowing before the node sum),
// and when the gradient was narrowed before the scheme took it.
// RUN: ddp-opt %s --insert-fp16-compression --ddp-two-level --ddp-schedule-overlap --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=FP16
// RUN: ddp-opt %s --insert-powersgd=rank=2 --insert-fp16-compression --ddp-two-level --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=PSGD-FP16
// RUN: ddp-opt %s --insert-bf16-compression --insert-powersgd=rank=2 --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=BF16-PSGD
// RUN: ddp-opt %s --insert-bf16-compression --insert-powersgd="rank=2 mode=batched" --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=BF16-BATCHED
// RUN: ddp-opt %s --insert-powersgd="rank=2 mode=batched" --insert-fp16-compression --ddp-two-level --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=BATCHED-FP16
// A bucket scheme on gradients fp16 narrowed first: before compression is
// the f32 gradients (77056 bytes), not the f16 bucket.
// RUN: ddp-opt %s --ddp-bucketize --insert-fp16-compression --insert-topk=ratio=0.1 --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=FP16-TOPK
// A file that cannot be written is an error.
// ddp-schedule-overlap versions the step on PowerSGD's warm-up: the buckets
// PowerSGD left (here one quantized, one plain) are in both versions and
// count once, as after the warm-up.
// RUN: ddp-opt %s --insert-powersgd="rank=2 bucket-cap-mb=0 buckets=^fc1|^emb" --insert-quantization --ddp-schedule-overlap \
// RUN:   --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=VERSIONED --implicit-check-not=conv1
// VERSIONED:  0  fc1.weight                   64x32            f32   powersgd                2 f32             2048          192   10.67x
// VERSIONED:  1  fc1.bias                     64               f32   uncompressed            - f32               64           64    1.00x
// VERSIONED:  2  emb                          1000x16          f32   powersgd                2 f32            16000         2032    7.87x
// VERSIONED:  3  bucket of 1 [conv1.weight]   1152             f32   quantize-per-tensor     - f32+i8          1152         1154    1.00x
// VERSIONED: total: 4 tensors, 3 compressed; elements 19264 -> 3442 (5.60x); bytes 77056 -> 10312 (7.47x) from step 1000 on
// RUN: not ddp-opt %s --ddp-compression-report=json=%t.missing/dir/r.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOWRITE

// FP16: 0 fc1.weight 64x32 f32 fp16 - f16 2048 2048 1.00x
// FP16: 3 emb 1000x16 f32 fp16 - f16 16000 16000 1.00x
// FP16: total: 4 tensors, 0 compressed, 4 narrowed; elements 19264 -> 19264 (1.00x); bytes 77056 -> 38528 (2.00x){{$}}
// BF16: 1 fc1.bias 64 f32 bf16 - bf16 64 64 1.00x
// BF16: 2 conv1.weight 16x8x3x3 f32 bf16 - bf16 1152 1152 1.00x
// PSGD-FP16: 0 fc1.weight 64x32 f32 powersgd+fp16 2 f16 2048 192 10.67x
// PSGD-FP16: 1 fc1.bias 64 f32 uncompressed+fp16 - f16 64 64 1.00x
// BF16-PSGD: 0 fc1.weight 64x32 f32 powersgd+bf16 2 bf16 2048 192 10.67x
// BF16-PSGD: 1 fc1.bias 64 f32 uncompressed+bf16 - bf16 64 64 1.00x
// FP16-TOPK: 0 bucket of 4 [emb,conv1.weight,fc1.bias,fc1.weight] 19264 f32 topk+fp16 - f16+i32 19264 3852 5.00x
// FP16-TOPK: total: 4 tensors, 4 compressed, 4 narrowed; elements 19264 -> 3852 (5.00x); bytes 77056 -> 11556 (6.67x)
// BF16-BATCHED: 0 bucket of 1 [fc1.weight] 46x46 f32 powersgd-batched+bf16 2 bf16 2048 184 11.13x
// BF16-BATCHED: 3 bucket of 1 [emb] 127x127 f32 powersgd-batched+bf16 2 bf16 16000 508 31.50x
// BF16-BATCHED: bytes 77056 -> 1720 (44.80x)
// BATCHED-FP16: 0 bucket of 4 [emb,conv1.weight,fc1.bias,fc1.weight] 139x139 f32 powersgd-batched+fp16 2 f16 19264 556 34.65x

// PLAIN: ddp compression report
// PLAIN: 0 fc1.weight 64x32 f32 plain - f32 2048 2048 1.00x
// PLAIN: 1 fc1.bias 64 f32 plain - f32 64 64 1.00x
// PLAIN: 2 conv1.weight 16x8x3x3 f32 plain - f32 1152 1152 1.00x
// PLAIN: 3 emb 1000x16 f32 plain - f32 16000 16000 1.00x
// PLAIN-NOT: from step
// PLAIN: total: 4 tensors, 0 compressed; elements 19264 -> 19264 (1.00x); bytes 77056 -> 77056 (1.00x){{$}}

// The numbers PyTorch's compression_stats() gives: (n + m) * r after for
// compressed tensors, n * m for the rest.
// The figures are the steady state, after PowerSGD's warm-up (start-iter,
// default 1000), when every gradient is sent uncompressed: said under the
// title, and on the total line.
// TEXT: ddp compression report
// TEXT-NEXT: from step 1000 on (start-iter): steps 0 to 999 are PowerSGD's warm-up and send every gradient uncompressed (19264 elements, 77056 bytes per step), so a run of 1000 steps or fewer compresses nothing
// TEXT-NEXT: # where shape dtype decision rank sent-as elements sent ratio
// TEXT-NEXT: 0 fc1.weight 64x32 f32 powersgd 2 f32 2048 192 10.67x
// TEXT-NEXT: 1 fc1.bias 64 f32 uncompressed - f32 64 64 1.00x
// TEXT-NEXT: 2 conv1.weight 16x8x3x3 f32 powersgd 2 f32 1152 176 6.55x
// TEXT-NEXT: 3 emb 1000x16 f32 powersgd 2 f32 16000 2032 7.87x
// TEXT-NEXT: total: 4 tensors, 3 compressed; elements 19264 -> 2464 (7.82x); bytes 77056 -> 9856 (7.82x) from step 1000 on

// JSON: "tensors": [
// JSON: "loc": "fc1.weight",
// JSON-NEXT: "shape": [
// JSON-NEXT: 64,
// JSON-NEXT: 32
// JSON-NEXT: ],
// JSON-NEXT: "dtype": "f32",
// JSON-NEXT: "compressed": true,
// JSON-NEXT: "rank": 2,
// JSON-NEXT: "numel_before": 2048,
// JSON-NEXT: "numel_after": 192,
// JSON: "loc": "fc1.bias",
// JSON: "compressed": false,
// JSON-NEXT: "rank": 0,
// JSON-NEXT: "numel_before": 64,
// JSON-NEXT: "numel_after": 64,
// JSON: "loc": "conv1.weight",
// JSON: "loc": "emb",
// JSON: "numel_before": 19264,
// JSON-NEXT: "numel_after": 2464,
// JSON-NEXT: "ratio": 7.818181818181818
// JSON: "warmup_steps": 1000

// IR: ddp.allreduce sum %{{.*}} role compressed

// NOWRITE: error: ddp-compression-report: cannot write '{{.*}}r.json'

func.func @grads(%w: tensor<64x32xf32> loc("fc1.weight"), %b: tensor<64xf32> loc("fc1.bias"),
                 %c: tensor<16x8x3x3xf32> loc("conv1.weight"), %e: tensor<1000x16xf32> loc("emb"))
    -> (tensor<64x32xf32>, tensor<64xf32>, tensor<16x8x3x3xf32>, tensor<1000x16xf32>) {
  %0 = ddp.allreduce mean %w : tensor<64x32xf32>
  %1 = ddp.allreduce mean %b : tensor<64xf32>
  %2 = ddp.allreduce mean %c : tensor<16x8x3x3xf32>
  %3 = ddp.allreduce mean %e : tensor<1000x16xf32>
  return %0, %1, %2, %3 : tensor<64x32xf32>, tensor<64xf32>, tensor<16x8x3x3xf32>, tensor<1000x16xf32>
}
