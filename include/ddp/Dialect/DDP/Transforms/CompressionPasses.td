//===- CompressionPasses.td - bucketing, compression, plan -*- tablegen -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Included by Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_TRANSFORMS_COMPRESSIONPASSES_TD
#define DDP_DIALECT_DDP_TRANSFORMS_COMPRESSIONPASSES_TD

include "mlir/Pass/PassBase.td"

def DDPBucketize : Pass<"ddp-bucketize", "::mlir::func::FuncOp"> {
  let summary = "Group gradient allreduces into buckets as PyTorch DDP does";
  let description = [{
    Merges single gradient allreduces (role `gradient`, static shapes) of the
    same reduction kind and element type in a block into multi-tensor
    `ddp.allreduce` buckets (other ops between them do not split a bucket;
    the bucket is issued where its last member was). Allreduces written one
    after the other (after the backward pass, as users write them) are first
    put in the order their inputs are defined: the order the gradients
    become ready. An allreduce is not moved past a use of its result.

    `mode=ddp` (the default) is PyTorch DDP's assignment, as its Reducer
    rebuilds the buckets from the order the gradients became ready after the
    first step (`_compute_bucket_assignment_by_size` with
    `[first-bucket-mb, cap-mb]`): gradients ready together (the arguments of
    a gradient-synchronization function) are taken in reverse parameter
    order, DDP's assumption about the backward pass; the first bucket of
    each element type is closed once it reaches `first-bucket-mb` (DDP's
    `_DEFAULT_FIRST_BUCKET_BYTES`, 1 MiB, so that the first gradients are
    sent early), every later one once it reaches `cap-mb` (its last tensor
    may take it over). It is the default so that bucket membership, and
    with it the per-bucket statistics of PyTorch's quantization hooks, is
    PyTorch's. `mode=ddp-param-order` is DDP's assignment in parameter
    order, as DDP keeps it with `find_unused_parameters=True` (it then never
    rebuilds its buckets): gradients ready together keep program order.
    `mode=strict` never lets a bucket exceed its cap (a bucket is closed
    before a tensor would take it over; a larger tensor gets a bucket of its
    own) and keeps program order among gradients ready together.
    `first-bucket-mb` applies in every mode; `first-bucket-mb=0` gives the
    first bucket `cap-mb` too (`mode=strict first-bucket-mb=0` is the rule
    of earlier versions); `cap-mb=0` leaves every allreduce a bucket of its
    own.

    It sees only `ddp.allreduce`: run `convert-shard-to-ddp` first on an
    upstream `shard` module (`ddp-compress` and `insert-powersgd` do). Runs
    on each function on its own.
  }];
  let options = [
    Option<"capMb", "cap-mb", "double", "25.0",
           "Bucket size, in MiB (DDP's bucket_cap_mb; default: 25)">,
    Option<"firstBucketMb", "first-bucket-mb", "double", "1.0",
           "Size of the first bucket, in MiB (DDP's "
           "_DEFAULT_FIRST_BUCKET_BYTES; 0: cap-mb; default: 1)">,
    Option<"mode", "mode", "::mlir::ddp::BucketingMode",
           "::mlir::ddp::BucketingMode::ddp",
           "ddp: PyTorch DDP's assignment; ddp-param-order: DDP's with "
           "find_unused_parameters=True (parameter order); strict: no bucket "
           "over its cap, program order (default: ddp)", [{::llvm::cl::values(
             clEnumValN(::mlir::ddp::BucketingMode::ddp, "ddp",
                        "PyTorch DDP's assignment"),
             clEnumValN(::mlir::ddp::BucketingMode::ddpParamOrder,
                        "ddp-param-order",
                        "DDP's with find_unused_parameters=True (parameter "
                        "order)"),
             clEnumValN(::mlir::ddp::BucketingMode::strict, "strict",
                        "no bucket over its cap, program order"))}]>
  ];
  let statistics = [
    Statistic<"numBuckets", "num-buckets", "Buckets formed">,
    Statistic<"numTensors", "num-tensors", "Tensors bucketed">
  ];
  let dependentDialects = ["::mlir::ddp::DDPDialect"];
}

