//===- Pipelines.cpp - ddp compression pipelines --------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Pipelines/Pipelines.h"

#include "ddp/Conversion/Passes.h"
#include "ddp/Dialect/DDP/Transforms/PowerSGD.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"
#include "ddp/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/BufferizationToMemRef/BufferizationToMemRef.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/SCFToOpenMP/SCFToOpenMP.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <cstdlib>

using namespace mlir;
using namespace mlir::ddp;

/// The PowerSGD options a pipeline passes on, the same in insert-powersgd
/// and ddp-plan.
template <typename PassOptions>
static void copyPowerSGDOptions(const CompressionPipelineOptions &from,
                                PassOptions &to) {
#define COPY_OPTION(name) to.name = from.name;
  DDP_POWERSGD_SHARED_OPTIONS(COPY_OPTION)
#undef COPY_OPTION
  // Bucketed by the pipeline (cap-mb 0 there leaves every allreduce its
  // own bucket).
  to.bucketCapMb = 0.0;
}

void mlir::ddp::buildCompressionPipeline(
    OpPassManager &pm, const CompressionPipelineOptions &options) {
  // Upstream shard modules first; then every pass sees ddp.allreduce.
  pm.addPass(createConvertShardToDDP());
  pm.addNestedPass<func::FuncOp>(
      createDDPBucketize(DDPBucketizeOptions{options.bucketCapMb}));
  if (options.twoLevel == TwoLevelMode::nodeMean)
    pm.addNestedPass<func::FuncOp>(createDDPTwoLevel());
  if (!options.plan.empty()) {
    DDPPlanOptions plan;
    plan.profile = options.plan;
    plan.kernels = options.planKernels;
    plan.world = options.planWorld;
    plan.choices.assign(options.planChoices.begin(), options.planChoices.end());
    plan.ranks.assign(options.planRanks.begin(), options.planRanks.end());
    plan.minRank = options.planMinRank;
    plan.never = options.planNever;
    plan.tolerance = options.planTolerance;
    plan.minCompressionRate = options.minCompressionRate;
    // Bucketed above.
    plan.bucketCapMb = 0.0;
    pm.addPass(createDDPPlan(plan));
    // The stages that honour the plan's decisions, each taking the buckets
    // planned its way: PowerSGD at each bucket's rank (and the shared
    // options given here), the schemes with a cost model, fp16, bf16.
    InsertPowerSGDOptions powersgd;
    copyPowerSGDOptions(options, powersgd);
    powersgd.batchSameShape = options.batchSameShape;
    powersgd.planned = true;
    pm.addPass(createInsertPowerSGD(powersgd));
    pm.addPass(createDDPApplyPlannedSchemes());
    pm.addNestedPass<func::FuncOp>(
        createInsertFP16Compression(InsertFP16CompressionOptions{true}));
    pm.addNestedPass<func::FuncOp>(
        createInsertBF16Compression(InsertBF16CompressionOptions{true}));
  }
  if (options.powersgdRank > 0) {
    InsertPowerSGDOptions powersgd;
    powersgd.rank = options.powersgdRank;
    copyPowerSGDOptions(options, powersgd);
    powersgd.batchSameShape = options.batchSameShape;
    powersgd.mode = options.mode;
    powersgd.buckets = options.powersgdBuckets;
    pm.addPass(createInsertPowerSGD(powersgd));
  }
  // The bucket schemes in this order, each on the buckets the ones before
  // left (and its own filter matches).
  if (!options.hook.empty()) {
    DDPApplyHookOptions hook;
    hook.hook = options.hook;
    hook.from = options.hookFrom;
    hook.buckets = options.hookBuckets;
    pm.addPass(createDDPApplyHook(hook));
  }
  if (options.quantize != QuantizeMode::none) {
    InsertQuantizationOptions quantization;
    quantization.granularity = options.quantize == QuantizeMode::perTensor
                                   ? QuantizationGranularity::perTensor
                                   : QuantizationGranularity::perChannel;
    quantization.channelSize = options.channelSize;
    quantization.buckets = options.quantizeBuckets;
    pm.addPass(createInsertQuantization(quantization));
  }
  if (options.narrow == NarrowType::fp16)
    pm.addNestedPass<func::FuncOp>(createInsertFP16Compression());
  else if (options.narrow == NarrowType::bf16)
    pm.addNestedPass<func::FuncOp>(createInsertBF16Compression());
  if (options.twoLevel == TwoLevelMode::collectives)
    pm.addNestedPass<func::FuncOp>(createDDPTwoLevel());
  if (options.fuse)
    pm.addNestedPass<func::FuncOp>(createDDPFuseKernels());
  // Last: it places what the passes above emitted.
  if (options.overlap)
    pm.addNestedPass<func::FuncOp>(createDDPScheduleOverlap());
}

