// Decisions ddp-plan never writes, for plan-stages.mlir.
module attributes {ddp.plan = {buckets = []}} {
  func.func @step(%w: tensor<256x128xf32>) -> tensor<256x128xf32> {
    %r = ddp.allreduce mean %w {ddp.planned = #ddp.compression<"powersgd", {rank = 0 : i64}>} : tensor<256x128xf32>
    return %r : tensor<256x128xf32>
  }
}
// BAD: error: ddp.planned #ddp.compression<"powersgd", {rank = 0 : i64}>: a PowerSGD decision is {rank = R : i64} (R >= 1), with narrow = f16 or bf16 for its collectives

// -----

module attributes {ddp.plan = {buckets = []}} {
  func.func @step(%w: tensor<256x128xf32>) -> tensor<256x128xf32> {
    %r = ddp.allreduce mean %w {ddp.planned = #ddp.compression<"powersgd", {rank = 2 : i64, narrow = i8}>} : tensor<256x128xf32>
    return %r : tensor<256x128xf32>
  }
}
// BAD: error: ddp.planned #ddp.compression<"powersgd", {narrow = i8, rank = 2 : i64}>: a PowerSGD decision

// -----

module attributes {ddp.plan = {buckets = []}} {
  func.func @step(%w: tensor<256x128xf32>) -> tensor<256x128xf32> {
    %r = ddp.allreduce mean %w {ddp.planned = #ddp.compression<"powersgd", {rank = 2 : i32}>} : tensor<256x128xf32>
    return %r : tensor<256x128xf32>
  }
}
// BAD: error: ddp.planned #ddp.compression<"powersgd", {rank = 2 : i32}>: a PowerSGD decision

// -----

module attributes {ddp.plan = {buckets = []}} {
  func.func @step(%v: tensor<512xf32>) -> tensor<512xf32> {
    %r = ddp.allreduce mean %v {ddp.planned = #ddp.compression<"topk", {ratio = 0.25 : f64}>} : tensor<512xf32>
    return %r : tensor<512xf32>
  }
}
// BAD: error: ddp.planned #ddp.compression<"topk", {ratio = 2.500000e-01 : f64}>: a scheme's decision is {options = "..."}, its options as its pass takes them

// -----

module attributes {ddp.plan = {buckets = []}} {
  func.func @step(%v: tensor<512xf32>) -> tensor<512xf32> {
    %r = ddp.allreduce mean %v {ddp.planned = #ddp.compression<"topk", {options = "ratio=3"}>} : tensor<512xf32>
    return %r : tensor<512xf32>
  }
}
// BAD: plan-bad-decisions.mlir:44:10: error: ddp-apply-planned-schemes: 'topk{ratio=3}': ratio=3 must be in (0, 1]
// BAD-NOT: error

// -----

module attributes {ddp.plan = {buckets = []}} {
  func.func @step(%v: tensor<512xf32>) -> tensor<512xf32> {
    %r = ddp.allreduce mean %v {ddp.planned = #ddp.compression<"fp16", {rank = 2 : i64}>} : tensor<512xf32>
    return %r : tensor<512xf32>
  }
}
// BAD: error: ddp.planned #ddp.compression<"fp16", {rank = 2 : i64}>: fp16 takes no options

// -----

// Already f16: the fp16 stage would send it as it is, against the plan.
module attributes {ddp.plan = {buckets = []}} {
  func.func @step(%v: tensor<64xf16>) -> tensor<64xf16> {
    %r = ddp.allreduce mean %v {ddp.planned = #ddp.compression<"fp16">} : tensor<64xf16>
    return %r : tensor<64xf16>
  }
}
// BAD: error: ddp.planned #ddp.compression<"fp16">: no tensor of this bucket is a float wider than 16 bits

// -----

module attributes {ddp.plan = {buckets = []}} {
  %c = arith.constant dense<1.0> : tensor<64x64xf32>
  %r = ddp.allreduce mean %c {ddp.planned = #ddp.compression<"powersgd", {rank = 2 : i64}>} : tensor<64x64xf32>
}
// BAD: error: insert-powersgd: a PowerSGD bucket must be in a function (its step counter is the function's)