def DDPTwoLevel : Pass<"ddp-two-level", "::mlir::func::FuncOp"> {
  let summary = "Reduce within each node, then across nodes (a two-level "
                "allreduce)";
  let description = [{
    Every `ddp.allreduce` and `ddp.allreduce_start` over the world becomes
    the same reduction within the node (`group node`: the ranks of one
    machine, through shared memory) followed by the reduction across nodes
    (`group across_nodes`: one copy per machine over the network). A mean
    stays a mean at both levels: the mean of the nodes' means is the job's
    mean when every node runs as many ranks (the runtime refuses a mean
    across nodes of different sizes).

    Run before a compression pass (`ddp-compress` with
    `two-level=node-mean` does), the compression applies to each node's
    exact mean, and only across nodes: `insert-powersgd`,
    `insert-fp16-compression`, `insert-bf16-compression` and `ddp-plan`
    rewrite the `across_nodes` allreduce and leave the mean within the node
    exact; PowerSGD's factors and its error feedback are the node's. Schemes
    that gather (top-k, quantization, hooks) span every rank and refuse an
    `across_nodes` bucket. Run after one (`two-level=collectives`), every
    rank compresses as it would without it, and each collective, PowerSGD's
    factors included, is summed within the node before one copy per node
    crosses the network: the numerics of the flat scheme, with the network
    traffic of one rank per node. The first adds a full-size mean within
    each node, and every rank of a node compresses the same mean; the
    second moves no full-size tensor where a scheme compresses. On one node
    (or one rank per node) the result is the plain allreduce's.

    ```mlir
    %g = ddp.allreduce mean %w : tensor<64x32xf32>
    // becomes
    %n = ddp.allreduce mean %w group node : tensor<64x32xf32>
    %g = ddp.allreduce mean %n group across_nodes : tensor<64x32xf32>
    ```
  }];
  let statistics = [
    Statistic<"numSplit", "num-split", "Allreduces split into two levels">
  ];
  let dependentDialects = ["::mlir::ddp::DDPDialect"];
}

def InsertPowerSGD : Pass<"insert-powersgd", "::mlir::ModuleOp"> {
  let summary = "Rewrite gradient allreduces into PowerSGD low-rank compression";
  let description = [{
    Rewrites every gradient `ddp.allreduce` bucket into PyTorch's
    `powerSGD_hook` sequence, with the same options, defaults and per-tensor
    rule. See docs/ir-design.md for the emitted IR and docs/user-guide.md
    for options.

    The rewrite works on `ddp.allreduce` buckets only. So that the pass
    takes a module as users write it, it first runs, through the pass
    manager, `convert-shard-to-ddp` (upstream `shard.all_reduce` with sum or
    average over the whole grid) and, unless `bucket-cap-mb=0`,
    `ddp-bucketize` on every function.

    With `buckets=REGEX`, it rewrites only the buckets with a gradient whose
    name matches (as the other scheme passes do); the rest stay plain
    allreduces. PowerSGD is a `CompressionScheme` like those passes' schemes
    (`PowerSGDScheme`), applied by the same driver.

    With `planned`, it rewrites only the buckets `ddp-plan` planned as
    PowerSGD (`ddp.planned = #ddp.compression<"powersgd", {rank = 2 :
    i64}>`), each at its decision's rank, their collectives cast to its
    `narrow` type where it has one; `rank` is not used then, and nothing
    is bucketed again. Without it, a module that carries ddp-plan's
    decisions is refused: compressing every bucket would overrule them.
  }];
  let options = [
    Option<"rank", "rank", "unsigned", "1",
           "Matrix approximation rank (PyTorch's name, also accepted: "
           "matrix-approximation-rank; default: 1)">,
    Option<"minCompressionRate", "min-compression-rate", "double", "2.0",
           "Compress a tensor only if (n+m)*r*rate < n*m (default: 2)">,
    Option<"startIter", "start-iter", "int64_t", "1000",
           "Plain averaged allreduce while the step counter is below this "
           "(also: start-powersgd-iter; default: 1000)">,
    Option<"errorFeedback", "error-feedback", "bool", "true",
           "Carry each compressed tensor's compression error to the next step "
           "(also: use-error-feedback; default: true)">,
    Option<"warmStart", "warm-start", "bool", "true",
           "Reuse last step's Q instead of a fresh random one (default: true)">,
    Option<"orthogonalizationEpsilon", "orthogonalization-epsilon", "double",
           "0.0", "Added to column norms in Gram-Schmidt (default: 0)">,
    Option<"seed", "seed", "int64_t", "0",
           "Seed of the random initial Q (identical on every rank; also: "
           "random-seed; default: 0)">,
    Option<"batchSameShape", "batch-same-shape", "bool", "false",
           "Order tensors of the same shape next to each other in every "
           "multi-tensor op so the runtime can run them as one batched matmul; "
           "numerics do not change (also: batch-tensors-with-same-shape; "
           "default: false)">,
    Option<"mode", "mode", "::mlir::ddp::PowerSGDMode",
           "::mlir::ddp::PowerSGDMode::layerwise",
           "How a bucket is compressed (default: layerwise)", [{::llvm::cl::values(
             clEnumValN(::mlir::ddp::PowerSGDMode::layerwise, "layerwise",
                        "each tensor as its own matrix (powerSGD_hook)"),
             clEnumValN(::mlir::ddp::PowerSGDMode::batched, "batched",
                        "the whole bucket as one square matrix "
                        "(batched_powerSGD_hook)"))}]>,
    Option<"bucketCapMb", "bucket-cap-mb", "double", "25.0",
           "Bucket single allreduces first, as ddp-bucketize does; 0 keeps "
           "each allreduce a bucket of its own (default: 25)">,
    Option<"planned", "planned", "bool", "false",
           "Only the buckets ddp-plan planned as PowerSGD, each at its "
           "decision's rank (what ddp-compress{plan=...} runs; default: "
           "false)">,
    Option<"buckets", "buckets", "std::string", "\"\"",
           "Only buckets with a gradient whose name matches this regular "
           "expression (default: every bucket)">
  ];
  let statistics = [
    Statistic<"numCompressed", "num-compressed", "Tensors compressed">,
    Statistic<"numUncompressed", "num-uncompressed",
              "Tensors left to the uncompressed allreduce">,
    Statistic<"numSkipped", "num-skipped",
              "Tensors PowerSGD cannot handle (dynamic, non-float, 0-d)">,
    Statistic<"numelBefore", "numel-before", "Elements before compression">,
    Statistic<"numelAfter", "numel-after", "Elements after compression">
  ];
  let dependentDialects = [
    "::mlir::ddp::DDPDialect", "::mlir::arith::ArithDialect",
    "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect"
  ];
}