LoweringOptions LoweringPipelineOptions::get() const {
  LoweringOptions options;
  options.runtimeChecks = runtimeChecks;
  options.contractions = contractions;
  options.sumOrder = sumOrder;
  options.parallelLoops = parallelLoops;
  options.scaleWorkarounds = scaleWorkarounds;
  options.target = target;
  options.gpuChip = gpuChip;
  options.libdevice = libdevice;
  options.splitReductions = splitReductions;
  return options;
}

/// CUDA's libdevice: `given`, or where the toolkit keeps it ("" if not
/// found).
static std::string findLibdevice(StringRef given) {
  if (!given.empty())
    return given.str();
  SmallVector<std::string> roots;
  if (const char *home = std::getenv("CUDA_HOME"))
    roots.push_back(home);
  if (const char *path = std::getenv("CUDA_PATH"))
    roots.push_back(path);
  roots.push_back("/usr/local/cuda");
  for (const std::string &root : roots) {
    SmallString<128> path(root);
    llvm::sys::path::append(path, "nvvm", "libdevice", "libdevice.10.bc");
    if (llvm::sys::fs::exists(path))
      return std::string(path);
  }
  return "";
}

/// target=cuda: the kernels of ddp-map-loops-to-gpu outlined, and each GPU
/// module compiled to PTX for `options.gpuChip`; the launches stay for
/// ddp-insert-host-barriers and convert-ddp-to-llvm.
static void buildKernelPipeline(OpPassManager &pm,
                                const LoweringOptions &options) {
  pm.addNestedPass<func::FuncOp>(createDDPMapLoopsToGPU());
  pm.addPass(createGpuKernelOutliningPass());
  // One module, compiled once, whatever the number of kernels.
  pm.addPass(createDDPMergeGPUModules());
  // Buffers only kernels and runtime calls touch: device memory, freed in
  // stream order.
  pm.addNestedPass<func::FuncOp>(createDDPDeviceAllocations());
  GpuNVVMAttachTargetOptions target;
  target.chip = options.gpuChip;
  target.optLevel = 3;
  // No fast-math and no flush to zero: each element's operations are the
  // CPU's, rounded as the CPU rounds them. (NVPTX does not contract a
  // multiply and an add into an FMA unless the ops allow it.)
  if (std::string libdevice = findLibdevice(options.libdevice);
      !libdevice.empty())
    target.linkLibs.push_back(libdevice);
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createLowerAffinePass());
  kernels.addPass(createSCFToControlFlowPass());
  kernels.addPass(memref::createExpandStridedMetadataPass());
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.indexBitwidth = 64;
  kernels.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  kernels.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  // PTX: the driver compiles it for the device it runs on when the runtime
  // loads it (ptxas checks it where the toolkit is).
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void mlir::ddp::buildLoweringPipeline(OpPassManager &pm,
                                      const LoweringOptions &options) {
  // The canonicalizers below fold what each step leaves. Region
  // simplification (merging identical blocks, dropping dead block
  // arguments) finds nothing in a step: the same output at 10k gradients,
  // but the order of commutative operands, and a quarter of their time.
  // (Otherwise the canonicalizer's defaults: top-down.)
  GreedyRewriteConfig folding;
  folding.setUseTopDownTraversal(true);
  folding.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  // A module written for upstream MLIR lowers as it is: its whole-grid
  // shard.all_reduces become ddp collectives (if no insertion pass ran) and
  // its grids go; any other shard op is an error here, with its location,
  // rather than in the LLVM translation.
  pm.addPass(createConvertShardToDDP(ConvertShardToDDPOptions{true}));
  // Only the fused PowerSGD ops have runtime calls.
  pm.addNestedPass<func::FuncOp>(createDDPFuseKernels());
  // A compression scheme's buckets: flatten and unflatten as tensor ops.
  pm.addNestedPass<func::FuncOp>(createDDPExpandBuckets());
  // Element-wise arith/math on tensors bufferize as linalg.generic.
  // A select of whole tensors (a scheme's NaN guard of its state) picks a
  // buffer instead of copying one.
  pm.addNestedPass<func::FuncOp>(createDDPBranchTensorSelects());
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  // Chains of element-wise ops (a quantizer's, a hook's, a model's) as one
  // loop nest each: one pass over memory instead of one per op.
  // Contractions stay whole for ddp-matmuls-to-runtime.
  pm.addNestedPass<func::FuncOp>(createDDPFuseElementwise());
  // What element-wise fusion cannot join (an element-wise op after a sum
  // over ranks, the fill that sum starts from) meets in cache, tile by tile.
  // (On a GPU each op is a kernel of one thread per element instead.)
  bool cuda = options.target == LoweringTarget::cuda;
  if (!cuda)
    pm.addNestedPass<func::FuncOp>(createDDPTileAndFuse());
  // Indices, slices, shapes and integer division in the step's own code
  // (hooks included) are checked when it runs: ddprt_fail with the op's
  // location rather than a signal or garbage.
  if (options.runtimeChecks)
    pm.addNestedPass<func::FuncOp>(createDDPInsertRuntimeChecks());
  // Every tensor op has a bufferization model (the host registers them):
  // a located error here rather than a failure inside One-Shot Bufferize.
  pm.addPass(createDDPCheckLowerable());
  // The entry points' signatures as One-Shot would make them, without its
  // comparison of every result with every argument (quadratic in a step's
  // gradients).
  if (options.scaleWorkarounds)
    pm.addPass(createBufferizeEntrySignatures());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  // A value whose layout One-Shot cannot infer (the results of the scf.if a
  // versioned step is) gets the identity layout too, so that the function
  // returns it as it is instead of copying every fully dynamic result into
  // an identity buffer at the end of the step.
  bufferize.unknownTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  // A loop-carried value that a compressed allreduce rewrites (fp16/bf16
  // cast, then reduce, then cast back) is a fresh buffer every iteration,
  // not the iter_arg's: let the loop yield it (the ownership-based
  // deallocation below frees the one it replaces).
  bufferize.allowReturnAllocsFromLoops = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // Upstream's buffer-deallocation-pipeline, with the step's end-of-function
  // dealloc split by allocation before it is simplified (quadratic otherwise).
  memref::ExpandReallocPassOptions expandRealloc;
  expandRealloc.emitDeallocs = false;
  pm.addNestedPass<func::FuncOp>(
      memref::createExpandReallocPass(expandRealloc));
  pm.addNestedPass<func::FuncOp>(createCanonicalizerPass(folding));
  // Ownership-based deallocation and what follows it are quadratic in a
  // function's size, and run on one thread per function: a step with
  // thousands of gradients is cut into parts here, which they handle in
  // parallel. (After the canonicalizer: a bucket's versioned results are
  // then the step's arguments again, which a part need not return.)
  if (options.scaleWorkarounds)
    pm.addPass(createSplitFunctions());
  pm.addNestedPass<func::FuncOp>(
      bufferization::createOwnershipBasedBufferDeallocationPass());
  if (options.scaleWorkarounds)
    pm.addNestedPass<func::FuncOp>(createSplitDeallocations());
  pm.addNestedPass<func::FuncOp>(createCanonicalizerPass(folding));
  pm.addNestedPass<func::FuncOp>(
      bufferization::createBufferDeallocationSimplificationPass());
  pm.addPass(bufferization::createLowerDeallocationsPass());
  pm.addNestedPass<func::FuncOp>(createCSEPass());
  // CSE has made the buckets' `step < start-iter` one value: thousands of
  // adjacent scf.ifs on it, which the canonicalizer would merge and
  // propagate in quadratic time.
  if (options.scaleWorkarounds)
    pm.addNestedPass<func::FuncOp>(createMergeIfs());
  pm.addNestedPass<func::FuncOp>(createCanonicalizerPass(folding));
  pm.addPass(createDDPDonateArguments());
  pm.addPass(createConvertBufferizationToMemRefPass());
  // f32 matmuls as calls of the runtime's BLAS (OpenBLAS, cuBLAS).
  if (options.contractions == ContractionLowering::blas)
    pm.addPass(createDDPMatmulsToRuntime());
  // Reductions whose innermost loop adds up terms vectorize (one partial
  // sum per lane); minimum and maximum need nothing.
  if (options.sumOrder == SumOrder::vectorized)
    pm.addNestedPass<func::FuncOp>(createDDPReassociateSums());
  // Tiles and large loop nests as scf.parallel (OpenMP below); the same
  // operations per element in the same order, on any number of threads.
  // With parallel-loops=false every tile loop becomes scf.for and nothing
  // else changes.
  DDPParallelizeLoopsOptions parallelize;
  parallelize.parallel = options.parallelLoops;
  // A minimum or maximum over a long loop in parallel chunks (on a GPU
  // always); then on a GPU every element-wise loop nest is parallel,
  // whatever its size.
  if (cuda || options.splitReductions)
    pm.addNestedPass<func::FuncOp>(createDDPSplitReductions());
  if (cuda) {
    parallelize.parallel = true;
    parallelize.everyLoop = true;
    parallelize.minIterations = 1;
  }
  pm.addNestedPass<func::FuncOp>(createDDPParallelizeLoops(parallelize));
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  // arith.ceildivsi, floordivsi and ceildivui, which have no LLVM lowering
  // of their own, as ops that have one.
  pm.addNestedPass<func::FuncOp>(createDDPExpandIntegerDivision());
  // target=cuda: the loops as kernels, compiled to PTX.
  if (cuda)
    buildKernelPipeline(pm, options);
  // On a GPU, host code waits for the device only where it needs to.
  pm.addNestedPass<func::FuncOp>(createDDPInsertHostBarriers());
  // The parallel loops as OpenMP work-sharing loops: libomp's threads, as
  // many as the host sets (omp_set_num_threads, from --threads-per-rank).
  if (options.parallelLoops && !cuda)
    pm.addPass(createConvertSCFToOpenMPPass());
  // Views as reinterpret casts, per function (in parallel over the parts),
  // for the conversion below.
  pm.addNestedPass<func::FuncOp>(memref::createExpandStridedMetadataPass());
  // The runtime calls, affine, scf, cf (cf.assert declares the calls it
  // makes), math, arith, ub, memref and func in one conversion, the parts
  // in parallel: one walk over the step and one verification rather than
  // nine. Allocations call _mlir_memref_to_llvm_alloc/
  // _aligned_alloc/_free, which the host defines (ddp-run and
  // ddprt-step-runner: host memory on the CPU backend, managed memory that
  // the GPU reads on CUDA), not malloc/free. It also reconciles the
  // unrealized casts left between the conversions.
  ConvertDDPToLLVMOptions toLLVM;
  toLLVM.includeUpstream = true;
  pm.addPass(createConvertDDPToLLVM(toLLVM));
  pm.addNestedPass<LLVM::LLVMFuncOp>(createCanonicalizerPass(folding));
}

