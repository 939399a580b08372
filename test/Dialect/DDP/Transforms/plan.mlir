// ddp-plan chooses per bucket from a machine profile and only annotates
// each bucket with its choice; the stages of ddp-compress (the %{stages}
// defined below) compress the buckets planned their way. The profiles in
// Inputs/ are written by hand (the CUDA backend's collectives, one per
// bucket; the same kernel times): a 1 Gb/s link, where PowerSGD pays; 10
// Gb/s, where only fp16 does; 400 Gb/s, where nothing does.
// DEFINE: %{stages} = --insert-powersgd=planned=true --ddp-apply-planned-schemes \
// DEFINE:   --insert-fp16-compression=planned=true --insert-bf16-compression=planned=true
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=plain,fp16,bf16,powersgd" %{stages} | FileCheck %s --check-prefix=SLOW
// With PowerSGD's collectives in fp16 allowed (the default), they are
// slightly faster still: P, Q and the uncompressed bias travel in f16.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json" %{stages} | FileCheck %s --check-prefix=COMBO
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-10gbps.json" %{stages} | FileCheck %s --check-prefix=MEDIUM
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-400gbps.json" %{stages} | FileCheck %s --check-prefix=FAST
// The user's limits: a rank floor, fp16 only, names never compressed, a
// tolerance that plain keeps what saves less.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json min-rank=2" %{stages} | FileCheck %s --check-prefix=FLOOR
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=plain,fp16" %{stages} | FileCheck %s --check-prefix=FP16
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json never=weight" %{stages} 2>&1 | FileCheck %s --check-prefix=NEVER
// After ddp-two-level, never= and the plan name the gradients the
// cross-node allreduce carries, as on one level.
// RUN: ddp-opt %s -p 'builtin.module(func.func(ddp-two-level),ddp-plan{profile=%S/Inputs/plan-1gbps.json never=weight})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NEVER-TWO
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-10gbps.json tolerance=0.5" %{stages} | FileCheck %s --check-prefix=TOLERANCE
// More ranks, more bytes per rank on the ring: 4 ranks at 10 Gb/s.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-10gbps.json world=4" %{stages} | FileCheck %s --check-prefix=WORLD
// A fixed choice is the fixed pass: powersgd at rank 2 on every bucket is
// insert-powersgd's rewrite, but for the plan attribute.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-400gbps.json choices=powersgd ranks=2" %{stages} \
// RUN:   | sed -e 's/^module attributes {ddp.plan = .*} {$/module {/' > %t.planned
// RUN: ddp-opt %s --insert-powersgd=rank=2 > %t.fixed
// RUN: diff %t.planned %t.fixed
// ddp-plan alone: the decision on the bucket, nothing rewritten.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json" | FileCheck %s --check-prefix=ANNOTATED
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-10gbps.json" | FileCheck %s --check-prefix=ANNOTATED-FP16
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-400gbps.json" | FileCheck %s --check-prefix=ANNOTATED-PLAIN
// Lowered without its stages, the annotation is refused, not sent plain.
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json" --ddp-lower-to-llvm 2>&1 | FileCheck %s --check-prefix=UNTAKEN
// A stage of another choice leaves the bucket to its own.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-10gbps.json" --insert-powersgd=planned=true \
// RUN:   --insert-bf16-compression=planned=true | FileCheck %s --check-prefix=ANNOTATED-FP16
// A fixed pass would overrule the plan: refused.
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-10gbps.json" --insert-powersgd=rank=2 2>&1 | FileCheck %s --check-prefix=OVERRULE
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json" --insert-fp16-compression 2>&1 | FileCheck %s --check-prefix=OVERRULE
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json" --insert-topk 2>&1 | FileCheck %s --check-prefix=OVERRULE
// Scheduled before its stage, a planned bucket would start as it is.
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json" --ddp-schedule-overlap 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// A second plan would see only what the first left.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-400gbps.json" -o %t.once
// RUN: not ddp-opt %t.once --ddp-plan="profile=%S/Inputs/plan-1gbps.json" 2>&1 | FileCheck %s --check-prefix=TWICE
// A kernel profile for a --hand link profile.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-hand.json kernels=%S/Inputs/plan-1gbps.json" %{stages} | FileCheck %s --check-prefix=HAND

