// Gradients fp16 narrowed before a bucket scheme took them: before
// compression is what the gradients are (their types and bytes), even where
// one bucket holds a native f16 gradient and a narrowed f32 one.
// RUN: ddp-opt %s --insert-fp16-compression --ddp-bucketize --insert-topk=ratio=0.1 --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s
// Columns as wide as their widest entry: "f16+f32" keeps the rows aligned.
// RUN: ddp-opt %s --insert-fp16-compression --ddp-bucketize --insert-topk=ratio=0.1 --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=ALIGNED --strict-whitespace
// The totals before compression are the plain report's.
// RUN: ddp-opt %s --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLAIN
// Narrowed counts the gradients fp16 narrowed (not c16, f16 already), in a
// bucket or not.
// RUN: ddp-opt %s --insert-fp16-compression --ddp-compression-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=NARROWED

// CHECK: 0 bucket of 1 [a32] 2048 f32 topk+fp16 - f16+i32 2048 408
// CHECK: 1 bucket of 1 [b64] 64 f64 topk+fp16 - f16+i32 64 12
// CHECK: 2 bucket of 2 [c16,d32] 228 f16+f32 topk+fp16 - f16+i32 228 44
// CHECK: total: 4 tensors, 4 compressed, 3 narrowed; elements 2340 -> 464 (5.04x); bytes 9360 -> 1392 (6.72x)
// PLAIN: total: 4 tensors, 0 compressed; elements 2340 -> 2340 (1.00x); bytes 9360 -> 9360 (1.00x)
func.func @grads(%a: tensor<64x32xf32> loc("a32"), %b: tensor<64xf64> loc("b64"),
                 %c: tensor<128xf16> loc("c16"), %d: tensor<100xf32> loc("d32"))
    -> (tensor<64x32xf32>, tensor<64xf64>, tensor<128xf16>, tensor<100xf32>) {
  %0 = ddp.allreduce sum %a : tensor<64x32xf32>
  %1 = ddp.allreduce sum %b : tensor<64xf64>
  %2 = ddp.allreduce sum %c : tensor<128xf16>
  %3 = ddp.allreduce sum %d : tensor<100xf32>
  return %0, %1, %2, %3 : tensor<64x32xf32>, tensor<64xf64>, tensor<128xf16>, tensor<100xf32>
}

// ALIGNED:      {{^}}   #  where                        shape            dtype   decision             rank sent-as     elements         sent    ratio
// ALIGNED-NEXT: {{^}}   0  bucket of 1 [a32]            2048             f32     topk+fp16               - f16+i32         2048          408    5.02x
// ALIGNED:      {{^}}   2  bucket of 2 [c16,d32]        228              f16+f32 topk+fp16               - f16+i32          228           44    5.18x

// NARROWED: total: 4 tensors, 0 compressed, 3 narrowed;
