// Each stage of ddp-compress{plan=...} (the passes with `planned`, and
// ddp-apply-planned-schemes) takes only the buckets ddp-plan planned its
// way, with the decision's options, and removes the annotation; every
// other bucket is left to its own stage. The decisions here are written by
// hand.
// RUN: ddp-opt %s -split-input-file --insert-powersgd=planned=true | FileCheck %s --check-prefix=POWERSGD
// RUN: ddp-opt %s -split-input-file --insert-powersgd=planned=true --insert-fp16-compression=planned=true \
// RUN:   | FileCheck %s --check-prefix=FP16
// RUN: ddp-opt %s -split-input-file --insert-powersgd=planned=true --insert-bf16-compression=planned=true \
// RUN:   | FileCheck %s --check-prefix=BF16
// RUN: ddp-opt %s -split-input-file --insert-powersgd=planned=true --ddp-apply-planned-schemes \
// RUN:   --insert-fp16-compression=planned=true --insert-bf16-compression=planned=true --ddp-lower-to-llvm -o /dev/null
// Bucketing keeps each planned bucket the bucket it was planned as.
// What the stages make names each decision in the IR: the compression
// report's decision column is the plan's (powersgd+fp16 for narrow = f16).
// RUN: ddp-opt %s -split-input-file --insert-powersgd=planned=true --ddp-apply-planned-schemes \
// RUN:   --insert-fp16-compression=planned=true --insert-bf16-compression=planned=true --ddp-fuse-kernels \
// RUN:   --ddp-compression-report=output=- -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: ddp-opt %s -split-input-file --ddp-bucketize | FileCheck %s --check-prefix=BUCKETIZE
// Decisions the stages cannot honour are errors at the bucket.
// RUN: not ddp-opt %S/Inputs/plan-bad-decisions.mlir -split-input-file --insert-powersgd=planned=true --ddp-apply-planned-schemes \
// RUN:   --insert-fp16-compression=planned=true 2>&1 \
// RUN:   | FileCheck %S/Inputs/plan-bad-decisions.mlir --check-prefix=BAD