func.func @step(%w: tensor<1024x1024xf32> loc("fc.weight"),
                %b: tensor<1024xf32> loc("fc.bias"))
    -> (tensor<1024x1024xf32>, tensor<1024xf32>) {
  %rw = ddp.allreduce mean %w : tensor<1024x1024xf32>
  %rb = ddp.allreduce mean %b : tensor<1024xf32>
  return %rw, %rb : tensor<1024x1024xf32>, tensor<1024xf32>
}

// SLOW: module attributes {ddp.plan = {buckets = [{choice = "powersgd-r1", elements = 1049600 : i64, function = "step"
// SLOW-SAME: predicted_ns = {bf16 = 17344088 : i64, fp16 = 17344088 : i64, plain = 33637200 : i64, "powersgd-r1" = 6190536 : i64, "powersgd-r2" = 8281072 : i64, "powersgd-r4" = 12462144 : i64}
// SLOW-SAME: reason = "5.43x faster than plain (6.19 ms vs 33.64 ms); next powersgd-r2 8.28 ms", tensors = 2 : i64, where = "fc.bias,fc.weight"}]
// The choices in the order the planner weighs them (the report's columns).
// SLOW-SAME: choices = ["plain", "fp16", "bf16", "powersgd-r1", "powersgd-r2", "powersgd-r4"]
// SLOW-SAME: profile = "{{.*}}plan-1gbps.json (hand, cuda, 2 ranks; allreduce f32 50.0 us + 1.000 Gb/s)", world = 2 : i64}}
// SLOW: ddp.state @ddp.q.fc.weight : tensor<1024x1xf32>
// SLOW: ddp.allreduce_start mean %arg1 role uncompressed
// SLOW: ddp.allreduce sum %{{.*}} role compressed : tensor<1024x1xf32>

// COMBO: choice = "powersgd-r1+fp16"
// COMBO-SAME: "powersgd-r1+fp16" = 6159233 : i64
// COMBO-SAME: reason = "5.46x faster than plain (6.16 ms vs 33.64 ms); next powersgd-r1 6.19 ms"
// COMBO: ddp.allreduce_start sum %{{.*}} role uncompressed : tensor<1024xf16>
// COMBO: ddp.allreduce sum %{{.*}} role compressed : tensor<1024x1xf16>
// COMBO: ddp.allreduce sum %{{.*}} role compressed : tensor<1024x1xf16>

// MEDIUM: choice = "fp16"
// MEDIUM-SAME: reason = "1.54x faster than plain (2.20 ms vs 3.38 ms); next bf16 2.20 ms"
// MEDIUM: ddp.cast %{{.*}}, %{{.*}} : tensor<1024xf32>, tensor<1024x1024xf32> to tensor<1024xf16>, tensor<1024x1024xf16>
// MEDIUM-NEXT: ddp.allreduce sum %{{.*}}, %{{.*}} : tensor<1024xf16>, tensor<1024x1024xf16>

// FAST: choice = "plain"
// FAST-SAME: reason = "plain 89.0 us is fastest: fp16 would take 547.5 us (47.0 us on the link, 500.5 us computing)"
// FAST: ddp.allreduce mean %arg1, %arg0 role uncompressed
// FAST-NOT: ddp.cast

// FLOOR: choice = "powersgd-r2+fp16"
// FLOOR-SAME: predicted_ns = {bf16 = {{.*}}, fp16 = {{.*}}, plain = {{.*}}, "powersgd-r2" = {{.*}}, "powersgd-r2+fp16" = {{.*}}, "powersgd-r4" = {{.*}}, "powersgd-r4+fp16" = {{.*}}}
// FLOOR: ddp.state @ddp.q.fc.weight : tensor<1024x2xf32>

