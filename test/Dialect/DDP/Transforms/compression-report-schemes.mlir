// The report's decision column is what the IR names, not what it guesses
// from the ops: a projection's `scheme` (any name, with its options in the
// JSON), a projection no pass named ("low-rank"), a cast that names its
// narrowing ("bf16") and one that does not (plain, sent as f16).
// RUN: ddp-opt %s --ddp-compression-report=json=%t.json -o /dev/null 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=JSON < %t.json

// CHECK: # where shape dtype decision rank sent-as elements sent ratio
// CHECK-NEXT: 0 @step:%arg0 64x32 f32 lowrank 2 f32 2048 192 10.67x
// CHECK-NEXT: 1 @step:%arg1 32x16 f32 low-rank 2 f32 512 96 5.33x
// CHECK-NEXT: 2 @step:%arg2 64 f32 bf16 - bf16 64 64 1.00x
// CHECK-NEXT: 3 @step:%arg3 64 f32 plain - f16 64 64 1.00x
// CHECK-NEXT: total: 4 tensors, 2 compressed, 1 narrowed; elements 2688 -> 416 (6.46x); bytes 10752 -> 1408 (7.64x)

// JSON: "decision": "lowrank"
// JSON: "options": {
// JSON-NEXT: "rank": 2
// JSON: "decision": "low-rank"
// JSON: "decision": "bf16"
// JSON: "decision": "plain"

func.func @step(%g: tensor<64x32xf32>, %h: tensor<32x16xf32>,
                %b: tensor<64xf32>, %c: tensor<64xf32>,
                %q: tensor<32x2xf32>, %q2: tensor<16x2xf32>)
    -> (tensor<32x2xf32>, tensor<16x2xf32>, tensor<64xbf16>, tensor<64xf16>) {
  %p = ddp.project %g times %q scheme <"lowrank", {rank = 2 : i64}>
      : tensor<64x32xf32> times tensor<32x2xf32>
  %ps = ddp.allreduce sum %p role compressed : tensor<64x2xf32>
  %n = ddp.backproject %g times %ps scheme <"lowrank", {rank = 2 : i64}>
      : tensor<64x32xf32> times tensor<64x2xf32>
  %ns = ddp.allreduce mean %n role compressed : tensor<32x2xf32>
  %p2 = ddp.project %h times %q2 : tensor<32x16xf32> times tensor<16x2xf32>
  %p2s = ddp.allreduce sum %p2 role compressed : tensor<32x2xf32>
  %n2 = ddp.backproject %h times %p2s : tensor<32x16xf32> times tensor<32x2xf32>
  %n2s = ddp.allreduce mean %n2 role compressed : tensor<16x2xf32>
  %nb = ddp.cast %b scheme <"bf16"> : tensor<64xf32> to tensor<64xbf16>
  %nbs = ddp.allreduce sum %nb : tensor<64xbf16>
  %nc = ddp.cast %c : tensor<64xf32> to tensor<64xf16>
  %ncs = ddp.allreduce sum %nc : tensor<64xf16>
  return %ns, %n2s, %nbs, %ncs : tensor<32x2xf32>, tensor<16x2xf32>, tensor<64xbf16>, tensor<64xf16>
}