void mlir::ddp::registerPipelines() {
  // Registered by hand rather than through PassPipelineRegistration, whose
  // builders cannot fail: every bad option gets a message naming it (an
  // option of ddp-lower-to-llvm failed silently, and PowerSGD's values were
  // not checked at all with powersgd-rank=0).
  registerPassPipeline(
      "ddp-compress",
      "Bucket gradient allreduces, compress them (PowerSGD and/or fp16/bf16) "
      "and fuse the result into the runtime's kernels",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        CompressionPipelineOptions options;
        // PyTorch's names too; a bad one is answered with the nearest
        // valid one, through the handler (nothing goes to stderr).
        std::vector<std::string> known =
            optionNamesBeside(options.powersgdRank);
        std::vector<std::string> lists =
            optionNamesBeside(options.powersgdRank, /*listsOnly=*/true);
        FailureOr<std::string> spelled =
            respellOptions("ddp-compress", text, known, lists,
                           powerSGDOptionAliases(), errorHandler);
        if (failed(spelled))
          return failure();
        std::string parseErrors;
        llvm::raw_string_ostream parseStream(parseErrors);
        if (failed(options.parseFromString(*spelled, parseStream)))
          return errorHandler(explainOptionError(
              "ddp-compress", parseErrors, known, powerSGDOptionAliases()));
        // PowerSGD's values are checked whether or not it runs: a typo must
        // not pass because powersgd-rank is 0.
        LogicalResult valid = checkPowerSGDOptions(
            std::max(1u, unsigned(options.powersgdRank)),
            options.minCompressionRate, options.startIter,
            options.orthogonalizationEpsilon, options.bucketCapMb,
            [&](const Twine &message) {
              (void)errorHandler("ddp-compress: " + message);
            });
        if (failed(valid))
          return failure();
        // PowerSGD, the hook and quantization run in this order, each on
        // the buckets left by the ones before: all but the last need a
        // filter, or the next would find no bucket left.
        struct Scheme {
          const char *name, *filterName;
          bool on;
          const std::string &filter;
        };
        const Scheme schemes[] = {
            {"powersgd-rank", "powersgd-buckets", options.powersgdRank > 0,
             options.powersgdBuckets},
            {"hook", "hook-buckets", !options.hook.empty(),
             options.hookBuckets},
            {"quantize", "quantize-buckets",
             options.quantize != QuantizeMode::none, options.quantizeBuckets}};
        const Scheme *previous = nullptr;
        int count = 0;
        for (const Scheme &scheme : schemes) {
          if (!scheme.on) {
            if (!scheme.filter.empty())
              return errorHandler(Twine("ddp-compress: ") + scheme.filterName +
                                  "='" + scheme.filter + "' needs " +
                                  scheme.name);
            continue;
          }
          std::string error;
          if (!scheme.filter.empty() &&
              !llvm::Regex(scheme.filter).isValid(error))
            return errorHandler(
                Twine("ddp-compress: ") + scheme.filterName + "='" +
                scheme.filter +
                "' is not a valid regular expression: " + error);
          if (previous && previous->filter.empty())
            return errorHandler(
                Twine("ddp-compress: ") + previous->name +
                " compresses every "
                "bucket, so " +
                scheme.name + " would find none left: give " + previous->name +
                " a filter (" + previous->filterName +
                "=REGEX) to leave the other buckets to " + scheme.name);
          previous = &scheme;
          ++count;
        }
        // The plan chooses each bucket's compression itself.
        if (!options.plan.empty() &&
            (count > 0 || options.narrow != NarrowType::none))
          return errorHandler(
              "ddp-compress: plan= chooses each bucket's compression; it "
              "does not combine with powersgd-rank, hook, quantize or "
              "narrow (limit its choices with plan-choices=)");
        // The plan's model is PowerSGD per tensor.
        if (!options.plan.empty() && options.mode == PowerSGDMode::batched)
          return errorHandler(
              "ddp-compress: plan= plans PowerSGD per tensor (layerwise); "
              "mode=batched does not combine with it");
        bool planOptions =
            !options.planKernels.empty() || !options.planChoices.empty() ||
            !options.planRanks.empty() || options.planMinRank != 1 ||
            !options.planNever.empty() || options.planWorld != 0 ||
            options.planTolerance != 0.05;
        if (options.plan.empty() && planOptions)
          return errorHandler("ddp-compress: the plan-* options need "
                              "plan=<profile.json>");
        if (!options.hookFrom.empty() && options.hook.empty())
          return errorHandler("ddp-compress: hook-from='" + options.hookFrom +
                              "' needs hook=<name>");
        if (options.channelSize <= 0)
          return errorHandler("ddp-compress: channel-size must be positive, "
                              "got " +
                              Twine(int64_t(options.channelSize)));
        buildCompressionPipeline(pm, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(CompressionPipelineOptions());
      });
  registerPassPipeline(
      "ddp-lower-to-llvm",
      "Lower a tensor-level module with ddp ops (after the insertion passes) "
      "to the LLVM dialect, with the ddp ops as calls into the runtime",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        LoweringPipelineOptions options;
        std::string parseErrors;
        llvm::raw_string_ostream parseStream(parseErrors);
        if (failed(options.parseFromString(text, parseStream)))
          return errorHandler(
              explainOptionError("ddp-lower-to-llvm", parseErrors,
                                 optionNamesBeside(options.runtimeChecks),
                                 {}));
        buildLoweringPipeline(pm, options.get());
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(LoweringPipelineOptions());
      });
}
