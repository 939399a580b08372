// Sizes near the 64-bit limit: batched mode's square matrix is computed
// without overflow (a tensor of 2^62 elements used to make the square root
// loop forever) and refused, with the op's location, where it would not fit;
// layerwise mode and the report count huge tensors exactly.
// RUN: ddp-opt %s --split-input-file --insert-powersgd="rank=2 mode=batched" \
// RUN:   --verify-diagnostics | FileCheck %s --check-prefix=CHECK-BATCHED
// RUN: ddp-opt %s --split-input-file --insert-powersgd="rank=2 bucket-cap-mb=0" \
// RUN:   --ddp-compression-report=output=- -o /dev/null | FileCheck %s --check-prefix=REPORT

// Two tensors of 2^60 f16 elements (2^61 bytes each): as one square matrix
// more than 2^63 bytes.
func.func @two_huge(%a: tensor<1152921504606846976xf16>, %b: tensor<1152921504606846976xf16>)
    -> (tensor<1152921504606846976xf16>, tensor<1152921504606846976xf16>) {
  // expected-error @+1 {{insert-powersgd: batched mode packs this bucket's tensors into one square matrix, which would have more elements than a 64-bit size holds; use mode=layerwise or a smaller bucket-cap-mb}}
  %r:2 = ddp.allreduce mean %a, %b : tensor<1152921504606846976xf16>, tensor<1152921504606846976xf16>
  return %r#0, %r#1 : tensor<1152921504606846976xf16>, tensor<1152921504606846976xf16>
}
// REPORT-LABEL: ddp compression report
// REPORT: 0  @two_huge:%arg0 1152921504606846976 f16 uncompressed - f16 1152921504606846976 1152921504606846976 1.00x
// REPORT: 1  @two_huge:%arg1 1152921504606846976 f16 uncompressed - f16 1152921504606846976 1152921504606846976 1.00x
// REPORT: total: 2 tensors, 0 compressed; elements 2305843009213693952 -> 2305843009213693952 (1.00x); bytes 4611686018427387904 -> 4611686018427387904 (1.00x)

// -----

// One tensor of 2^59 + 1 f32 elements (just over 2^61 bytes): its square
// matrix is 759250125 x 759250125, which fits; the square root of a count
// this large used to be searched by multiplying sides that wrap.
func.func @one_huge(%a: tensor<576460752303423489xf32>) -> tensor<576460752303423489xf32> {
  // CHECK-BATCHED: tensor.expand_shape {{.*}} into tensor<759250125x759250125xf32>
  %r = ddp.allreduce mean %a : tensor<576460752303423489xf32>
  return %r : tensor<576460752303423489xf32>
}
// REPORT-LABEL: ddp compression report
// REPORT: 0  @one_huge:%arg0 576460752303423489 f32 uncompressed - f32 576460752303423489 576460752303423489 1.00x
// REPORT: total: 1 tensors, 0 compressed; elements 576460752303423489 -> 576460752303423489 (1.00x); bytes 2305843009213693956 -> 2305843009213693956 (1.00x)
