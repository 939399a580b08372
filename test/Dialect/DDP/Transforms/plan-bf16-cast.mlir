// bf16's casts cost what the profile measured for bf16 (cast_f32_bf16),
// where it has one: a CPU with F16C and no bf16 conversion converts to bf16
// slower than to f16, and the plan then prefers fp16. A profile without it
// (written before ddprt-calibrate measured it) costs bf16 as f16.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-cpu-points.json choices=fp16,bf16" \
// RUN:   | FileCheck %s --check-prefix=SAME
// SAME: predicted_ns = {bf16 = 686695 : i64, fp16 = 686695 : i64}
//
// The same profile with bf16's cast 3x f16's (1 ms per 4 Mi elements for
// f16, 3 ms for bf16): 2 casts of 562,152 elements, 2 x 268 us more.
// RUN: %python -c "import json, sys; p = json.load(open(sys.argv[1])); \
// RUN:   p['kernels']['cast_f32_bf16'] = [dict(p['kernels']['cast_f32_f16'][0], seconds=0.003)]; \
// RUN:   json.dump(p, open(sys.argv[2], 'w'))" %S/Inputs/plan-cpu-points.json %t.json
// RUN: ddp-opt %s --ddp-plan="profile=%t.json choices=fp16,bf16" | FileCheck %s --check-prefix=SLOWER
// SLOWER: choice = "fp16", elements = 562152 : i64, function = "step", predicted_ns = {bf16 = 1222805 : i64, fp16 = 686695 : i64}

func.func @step(%a: tensor<512x512xf32> loc("a"), %b: tensor<512x512xf32> loc("b"),
                %c: tensor<1000xf32> loc("c"), %d: tensor<64x64x3x3xf32> loc("d"))
    -> (tensor<512x512xf32>, tensor<512x512xf32>, tensor<1000xf32>, tensor<64x64x3x3xf32>) {
  %r:4 = ddp.allreduce mean %a, %b, %c, %d
      : tensor<512x512xf32>, tensor<512x512xf32>, tensor<1000xf32>, tensor<64x64x3x3xf32>
  return %r#0, %r#1, %r#2, %r#3
      : tensor<512x512xf32>, tensor<512x512xf32>, tensor<1000xf32>, tensor<64x64x3x3xf32>
}
