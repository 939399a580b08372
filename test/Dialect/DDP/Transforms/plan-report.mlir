// The compression report prints ddp-plan's table: per bucket the predicted
// time of every choice, the choice and the reason; every bucket alike
// under each choice; the planned total. In JSON too.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json bucket-cap-mb=4" \
// RUN:   --ddp-compression-report="output=- json=%t.json" -o /dev/null | FileCheck %s
// RUN: FileCheck %s --check-prefix=JSON < %t.json
// A bucket the plan sends plain says so (not "uncompressed", which is what
// PowerSGD leaves), through the pipeline's fusion and scheduling too.
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-400gbps.json" \
// RUN:   --ddp-compression-report=output=- -o /dev/null | FileCheck %s --check-prefix=PLAIN
// RUN: ddp-opt %s --ddp-compress="plan=%S/Inputs/plan-400gbps.json" \
// RUN:   --ddp-compression-report=output=- -o /dev/null | FileCheck %s --check-prefix=PLAIN
// PLAIN: 0 fc.bias 1024 f32 plain (plan) - f32
// PLAIN: 2 fc.weight 1024x1024 f32 plain (plan) - f32
// PowerSGD's uncompressed tensors keep their label.
// RUN: ddp-opt %s --insert-powersgd --ddp-compression-report=output=- -o /dev/null | FileCheck %s --check-prefix=PSGD
// PSGD: 0 fc.bias 1024 f32 uncompressed
// Without a plan, no plan table.
// RUN: ddp-opt %s --insert-powersgd --ddp-compression-report=output=- -o /dev/null | FileCheck %s --check-prefix=NOPLAN

// DDP's buckets (reverse parameter order): fc.weight fills the first, 1 MiB
// one; the other two share the second.
func.func @step(%b: tensor<1024xf32> loc("fc.bias"),
                %v: tensor<256xf32> loc("norm.weight"),
                %w: tensor<1024x1024xf32> loc("fc.weight"))
    -> (tensor<1024xf32>, tensor<256xf32>, tensor<1024x1024xf32>) {
  %rb = ddp.allreduce mean %b : tensor<1024xf32>
  %rv = ddp.allreduce mean %v : tensor<256xf32>
  %rw = ddp.allreduce mean %w : tensor<1024x1024xf32>
  return %rb, %rv, %rw : tensor<1024xf32>, tensor<256xf32>, tensor<1024x1024xf32>
}

// CHECK-LABEL: ddp plan: predicted time of each bucket's exchange per step (ms), 2 ranks
// CHECK-NEXT: profile: {{.*}}plan-1gbps.json (hand, cuda, 2 ranks; allreduce f32 50.0 us + 1.000 Gb/s)
// CHECK-NEXT: the exchange alone (overlap with the backward pass is not modelled); PowerSGD after its warm-up steps
// CHECK-NEXT: #  bucket                   tensors   elements       plain        fp16        bf16 powersgd-r1 powersgd-r2 powersgd-r4 powersgd-r1+fp16 powersgd-r2+fp16 powersgd-r4+fp16  chosen           reason
// CHECK-NEXT: 0  fc.weight                      1    1048576       33.60       17.33       17.33        6.19        8.28       12.46             6.16             8.22            12.33  powersgd-r1+fp16 5.46x faster than plain (6.16 ms vs 33.60 ms); next powersgd-r1 6.19 ms
// CHECK-NEXT: 1  norm.weight,fc.bias            2       1280        0.09        0.07        0.07        0.09        0.09        0.09             0.09             0.09             0.09  fp16             1.28x faster than plain (71.1 us vs 91.0 us); next bf16 71.1 us
// CHECK-NEXT: every bucket alike                                33.70       17.40       17.40        6.28        8.37       12.55             6.25             8.31            12.43
// CHECK-NEXT: planned: 6.23 ms per step (5.41x plain's 33.70 ms); best single choice for every bucket: powersgd-r1+fp16 6.25 ms

// JSON:      "plan": {
// JSON:        "world": 2,
// JSON:        "buckets": [
// JSON:            "where": "fc.weight",
// JSON:            "choice": "powersgd-r1+fp16",
// JSON:            "predicted_us": {
// JSON:              "plain": 33604.43
// JSON:              "powersgd-r1": 6190.53
// JSON:            "where": "norm.weight,fc.bias",
// JSON:            "choice": "fp16",
// JSON:        "total_us": {
// JSON-NEXT:     "planned": 6229.83

// NOPLAN: total: 3 tensors
// NOPLAN-NOT: ddp plan