def InsertFP16Compression : Pass<"insert-fp16-compression", "::mlir::func::FuncOp"> {
  let summary = "Communicate float allreduces in fp16 (fp16_compress_hook)";
  let description = [{
    Divides by the world size, casts to f16, allreduces in f16 and casts
    back. Runs on every f32/f64 allreduce, including those PowerSGD emits, so
    `--insert-powersgd --insert-fp16-compression` sends P and Q as f16.
    Whole-grid `shard.all_reduce`s are converted first (with
    convert-shard-to-ddp's patterns; their grids stay until the lowering).
    Runs on each function on its own. With `planned`, it sends only the
    buckets `ddp-plan` planned as fp16 (`#ddp.compression<"fp16">`);
    without it, a function with ddp-plan's decisions is refused.
  }];
  let options = [
    Option<"planned", "planned", "bool", "false",
           "Only the buckets ddp-plan planned as fp16 (what "
           "ddp-compress{plan=...} runs; default: false)">
  ];
  let statistics = [
    Statistic<"numCompressed", "num-compressed", "Tensors sent as f16">
  ];
  let dependentDialects = ["::mlir::ddp::DDPDialect"];
}

def InsertBF16Compression : Pass<"insert-bf16-compression", "::mlir::func::FuncOp"> {
  let summary = "Communicate float allreduces in bf16 (bf16_compress_hook)";
  let description = [{
    Like insert-fp16-compression, with bf16 (with `planned`: the buckets
    planned as bf16).
  }];
  let options = [
    Option<"planned", "planned", "bool", "false",
           "Only the buckets ddp-plan planned as bf16 (what "
           "ddp-compress{plan=...} runs; default: false)">
  ];
  let statistics = [
    Statistic<"numCompressed", "num-compressed", "Tensors sent as bf16">
  ];
  let dependentDialects = ["::mlir::ddp::DDPDialect"];
}

def DDPPlan : Pass<"ddp-plan", "::mlir::ModuleOp"> {
  let summary = "Choose per bucket how it is sent (plain, fp16, bf16, "
                "PowerSGD at a rank, a scheme) from a machine profile";
  let description = [{
    For every gradient bucket (after `convert-shard-to-ddp` and, unless
    `bucket-cap-mb=0`, `ddp-bucketize`) predicts the time its exchange
    takes under each allowed choice, from a machine profile written by
    `ddprt-calibrate` (measured here, or `--hand` for a cluster you are not
    on), and annotates the bucket with the fastest. It rewrites nothing
    itself: a bucket to send plain gets the role `uncompressed`; any other
    gets the discardable attribute `ddp.planned`, a `#ddp.compression`
    naming the choice, which the stage that compresses that way honours:

    | choice | `ddp.planned` | stage |
    |---|---|---|
    | fp16, bf16 | `<"fp16">`, `<"bf16">` | insert-fp16/bf16-compression{planned} |
    | powersgd at rank R | `<"powersgd", {rank = R : i64}>` | insert-powersgd{planned} |
    | powersgd+fp16 | `<"powersgd", {narrow = f16, rank = R : i64}>` | insert-powersgd{planned} |
    | a scheme with a cost model | `<"topk", {options = "ratio=0.001"}>` | ddp-apply-planned-schemes |

    Each stage takes only the buckets planned its way.
    `ddp-compress{plan=...}` runs all of them; the fixed passes (without
    `planned`) refuse a module with decisions, and the lowering refuses a
    bucket whose decision no stage took.

    Schemes are given by name with their pass's options (`topk`,
    `topk{ratio=0.001}`; `quantize`, `quantize{granularity=per-channel}`; a
    plugin's scheme once the plugin registers it). What it predicted and
    why it chose is kept in the module attribute `ddp.plan`, which
    `ddp-compression-report` prints as a table. The model (collective
    latency and bandwidth, kernel times scaled by work; the exchange alone,
    without overlap with the backward pass) is in docs/cost-model.md.

    What the user allows: `choices` (a subset of plain, fp16, bf16,
    powersgd, powersgd+fp16, plus any scheme with a cost model; each is a
    registered family of choices or a registered scheme, looked up by
    name, with its options, if it has any, in braces: `powersgd{rank=8}`
    is that rank alone), PowerSGD `ranks` and a floor `min-rank` (for
    `powersgd{rank=R}` too), `never` (a regular expression:
    gradients whose names match are split off and sent plain). A choice
    within `tolerance` of plain is not taken (compression that does not pay
    clearly is not worth its error).
  }];
  let options = [
    Option<"profile", "profile", "std::string", "\"\"",
           "The machine profile (ddprt-calibrate's JSON); required">,
    Option<"kernels", "kernels", "std::string", "\"\"",
           "A profile to take kernel times from (for a --hand profile: "
           "ddprt-calibrate --kernels-only on the machine that computes; "
           "default: the profile's own)">,
    Option<"world", "world", "int64_t", "0",
           "Ranks to plan for (default: the profile's world_size)">,
    ListOption<"choices", "choices", "std::string",
               "What a bucket may become: plain, fp16, bf16, powersgd, "
               "powersgd+fp16 (default: these five; powersgd{rank=8}: one "
               "rank), and schemes with a cost model by name and options: "
               "topk, topk{ratio=0.001}, quantize, "
               "quantize{granularity=per-channel}">,
    ListOption<"ranks", "ranks", "unsigned",
               "PowerSGD ranks to consider (default: 1,2,4)">,
    Option<"minRank", "min-rank", "unsigned", "1",
           "No PowerSGD below this rank (default: 1)">,
    Option<"never", "never", "std::string", "\"\"",
           "Gradients whose names match this regular expression are sent "
           "plain (default: none)">,
    Option<"tolerance", "tolerance", "double", "0.05",
           "Compress only if predicted faster than plain by this fraction "
           "(default: 0.05)">,
    Option<"minCompressionRate", "min-compression-rate", "double", "2.0",
           "PowerSGD's per-tensor rule, as insert-powersgd's: give both the "
           "same (default: 2)">,
    Option<"bucketCapMb", "bucket-cap-mb", "double", "25.0",
           "Bucket single allreduces first, as ddp-bucketize; 0 keeps each "
           "allreduce a bucket (default: 25)">
  ];
  let statistics = [
    Statistic<"numPlain", "num-plain", "Buckets sent plain">,
    Statistic<"numOther", "num-other",
              "Buckets sent another way (fp16, bf16, PowerSGD, a scheme)">
  ];
  let dependentDialects = [
    "::mlir::ddp::DDPDialect", "::mlir::arith::ArithDialect",
    "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect"
  ];
}

def DDPApplyPlannedSchemes
    : Pass<"ddp-apply-planned-schemes", "::mlir::ModuleOp"> {
  let summary = "Compress the buckets ddp-plan chose a registered scheme for";
  let description = [{
    The stage of `ddp-compress{plan=...}` for the schemes with a cost model:
    every bucket whose `ddp.planned` names a scheme registered for
    `ddp-plan` (`#ddp.compression<"topk", {options = "ratio=0.001"}>`) is
    compressed by that scheme, made from those options as its own pass
    makes it (`--insert-topk="ratio=0.001"`), as that pass would compress
    it. Buckets planned as PowerSGD, fp16 or bf16 are left to their stages.
  }];
  let statistics = [
    Statistic<"numCompressed", "num-compressed",
              "Buckets compressed by a planned scheme">
  ];
  let dependentDialects = [
    "::mlir::ddp::DDPDialect", "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect"
  ];
}

def DDPApplyHook : Pass<"ddp-apply-hook", "::mlir::ModuleOp"> {
  let summary = "Reduce each gradient bucket with a hook function written in the module";
  let description = [{
    PyTorch's `register_comm_hook`, as a rewrite. The hook is a function of
    the module that takes a flat bucket and returns its average over the
    ranks, written with ddp ops (allreduce, allgather, world_size, cast,
    state) and upstream ops (arith, math, linalg, tensor, scf):

    ```mlir
    func.func private @my_hook(%bucket: tensor<?xf32>) -> tensor<?xf32>
    ```

    Every gradient `ddp.allreduce` (after `ddp-bucketize`: every bucket)
    whose gradients' names match `buckets` becomes: `ddp.flatten`, the
    hook's body inlined and given the bucket's static size, `ddp.unflatten`.
    A `sum` allreduce gets the hook's average times the world size. Every
    `ddp.state` the hook uses is per bucket: the pass declares
    `<state>.<function>.<bucket>` with the template's dynamic dimensions
    set to the bucket's element count. A hook whose element type differs
    from the bucket's gets the bucket cast to its type and its result cast
    back, as PyTorch's `bf16_compress_wrapper` does. The hook's collectives
    get the role `compressed`; the hook function and its state templates
    are removed from the module.
  }];
  let options = [
    Option<"hook", "hook", "std::string", "\"\"",
           "The hook function's name (required)">,
    Option<"from", "from", "std::string", "\"\"",
           "Take the hook (and the states it uses) from this .mlir file "
           "instead of the module (default: the module)">,
    Option<"buckets", "buckets", "std::string", "\"\"",
           "Only buckets with a gradient whose name matches this regular "
           "expression (default: every bucket)">
  ];
  let statistics = [
    Statistic<"numBuckets", "num-buckets", "Buckets the hook reduces">
  ];
  let dependentDialects = [
    "::mlir::ddp::DDPDialect", "::mlir::tensor::TensorDialect",
    "::mlir::arith::ArithDialect", "::mlir::cf::ControlFlowDialect"
  ];
}

def InsertQuantization : Pass<"insert-quantization", "::mlir::ModuleOp"> {
  let summary = "Send gradient buckets as uint8 (PyTorch's quantization hooks)";
  let description = [{
    PyTorch 1.13's `quantization_pertensor_hook` and
    `quantization_perchannel_hook`, with their defaults: each rank finds its
    bucket's min-max range (per tensor, or per channel of `channel-size`
    elements after zero padding), quantizes to uint8 with that scale and
    zero point, the ranks allgather scales, zero points and payloads, and
    each rank dequantizes every rank's payload, adds them up in rank order
    and divides by the world size. The float32 operations are PyTorch's, in
    its order: results match its hooks bit for bit.

    `exchange=fused` (the default) gathers scales and payload in one
    collective; `exchange=pytorch` gathers the scales first and the payload
    second, as PyTorch does (two latencies instead of one; same values).
    Float32 buckets only; others stay plain allreduces with a remark.
  }];
  let options = [
    Option<"granularity", "granularity",
           "::mlir::ddp::QuantizationGranularity",
           "::mlir::ddp::QuantizationGranularity::perTensor",
           "per-tensor (quantization_pertensor_hook) or per-channel "
           "(quantization_perchannel_hook) (default: per-tensor)", [{::llvm::cl::values(
             clEnumValN(::mlir::ddp::QuantizationGranularity::perTensor,
                        "per-tensor", "the bucket (quantization_pertensor_hook)"),
             clEnumValN(::mlir::ddp::QuantizationGranularity::perChannel,
                        "per-channel",
                        "each channel of channel-size elements "
                        "(quantization_perchannel_hook)"))}]>,
    Option<"channelSize", "channel-size", "int64_t", "512",
           "Elements per channel for per-channel (bucket_size; default: 512)">,
    Option<"exchange", "exchange", "::mlir::ddp::QuantizationExchange",
           "::mlir::ddp::QuantizationExchange::fused",
           "fused: scales and payload in one allgather; pytorch: two "
           "allgathers, as PyTorch (default: fused)", [{::llvm::cl::values(
             clEnumValN(::mlir::ddp::QuantizationExchange::fused, "fused",
                        "scales and payload in one allgather"),
             clEnumValN(::mlir::ddp::QuantizationExchange::pytorch, "pytorch",
                        "two allgathers, as PyTorch"))}]>,
    Option<"buckets", "buckets", "std::string", "\"\"",
           "Only buckets with a gradient whose name matches this regular "
           "expression (default: every bucket)">
  ];
  let statistics = [
    Statistic<"numBuckets", "num-buckets", "Buckets quantized">
  ];
  let dependentDialects = [
    "::mlir::ddp::DDPDialect", "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def InsertTopK : Pass<"insert-topk", "::mlir::ModuleOp"> {
  let summary = "Send each bucket's largest elements only (top-k sparsification with error feedback)";
  let description = [{
    Top-k sparsification (Aji & Heafield 2017; GRACE's `TopKCompressor`
    with residual memory). Each rank adds its error-feedback residual to its
    flat bucket, selects the `k = max(1, floor(N * ratio))` elements largest
    in magnitude (`ddp.top_k`: largest first, ties in index order), keeps
    what it did not send as the next step's residual, and the ranks
    allgather values and indices in one collective. Every rank then adds
    the selected values into a zero bucket in rank order and divides by the
    world size. Indices travel as `i32` where the bucket fits (half the
    bytes of int64), so a rank sends `k` values and `k` indices instead of
    `N` values: about `1 / (2 ratio)` fewer elements for f32.

    `error-feedback=false` drops what is not selected. Buckets of any float
    type are taken; the residual is saved with checkpoints.
  }];
  let options = [
    Option<"ratio", "ratio", "double", "0.01",
           "Fraction of each bucket's elements each rank sends, in (0, 1] "
           "(default: 0.01)">,
    Option<"errorFeedback", "error-feedback", "bool", "true",
           "Keep what was not sent and add it to the next step's bucket "
           "(default: true)">,
    Option<"buckets", "buckets", "std::string", "\"\"",
           "Only buckets with a gradient whose name matches this regular "
           "expression (default: every bucket)">
  ];
  let statistics = [
    Statistic<"numBuckets", "num-buckets", "Buckets sparsified">
  ];
  let dependentDialects = [
    "::mlir::ddp::DDPDialect", "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def InsertNoop : Pass<"insert-noop", "::mlir::ModuleOp"> {
  let summary = "Do not communicate gradients at all (PyTorch's noop_hook)";
  let description = [{
    Every rank keeps its own gradients: the allreduces go. For measuring
    the headroom of communication (a step without it), never for training.
    As with every bucket scheme, the rank's own bucket stands for the
    average over the ranks: a `mean` allreduce gives each rank its own
    gradient (PyTorch's noop_hook), a `sum` allreduce its own gradient
    times the world size (`ddp.scale ... by world_size`), the sum if every
    rank had the same.
  }];
  let options = [
    Option<"buckets", "buckets", "std::string", "\"\"",
           "Only buckets with a gradient whose name matches this regular "
           "expression (default: every bucket)">
  ];
  let statistics = [
    Statistic<"numBuckets", "num-buckets", "Buckets no longer communicated">
  ];
  let dependentDialects = ["::mlir::ddp::DDPDialect"];
}

def DDPExpandBuckets : Pass<"ddp-expand-buckets", "::mlir::func::FuncOp"> {
  let summary = "Expand ddp.flatten and ddp.unflatten into tensor ops";
  let description = [{
    Before bufferization (in ddp-lower-to-llvm): `ddp.flatten` becomes
    `tensor.collapse_shape` of each gradient and one `tensor.concat`,
    `ddp.unflatten` a `tensor.extract_slice` and `tensor.expand_shape` per
    result. An unflatten of a flatten of the same tensors folds away first.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def DDPFuseKernels : Pass<"ddp-fuse-kernels", "::mlir::func::FuncOp"> {
  let summary = "Merge fine-grained ddp steps into the runtime's fused kernels";
  let description = [{
    Rewrites add_residual feeding project/backproject into
    project_residual/backproject_residual; reconstruct + update_residual into
    reconstruct_residual; scale next to cast into a scaled cast. Then merges
    ops of the same kind and configuration in a block into one multi-tensor
    op, when no use of an earlier op's result lies before the last one.
    Runs on each function on its own.
  }];
  let statistics = [
    Statistic<"numFused", "num-fused", "Producer/consumer pairs fused">,
    Statistic<"numMerged", "num-merged", "Ops merged into multi-tensor ops">
  ];
  let dependentDialects = ["::mlir::ddp::DDPDialect"];
}

def DDPScheduleOverlap : Pass<"ddp-schedule-overlap", "::mlir::func::FuncOp"> {
  let summary = "Overlap gradient communication with the backward pass: "
                "start each bucket as soon as its gradients exist, wait "
                "right before its result is used";
  let description = [{
    Turns every `ddp.allreduce` into `ddp.allreduce_start` + `ddp.wait` and
    reorders each block of the function so that communication overlaps the
    computation around it, as PyTorch DDP's buckets do:

    * The computation (every op that is not communication or compression:
      the forward and backward passes, the optimizer) keeps its order.
    * A collective starts as early as its inputs allow: a bucket right
      after the last of its gradients is computed, together with the
      compression steps that feed it (PowerSGD's projection, fp16 casts).
      Collectives are issued in the order their gradients become ready (then
      in program order): a deterministic function of the IR, so every rank
      issues them in the same order.
    * A wait moves down to right before the first op that needs its result
      (the optimizer update). A wait whose result feeds a later collective
      (PowerSGD's P, before Q is computed and sent) moves down to the point
      where the next bucket is ready to start, so that P travels while the
      backward pass goes on; collectives keep their order.
    * Ops with side effects keep their order relative to each other where
      they touch the same state (per `ddp.state` symbol); an op whose
      effects are unknown (a call, an unregistered op) is a barrier that no
      collective and no effect crosses (a wait may: a request in flight
      belongs to its collective), and each collective it holds back gets a
      remark naming it. An op with regions that contains collectives
      (a loop, PowerSGD's warm-up branch) is scheduled as one unit, with a
      remark: nothing outside it overlaps the collectives inside; each of
      its blocks is scheduled on its own.

    With `unswitch` (the default), a single-block function whose top-level
    `scf.if` ops around collectives all test the same condition (PowerSGD's
    warm-up, `step < start-iter`, one branch per bucket; or a user's) is
    versioned on it: the body after the condition becomes one `scf.if`
    whose branches are the two straight-line versions (for PowerSGD, the
    warm-up and the compressed step), each scheduled, instead of branches
    that would each run as a unit. A function is left as it is, with a
    remark, when a collective started before the branches is waited for
    after them. The body is duplicated
    (the statistic num-unswitched counts the functions).

    Values and their computation are unchanged: a scheduled step gives
    bitwise the results of the unscheduled one.
  }];
  let options = [
    Option<"unswitch", "unswitch", "bool", "true",
           "Version the function on PowerSGD's warm-up condition so that "
           "both versions overlap (default: true)">
  ];
  let statistics = [
    Statistic<"numStarted", "num-started", "Blocking allreduces split into start and wait">,
    Statistic<"numUnswitched", "num-unswitched", "Functions versioned on the warm-up condition">
  ];
  let dependentDialects = ["::mlir::ddp::DDPDialect", "::mlir::scf::SCFDialect"];
}

#endif // DDP_DIALECT_DDP_TRANSFORMS_COMPRESSIONPASSES_TD
