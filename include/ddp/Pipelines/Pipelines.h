//===- Pipelines.h - ddp compression pipelines ------------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDP_PIPELINES_PIPELINES_H
#define DDP_PIPELINES_PIPELINES_H

#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::ddp {

/// The type float allreduces travel in.
enum class NarrowType { none, fp16, bf16 };

/// Where a two-level allreduce (ddp-two-level) goes, if anywhere: before
/// compression (each node's exact mean, compressed across nodes only), or
/// after it (every rank compresses; each collective, the compressed ones
/// too, reduces within the node, then across nodes).
enum class TwoLevelMode { none, nodeMean, collectives };

/// PyTorch's quantization hooks, or none.
enum class QuantizeMode { none, perTensor, perChannel };

/// Options of the `ddp-compress` pipeline. PowerSGD options keep the names
/// and defaults of insert-powersgd, and take PyTorch's names too
/// (powerSGDOptionAliases).
struct CompressionPipelineOptions
    : public PassPipelineOptions<CompressionPipelineOptions> {
  PassOptions::Option<unsigned> powersgdRank{
      *this, "powersgd-rank",
      llvm::cl::desc("PowerSGD rank; 0 leaves PowerSGD out (also: rank, "
                     "matrix-approximation-rank; default: 0)"),
      llvm::cl::init(0)};
  PassOptions::Option<double> minCompressionRate{
      *this, "min-compression-rate",
      llvm::cl::desc(
          "Compress a tensor only if (n+m)*r*rate < n*m (default: 2)"),
      llvm::cl::init(2.0)};
  PassOptions::Option<int64_t> startIter{
      *this, "start-iter",
      llvm::cl::desc(
          "Plain averaged allreduce before this step (also: "
          "start-powersgd-iter; default: 1000)"),
      llvm::cl::init(1000)};
  PassOptions::Option<bool> errorFeedback{
      *this, "error-feedback",
      llvm::cl::desc("PowerSGD error feedback (also: use-error-feedback; "
                     "default: true)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> warmStart{
      *this, "warm-start",
      llvm::cl::desc("Reuse last step's Q (default: true)"),
      llvm::cl::init(true)};
  PassOptions::Option<double> orthogonalizationEpsilon{
      *this, "orthogonalization-epsilon",
      llvm::cl::desc("Added to column norms in Gram-Schmidt (default: 0)"),
      llvm::cl::init(0.0)};
  PassOptions::Option<int64_t> seed{
      *this, "seed",
      llvm::cl::desc("Seed of the random initial Q (also: random-seed; "
                     "default: 0)"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> batchSameShape{
      *this, "batch-same-shape",
      llvm::cl::desc(
          "Order same-shape tensors next to each other (also: "
          "batch-tensors-with-same-shape; default: false)"),
      llvm::cl::init(false)};
  PassOptions::Option<PowerSGDMode> mode{
      *this, "mode",
      llvm::cl::desc("How PowerSGD compresses a bucket (default: layerwise)"),
      llvm::cl::init(PowerSGDMode::layerwise),
      llvm::cl::values(clEnumValN(PowerSGDMode::layerwise, "layerwise",
                                  "each tensor as its own matrix"),
                       clEnumValN(PowerSGDMode::batched, "batched",
                                  "the whole bucket as one square matrix"))};
  PassOptions::Option<std::string> powersgdBuckets{
      *this, "powersgd-buckets",
      llvm::cl::desc("PowerSGD only on the buckets with a gradient whose "
                     "name matches this regular expression; the others are "
                     "left to hook=, quantize= and narrow= (default: every "
                     "bucket)"),
      llvm::cl::init("")};
  PassOptions::Option<NarrowType> narrow{
      *this, "narrow",
      llvm::cl::desc("Type float allreduces travel in (default: none)"),
      llvm::cl::init(NarrowType::none),
      llvm::cl::values(
          clEnumValN(NarrowType::none, "none", "as they are"),
          clEnumValN(NarrowType::fp16, "fp16", "fp16_compress_hook"),
          clEnumValN(NarrowType::bf16, "bf16", "bf16_compress_hook"))};
  PassOptions::Option<QuantizeMode> quantize{
      *this, "quantize",
      llvm::cl::desc("PyTorch's quantization hooks on every bucket left "
                     "(insert-quantization; default: none)"),
      llvm::cl::init(QuantizeMode::none),
      llvm::cl::values(
          clEnumValN(QuantizeMode::none, "none", "no quantization"),
          clEnumValN(QuantizeMode::perTensor, "per-tensor",
                     "quantization_pertensor_hook"),
          clEnumValN(QuantizeMode::perChannel, "per-channel",
                     "quantization_perchannel_hook"))};
  PassOptions::Option<std::string> quantizeBuckets{
      *this, "quantize-buckets",
      llvm::cl::desc("Quantization only on the buckets with a gradient "
                     "whose name matches this regular expression (default: "
                     "every bucket left)"),
      llvm::cl::init("")};
  PassOptions::Option<int64_t> channelSize{
      *this, "channel-size",
      llvm::cl::desc("Elements per channel for quantize=per-channel "
                     "(default: 512)"),
      llvm::cl::init(512)};
  PassOptions::Option<std::string> hook{
      *this, "hook",
      llvm::cl::desc("A hook function to apply to every bucket left "
                     "(ddp-apply-hook; default: none)"),
      llvm::cl::init("")};
  PassOptions::Option<std::string> hookFrom{
      *this, "hook-from",
      llvm::cl::desc("The .mlir file the hook is in (default: the module)"),
      llvm::cl::init("")};
  PassOptions::Option<std::string> hookBuckets{
      *this, "hook-buckets",
      llvm::cl::desc("The hook only on the buckets with a gradient whose "
                     "name matches this regular expression; the others are "
                     "left to quantize= and narrow= (default: every bucket "
                     "left)"),
      llvm::cl::init("")};
  PassOptions::Option<std::string> plan{
      *this, "plan",
      llvm::cl::desc("A machine profile (ddprt-calibrate's JSON): ddp-plan "
                     "chooses per bucket among plan-choices instead of one "
                     "fixed scheme (default: none)"),
      llvm::cl::init("")};
  PassOptions::Option<std::string> planKernels{
      *this, "plan-kernels",
      llvm::cl::desc("ddp-plan's kernels= (default: the profile's own)"),
      llvm::cl::init("")};
  PassOptions::ListOption<std::string> planChoices{
      *this, "plan-choices",
      llvm::cl::desc("ddp-plan's choices= (default: plain,fp16,bf16,powersgd,"
                     "powersgd+fp16)")};
  PassOptions::ListOption<unsigned> planRanks{
      *this, "plan-ranks",
      llvm::cl::desc("ddp-plan's ranks= (default: 1,2,4)")};
  PassOptions::Option<unsigned> planMinRank{
      *this, "plan-min-rank",
      llvm::cl::desc("ddp-plan's min-rank= (default: 1)"), llvm::cl::init(1)};
  PassOptions::Option<std::string> planNever{
      *this, "plan-never", llvm::cl::desc("ddp-plan's never= (default: none)"),
      llvm::cl::init("")};
  PassOptions::Option<int64_t> planWorld{
      *this, "plan-world",
      llvm::cl::desc("ddp-plan's world= (default: the profile's)"),
      llvm::cl::init(0)};
  PassOptions::Option<double> planTolerance{
      *this, "plan-tolerance",
      llvm::cl::desc("ddp-plan's tolerance= (default: 0.05)"),
      llvm::cl::init(0.05)};
  PassOptions::Option<double> bucketCapMb{
      *this, "bucket-cap-mb",
      llvm::cl::desc("Bucket size cap in MiB (default: 25)"),
      llvm::cl::init(25.0)};
  PassOptions::Option<TwoLevelMode> twoLevel{
      *this, "two-level",
      llvm::cl::desc("Reduce within each node, then across nodes "
                     "(ddp-two-level; default: none)"),
      llvm::cl::init(TwoLevelMode::none),
      llvm::cl::values(
          clEnumValN(TwoLevelMode::none, "none",
                     "every collective over all "
                     "ranks"),
          clEnumValN(TwoLevelMode::nodeMean, "node-mean",
                     "each node's exact mean first; compression only across "
                     "nodes, on the node's mean"),
          clEnumValN(TwoLevelMode::collectives, "collectives",
                     "every rank compresses, as without it; each collective "
                     "then reduces within the node and across nodes"))};
  PassOptions::Option<bool> fuse{
      *this, "fuse",
      llvm::cl::desc("Fuse into the runtime's kernels (default: true)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> overlap{
      *this, "overlap",
      llvm::cl::desc("Schedule communication to overlap the backward pass "
                     "(ddp-schedule-overlap; default: true)"),
      llvm::cl::init(true)};
};

/// bucketize -> ddp-two-level (if two-level=node-mean) -> insert-powersgd (if
/// powersgd-rank > 0), ddp-apply-hook (if hook) or insert-quantization (if
/// quantize): at most one of the three -> fp16/bf16 (if narrow) ->
/// ddp-two-level (if two-level=collectives) -> ddp-fuse-kernels (if fuse) ->
/// ddp-schedule-overlap (if overlap).
void buildCompressionPipeline(OpPassManager &pm,
                              const CompressionPipelineOptions &options);

/// How ddp-lower-to-llvm lowers f32 contractions.
enum class ContractionLowering { blas, loops };
/// In what order the step's own reductions add their terms.
enum class SumOrder { vectorized, source };

/// Where a step's own code (its loops: hooks, quantization, a model's
/// forward and backward) runs.
enum class LoweringTarget { cpu, cuda };

/// What ddp-lower-to-llvm does beyond the fixed stages.
struct LoweringOptions {
  /// cpu: the step's loops on the host (OpenMP); cuda: as GPU kernels
  /// (PTX for `gpuChip`) that the runtime launches on its compute stream.
  LoweringTarget target = LoweringTarget::cpu;
  /// target=cuda: the GPU architecture the kernels are compiled for.
  std::string gpuChip = "sm_90";
  /// target=cuda: libdevice (CUDA's math functions, which the kernels'
  /// math ops call); "" finds it under /usr/local/cuda or CUDA_HOME.
  std::string libdevice;
  /// ddp-split-reductions: minimums and maximums over long loops in
  /// parallel chunks (always with target=cuda).
  bool splitReductions = false;
  /// ddp-insert-runtime-checks: indices, slices, shapes and integer
  /// division checked when the step runs.
  bool runtimeChecks = true;
  /// ddp-matmuls-to-runtime (blas) or loops.
  ContractionLowering contractions = ContractionLowering::blas;
  /// ddp-reassociate-sums (vectorized) or sums in source order.
  SumOrder sumOrder = SumOrder::vectorized;
  /// ddp-parallelize-loops and convert-scf-to-openmp: large loop nests on
  /// several threads (OpenMP).
  bool parallelLoops = true;
  /// bufferize-entry-signatures, split-functions, split-deallocations and
  /// merge-ifs: what keeps the lowering linear in a step's size where
  /// upstream's passes are not. Without them the lowering is upstream's
  /// alone, the same program, slower on large steps.
  bool scaleWorkarounds = true;
};

/// Options of ddp-lower-to-llvm.
struct LoweringPipelineOptions
    : public PassPipelineOptions<LoweringPipelineOptions> {
  PassOptions::Option<bool> runtimeChecks{
      *this, "runtime-checks",
      llvm::cl::desc("Check indices, slices, shapes and integer division at "
                     "run time (ddp-insert-runtime-checks): a step that "
                     "breaks one fails with the op's location instead of "
                     "crashing or reading garbage"),
      llvm::cl::init(true)};
  PassOptions::Option<ContractionLowering> contractions{
      *this, "contractions",
      llvm::cl::desc("How f32 matmuls and other contractions run"),
      llvm::cl::values(
          clEnumValN(ContractionLowering::blas, "blas",
                     "calls of the runtime's BLAS (ddp-matmuls-to-runtime; "
                     "OpenBLAS on CPUs, cuBLAS on GPUs), the default"),
          clEnumValN(ContractionLowering::loops, "loops",
                     "generated loops, sums over K in source order")),
      llvm::cl::init(ContractionLowering::blas)};
  PassOptions::Option<SumOrder> sumOrder{
      *this, "sum-order",
      llvm::cl::desc("The order in which the step's own reductions add"),
      llvm::cl::values(
          clEnumValN(SumOrder::vectorized, "vectorized",
                     "innermost sums and products reassociated into vector "
                     "lanes (ddp-reassociate-sums), the default"),
          clEnumValN(SumOrder::source, "source",
                     "every sum in the order its loops run")),
      llvm::cl::init(SumOrder::vectorized)};
  PassOptions::Option<bool> parallelLoops{
      *this, "parallel-loops",
      llvm::cl::desc("Run the step's large loop nests on several threads "
                     "(ddp-parallelize-loops, then OpenMP; the host sets "
                     "how many)"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> scaleWorkarounds{
      *this, "scale-workarounds",
      llvm::cl::desc("Keep the lowering linear in a step's size where "
                     "upstream's passes are not (bufferize-entry-signatures, "
                     "split-functions, split-deallocations, merge-ifs); "
                     "without, the same program from upstream's passes "
                     "alone, slower on large steps"),
      llvm::cl::init(true)};

  PassOptions::Option<LoweringTarget> target{
      *this, "target", llvm::cl::desc("Where the step's own loops run"),
      llvm::cl::values(
          clEnumValN(LoweringTarget::cpu, "cpu",
                     "on the host, large ones on several threads, the "
                     "default"),
          clEnumValN(LoweringTarget::cuda, "cuda",
                     "as GPU kernels (PTX embedded in the step) that the "
                     "runtime launches on its compute stream: for the CUDA "
                     "backend")),
      llvm::cl::init(LoweringTarget::cpu)};
  PassOptions::Option<std::string> gpuChip{
      *this, "gpu-chip",
      llvm::cl::desc("target=cuda: the GPU architecture of the kernels"),
      llvm::cl::init("sm_90")};
  PassOptions::Option<bool> splitReductions{
      *this, "split-reductions",
      llvm::cl::desc("Reduce minimums and maximums over long loops in "
                     "parallel chunks (ddp-split-reductions; the same "
                     "bits); always with target=cuda"),
      llvm::cl::init(false)};
  PassOptions::Option<std::string> libdevice{
      *this, "libdevice",
      llvm::cl::desc("target=cuda: CUDA's libdevice.10.bc, which kernels "
                     "with math functions link (default: found under "
                     "$CUDA_HOME or /usr/local/cuda)"),
      llvm::cl::init("")};

  /// The options as buildLoweringPipeline takes them.
  LoweringOptions get() const;
};

/// From a tensor-level module (after the insertion passes, or an upstream
/// shard module as written) to the LLVM dialect:
/// convert-shard-to-ddp{complete=true}, ddp-fuse-kernels, ddp-expand-buckets,
/// ddp-branch-tensor-selects, element-wise ops to linalg,
/// ddp-fuse-elementwise, ddp-tile-and-fuse, ddp-insert-runtime-checks (if
/// runtime-checks), ddp-check-lowerable (every tensor op has a bufferization
/// model in the context: mlir::ddp::registerAllDialects),
/// bufferize-entry-signatures and One-Shot Bufferize (function boundaries with
/// identity layouts), split-functions, buffer deallocation,
/// ddp-matmuls-to-runtime (if contractions=blas), ddp-reassociate-sums (if
/// sum-order=vectorized), ddp-parallelize-loops (if parallel-loops), linalg to
/// loops, ddp-expand-integer-division and ddp-insert-host-barriers per function
/// (in parallel over a large step's parts), convert-scf-to-openmp (if
/// parallel-loops), then one conversion of the runtime calls, affine, scf,
/// cf, arith, math, ub, memref, func and omp
/// (convert-ddp-to-llvm{include-upstream}).
/// Entry points keep the memref calling
/// convention; a host calls them through ExecutionEngine (ddp-run).
void buildLoweringPipeline(OpPassManager &pm,
                           const LoweringOptions &options = {});

/// Registers `ddp-compress` and `ddp-lower-to-llvm`.
void registerPipelines();

} // namespace mlir::ddp

#endif // DDP_PIPELINES_PIPELINES_H