// FP16: choice = "fp16"
// FP16-SAME: predicted_ns = {fp16 = {{.*}}, plain = {{.*}}}
// FP16-NOT: ddp.state @ddp.q

// NEVER: remark: ddp-plan sends fc.weight plain: never='weight' matches
// NEVER: ddp.plan = {buckets = [{choice = "plain", elements = 1048576 : i64, function = "step", predicted_ns = {}, reason = "never='weight' matches", tensors = 1 : i64, where = "fc.weight"},
// NEVER-SAME: {choice = "fp16", elements = 1024 : i64
// NEVER-SAME: reason = "{{.*}}x faster than plain
// NEVER-SAME: where = "fc.bias"}
// NEVER: ddp.allreduce mean %arg0 role uncompressed : tensor<1024x1024xf32>
// NEVER: ddp.allreduce sum %{{.*}} : tensor<1024xf16>

// NEVER-TWO: remark: ddp-plan sends fc.weight plain: never='weight' matches
// NEVER-TWO: ddp.plan = {buckets = [{choice = "plain", {{.*}} reason = "never='weight' matches", tensors = 1 : i64, where = "fc.weight"},
// NEVER-TWO-SAME: {choice = "fp16", {{.*}} where = "fc.bias"}
// NEVER-TWO: %[[NODE:.*]]:2 = ddp.allreduce mean %arg1, %arg0 group node
// NEVER-TWO: ddp.allreduce mean %[[NODE]]#1 role uncompressed group across_nodes : tensor<1024x1024xf32>
// NEVER-TWO: ddp.allreduce mean %[[NODE]]#0 group across_nodes {ddp.planned = #ddp.compression<"fp16">} : tensor<1024xf32>

// TOLERANCE: choice = "plain"
// TOLERANCE-SAME: reason = "fp16 would save 34.9% of plain's 3.38 ms, under tolerance=0.5: not worth its error"
// TOLERANCE: ddp.allreduce mean %arg1, %arg0 role uncompressed

// WORLD: plain = 5058{{[0-9]+}} : i64
// WORLD-SAME: world = 4 : i64

// HAND: choice = "plain"
// HAND-SAME: profile = "{{.*}}plan-hand.json (hand, cuda, 2 ranks; allreduce f32 10.0 us + 100.000 Gb/s; kernels from {{.*}}plan-1gbps.json)"

// ANNOTATED-NOT: ddp.state
// ANNOTATED: ddp.allreduce mean %arg1, %arg0 {ddp.planned = #ddp.compression<"powersgd", {narrow = f16, rank = 1 : i64}>}
// ANNOTATED-FP16: ddp.allreduce mean %arg1, %arg0 {ddp.planned = #ddp.compression<"fp16">}
// ANNOTATED-FP16-NOT: ddp.cast
// ANNOTATED-PLAIN: ddp.allreduce mean %arg1, %arg0 role uncompressed :
// ANNOTATED-PLAIN-NOT: ddp.planned
// UNTAKEN: error: this bucket is planned as #ddp.compression<"powersgd", {narrow = f16, rank = 1 : i64}> but was never compressed
// OVERRULE: error: {{insert-powersgd|insert-fp16-compression|insert-topk}} would compress every bucket, but this bucket is planned as #ddp.compression<{{.*}}> by ddp-plan: compress with ddp-compress{plan=...} in place of ddp-plan, or follow ddp-plan with the stages that honour its decisions: insert-powersgd{planned}, ddp-apply-planned-schemes, insert-fp16-compression{planned}, insert-bf16-compression{planned}
// SCHEDULE: error: ddp-schedule-overlap would start this allreduce as it is, but this bucket is planned as #ddp.compression<"powersgd", {narrow = f16, rank = 1 : i64}> by ddp-plan
// TWICE: error: ddp-plan: the module is planned already (it has 'ddp.plan'): plan the module as it was before ddp-plan or ddp-compress{plan=...}