module attributes {ddp.plan = {buckets = []}} {
  func.func @step(%w: tensor<256x128xf32> loc("fc.weight"),
                  %v: tensor<512xf32> loc("fc2.weight"),
                  %b: tensor<128xf32> loc("fc.bias"))
      -> (tensor<256x128xf32>, tensor<512xf32>, tensor<128xf32>) {
    %rw = ddp.allreduce mean %w {ddp.planned = #ddp.compression<"powersgd", {rank = 2 : i64}>} : tensor<256x128xf32>
    %rv = ddp.allreduce mean %v {ddp.planned = #ddp.compression<"fp16">} : tensor<512xf32>
    %rb = ddp.allreduce mean %b role uncompressed : tensor<128xf32>
    return %rw, %rv, %rb : tensor<256x128xf32>, tensor<512xf32>, tensor<128xf32>
  }
}

// REPORT: 0 fc.weight 256x128 f32 powersgd 2 f32 32768 768
// REPORT-NEXT: 1 fc2.weight 512 f32 fp16 - f16 512 512
// REPORT-NEXT: 2 fc.bias 128 f32 uncompressed - f32 128 128
// REPORT: 0 fc.weight 256x128 f32 powersgd+fp16 1 f16 32768 384
// REPORT-NEXT: 1 bucket of 1 [fc2.weight] 512 f32 topk - f32+i32 512 256
// REPORT: 0 fc.weight 256x128 f32 powersgd+bf16 1 bf16 32768 384
// REPORT-NEXT: 1 fc2.weight 512 f32 bf16 - bf16 512 512
// REPORT-NEXT: 2 fc.bias 128 f32 fp16 - f16 128 128

// BUCKETIZE: ddp.allreduce mean %arg0 {ddp.planned = #ddp.compression<"powersgd", {rank = 2 : i64}>} : tensor<256x128xf32>
// BUCKETIZE: ddp.allreduce mean %arg1 {ddp.planned = #ddp.compression<"fp16">} : tensor<512xf32>

// insert-powersgd: the PowerSGD bucket at its decision's rank (not the
// pass's rank=1); the fp16 bucket keeps its annotation for its stage.
// POWERSGD: ddp.state @ddp.q.fc.weight : tensor<128x2xf32>
// POWERSGD-NOT: ddp.planned = #ddp.compression<"powersgd"
// POWERSGD: ddp.allreduce sum %{{.*}} role compressed : tensor<256x2xf32>
// POWERSGD: ddp.allreduce mean %arg1 {ddp.planned = #ddp.compression<"fp16">} : tensor<512xf32>
// POWERSGD: ddp.allreduce mean %arg2 role uncompressed : tensor<128xf32>

// insert-fp16-compression: the bucket planned fp16 only; PowerSGD's
// factors and the plain bucket stay f32 (unplanned, the pass sends every
// allreduce in fp16).
// FP16: ddp.allreduce sum %{{.*}} role compressed : tensor<256x2xf32>
// FP16: ddp.allreduce mean %{{.*}} role compressed : tensor<128x2xf32>
// FP16: ddp.cast %{{.*}} : tensor<512xf32> to tensor<512xf16>
// FP16-NEXT: ddp.allreduce sum %{{.*}} : tensor<512xf16>
// FP16: ddp.allreduce mean %arg2 role uncompressed : tensor<128xf32>
// FP16-NOT: ddp.planned
// FP16: // -----

// -----

// PowerSGD with narrow collectives (the plan's powersgd+fp16), and a
// scheme with its options (the plan's topk{ratio=0.25}).
module attributes {ddp.plan = {buckets = []}} {
  func.func @step(%w: tensor<256x128xf32> loc("fc.weight"),
                  %v: tensor<512xf32> loc("fc2.weight"))
      -> (tensor<256x128xf32>, tensor<512xf32>) {
    %rw = ddp.allreduce mean %w {ddp.planned = #ddp.compression<"powersgd", {narrow = f16, rank = 1 : i64}>} : tensor<256x128xf32>
    %rv = ddp.allreduce mean %v {ddp.planned = #ddp.compression<"topk", {options = "ratio=0.25"}>} : tensor<512xf32>
    return %rw, %rv : tensor<256x128xf32>, tensor<512xf32>
  }
}

// POWERSGD: ddp.state @ddp.q.fc.weight : tensor<128x1xf32>
// POWERSGD: ddp.allreduce sum %{{.*}} role compressed : tensor<256x1xf16>
// POWERSGD: ddp.allreduce sum %{{.*}} role compressed : tensor<128x1xf16>
// POWERSGD: ddp.allreduce mean %arg1 {ddp.planned = #ddp.compression<"topk", {options = "ratio=0.25"}>} : tensor<512xf32>

// -----

// bf16: PowerSGD's factors in bf16 (narrow = bf16), and a bucket planned
// bf16; the bucket planned fp16 is left to its stage.
module attributes {ddp.plan = {buckets = []}} {
  func.func @step(%w: tensor<256x128xf32> loc("fc.weight"),
                  %v: tensor<512xf32> loc("fc2.weight"),
                  %b: tensor<128xf32> loc("fc.bias"))
      -> (tensor<256x128xf32>, tensor<512xf32>, tensor<128xf32>) {
    %rw = ddp.allreduce mean %w {ddp.planned = #ddp.compression<"powersgd", {narrow = bf16, rank = 1 : i64}>} : tensor<256x128xf32>
    %rv = ddp.allreduce mean %v {ddp.planned = #ddp.compression<"bf16">} : tensor<512xf32>
    %rb = ddp.allreduce mean %b {ddp.planned = #ddp.compression<"fp16">} : tensor<128xf32>
    return %rw, %rv, %rb : tensor<256x128xf32>, tensor<512xf32>, tensor<128xf32>
  }
}

// BF16: // -----
// BF16: // -----
// BF16: ddp.allreduce sum %{{.*}} role compressed : tensor<256x1xbf16>
// BF16: ddp.allreduce sum %{{.*}} role compressed : tensor<128x1xbf16>
// BF16: ddp.cast %{{.*}} : tensor<512xf32> to tensor<512xbf16>
// BF16-NEXT: ddp.allreduce sum %{{.*}} : tensor<512xbf16>
// BF16: ddp.allreduce mean %arg2 {ddp.planned = #ddp.compression<"fp16">} : tensor<128xf32>
