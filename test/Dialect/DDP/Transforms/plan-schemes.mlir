// ddp-plan weighs any compression scheme with a cost hook
// (CompressionScheme::predict) beside its built-in choices: top-k and
// quantization, given by name with their passes' options. Inputs/plan-1gbps.json and
// plan-400gbps.json have the kernel time it needs (top_k_f32) and the
// link's allgather (allgather_i8).
// DEFINE: %{stages} = --insert-powersgd=planned=true --ddp-apply-planned-schemes \
// DEFINE:   --insert-fp16-compression=planned=true --insert-bf16-compression=planned=true
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=plain,fp16,powersgd,topk,topk{ratio=0.001}" %{stages} \
// RUN:   --ddp-compression-report=output=- | FileCheck %s --check-prefix=SLOW
// On a fast link the top-k kernels cost more than the link saves.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-400gbps.json choices=plain,topk" %{stages} | FileCheck %s --check-prefix=FAST
// A scheme chosen by the plan is the scheme's pass on that bucket.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-400gbps.json choices=topk{ratio=0.01}" %{stages} \
// RUN:   | sed -e 's/^module attributes {ddp.plan = .*} {$/module {/' > %t.planned
// RUN: ddp-opt %s --ddp-bucketize --insert-topk=ratio=0.01 > %t.fixed
// RUN: diff %t.planned %t.fixed
// PyTorch's quantization hooks (insert-quantization's options): one byte
// per element and a scale per channel cross the link.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=plain,quantize" %{stages} | FileCheck %s --check-prefix=QUANTIZE
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=quantize{granularity=per-channel}" %{stages} \
// RUN:   | sed -e 's/^module attributes {ddp.plan = .*} {$/module {/' > %t.planned-q
// RUN: ddp-opt %s --ddp-bucketize --insert-quantization=granularity=per-channel > %t.fixed-q
// RUN: diff %t.planned-q %t.fixed-q
// The built-in families take options in braces too: powersgd{rank=8} is
// PowerSGD at that rank alone (ranks= gives several), and a bucket it is
// chosen for becomes what insert-powersgd at rank 8 makes of it.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=powersgd{rank=8},powersgd+fp16{rank=2},plain" \
// RUN:   | FileCheck %s --check-prefix=RANKED
// One choice spelled with spaces in its braces is one column.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=plain,topk{ ratio=0.001  error-feedback=true },topk{ratio=0.001 error-feedback=true},powersgd{ rank=8 }" \
// RUN:   | FileCheck %s --check-prefix=SPACES
// SPACES: choices = ["plain", "topk{ratio=0.001 error-feedback=true}", "powersgd-r8"]
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-400gbps.json choices=powersgd{rank=8}" %{stages} \
// RUN:   | sed -e 's/^module attributes {ddp.plan = .*} {$/module {/' > %t.planned-p
// RUN: ddp-opt %s --insert-powersgd=rank=8 > %t.fixed-p
// RUN: diff %t.planned-p %t.fixed-p
// Wrong choices and profiles that lack what the model needs are errors
// that say so.
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=plain,topk{ratio=2}" 2>&1 | FileCheck %s --check-prefix=RATIO
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=plain,topk{bogus=1}" 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=topk{buckets=fc}" 2>&1 | FileCheck %s --check-prefix=BUCKETS
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=plain,topk{ratio=0.1" 2>&1 | FileCheck %s --check-prefix=BRACE
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=plain,quantize{granularity=per-row}" 2>&1 | FileCheck %s --check-prefix=GRANULARITY
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=plain,randomk" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-10gbps.json choices=plain,topk" 2>&1 | FileCheck %s --check-prefix=NOKERNEL
// RUN: sed -e 's/"allgather_i8"/"allgather_unused"/' %S/Inputs/plan-1gbps.json > %t.nogather.json
// RUN: not ddp-opt %s --ddp-plan="profile=%t.nogather.json choices=plain,topk" 2>&1 | FileCheck %s --check-prefix=NOGATHER

func.func @step(%w: tensor<1024x1024xf32> loc("fc.weight"),
                %b: tensor<1024xf32> loc("fc.bias"))
    -> (tensor<1024x1024xf32>, tensor<1024xf32>) {
  %rw = ddp.allreduce mean %w : tensor<1024x1024xf32>
  %rb = ddp.allreduce mean %b : tensor<1024xf32>
  return %rw, %rb : tensor<1024x1024xf32>, tensor<1024xf32>
}

// At 1 Gb/s the sparsest top-k is fastest: 1049 values and i32 indices
// cross the link instead of 1049600 values.
// SLOW:      ddp compression report
// SLOW:      bucket of 2 [fc.bias,fc.weight] 1049600 f32 topk - f32+i32 1049600 2098 500.29x
// SLOW:      ddp plan: predicted time
// SLOW:      plain fp16 powersgd-r1 powersgd-r2 powersgd-r4 topk topk{ratio=0.001} chosen reason
// SLOW-NEXT: fc.bias,fc.weight 2 1049600 33.64 17.34 6.19 8.28 12.46 2.73 2.12 topk{ratio=0.001} 15.87x faster than plain (2.12 ms vs 33.64 ms); next topk 2.73 ms
// SLOW:      module attributes {ddp.plan = {buckets = [{choice = "topk{ratio=0.001}"
// SLOW-SAME: choices = ["plain", "fp16", "powersgd-r1", "powersgd-r2", "powersgd-r4", "topk", "topk{ratio=0.001}"]
// SLOW:      ddp.flatten %arg1, %arg0 scheme <"topk", {error_feedback = true, ratio = 1.000000e-03 : f64}>
// SLOW:      ddp.top_k %{{.*}} : tensor<1049600xf32> -> tensor<1049xf32>, tensor<1049xi32>
// SLOW:      ddp.allgather %{{.*}}, %{{.*}} : tensor<1049xf32>, tensor<1049xi32>
// SLOW-NOT:  ddp.allreduce

// FAST: choice = "plain"
// FAST-SAME: reason = "plain 89.0 us is fastest: topk would take 2.02 ms (6.7 us on the link, 2.01 ms computing)"
// FAST-NOT: ddp.top_k

// QUANTIZE: choice = "quantize"
// QUANTIZE-SAME: quantize = 9698085 : i64
// QUANTIZE-SAME: reason = "3.47x faster than plain (9.70 ms vs 33.64 ms); next plain 33.64 ms"
// QUANTIZE: ddp.flatten %arg1, %arg0 scheme <"quantize-per-tensor", {exchange = "fused"}>
// QUANTIZE: ddp.allgather %{{.*}}, %{{.*}}, %{{.*}} : tensor<1xf32>, tensor<1xf32>, tensor<1x1049600xi8>

// GRANULARITY: for the --granularity option: Cannot find option named 'per-row'!
// GRANULARITY: error: ddp-plan: choices: 'quantize{granularity=per-row}': insert-quantization: an option's value is invalid
// RATIO: error: ddp-plan: choices: 'topk{ratio=2}': ratio=2 must be in (0, 1]
// OPTION: error: ddp-plan: choices: 'topk{bogus=1}': insert-topk: no such option 'bogus'; the options are buckets, error-feedback, ratio
// BUCKETS: error: ddp-plan: choices: 'topk{buckets=fc}': buckets= does not apply to a choice of ddp-plan (use its never= option)
// BRACE: error: ddp-plan: choices: 'topk{ratio=0.1': options go in braces at the end, as topk{ratio=0.001}
// UNKNOWN: error: ddp-plan: choices: 'randomk' is not one of ddp-plan's choices (bf16, fp16, plain, powersgd, powersgd+fp16) or a scheme with a cost model (quantize, topk)
// NOKERNEL: error: ddp-plan: cannot weigh 'topk' for this bucket: the profile has no top_k_f32 kernel time (ddprt-calibrate measures it; --kernels-only on the machine that computes)
// NOGATHER: error: ddp-plan: cannot weigh 'topk' for this bucket: the profile has no allgather_i8 (ddprt-calibrate measures it with the link)

// RANKED: predicted_ns = {plain = {{[0-9]+}} : i64, "powersgd-r2+fp16" = {{[0-9]+}} : i64, "powersgd-r8" = {{[0-9]+}} : i64}
// RANKED-SAME: choices = ["powersgd-r8", "powersgd-r2+fp16", "plain"]
