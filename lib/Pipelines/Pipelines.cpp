//===- Pipelines.cpp - ddp compression pipelines --------------------------===//

#include "ddp/Pipelines/Pipelines.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::ddp;

void mlir::ddp::buildCompressionPipeline(
    OpPassManager &pm, const CompressionPipelineOptions &options) {
  pm.addPass(createDDPBucketize(DDPBucketizeOptions{options.bucketCapMb}));
  if (options.powersgdRank > 0) {
    InsertPowerSGDOptions powersgd;
    powersgd.rank = options.powersgdRank;
    powersgd.minCompressionRate = options.minCompressionRate;
    powersgd.startIter = options.startIter;
    powersgd.errorFeedback = options.errorFeedback;
    powersgd.warmStart = options.warmStart;
    powersgd.orthogonalizationEpsilon = options.orthogonalizationEpsilon;
    powersgd.seed = options.seed;
    powersgd.batchSameShape = options.batchSameShape;
    powersgd.mode = options.mode;
    powersgd.bucketCapMb = options.bucketCapMb;
    pm.addPass(createInsertPowerSGD(powersgd));
  }
  if (options.narrow == NarrowType::fp16)
    pm.addPass(createInsertFP16Compression());
  else if (options.narrow == NarrowType::bf16)
    pm.addPass(createInsertBF16Compression());
  if (options.fuse)
    pm.addPass(createDDPFuseKernels());
}

void mlir::ddp::registerPipelines() {
  PassPipelineRegistration<CompressionPipelineOptions>(
      "ddp-compress",
      "Bucket gradient allreduces, compress them (PowerSGD and/or fp16/bf16) "
      "and fuse the result into the runtime's kernels",
      buildCompressionPipeline);
}
