//===- InsertPowerSGD.cpp - PowerSGD low-rank gradient compression --------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// insert-powersgd: forms the gradient buckets (formGradientBuckets) and
// rewrites each one with PowerSGDRewriter (PowerSGD.h) at the pass's rank,
// PyTorch's powerSGD_hook for a whole model. With `planned`, it rewrites
// only the buckets ddp-plan planned as PowerSGD, each at the rank (and with
// the narrow collectives) of its decision.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/PowerSGD.h"
#include "ddp/Dialect/DDP/Transforms/Transforms.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_INSERTPOWERSGD
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {
struct InsertPowerSGDPass
    : public PassWithOptionNames<
          ddp::impl::InsertPowerSGDBase<InsertPowerSGDPass>> {
  using Base::Base;

  void runOnOperation() override;

protected:
  ArrayRef<OptionAlias> getOptionAliases() const override {
    return powerSGDOptionAliases();
  }
};
} // namespace

void InsertPowerSGDPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkPowerSGDOptions(
          rank, minCompressionRate, startIter, orthogonalizationEpsilon,
          bucketCapMb, [&](const Twine &message) {
            emitPassError(module, getArgument()) << message;
          })))
    return signalPassFailure();

  // planned: the buckets ddp-plan planned as PowerSGD, each at its rank,
  // and nothing else (the plan bucketed already).
  SmallVector<AllReduceOp> buckets;
  SmallVector<std::pair<unsigned, FloatType>> decisions;
  if (planned) {
    for (auto [bucket, decision] :
         takePlannedBuckets(module, [](CompressionAttr decision) {
           return decision.getScheme() == kPowerSGDDecision;
         })) {
      if (!bucket->getParentOfType<FunctionOpInterface>()) {
        bucket.emitError() << getArgument()
                           << ": a bucket planned as PowerSGD must be in a "
                              "function (its step counter is the "
                              "function's)";
        return signalPassFailure();
      }
      FailureOr<std::pair<unsigned, FloatType>> parsed =
          parsePowerSGDDecision(bucket, decision);
      if (failed(parsed))
        return signalPassFailure();
      buckets.push_back(bucket);
      decisions.push_back(*parsed);
    }
  } else {
    if (failed(refusePlannedBuckets(module, getArgument())))
      return signalPassFailure();
    // The rewrite sees ddp.allreduce buckets only; a module as users write
    // it gets them here.
    if (failed(formGradientBuckets(module, bucketCapMb)))
      return signalPassFailure();
    module.walk([&](AllReduceOp op) {
      if (!op.isCompressible())
        return;
      if (!op->getParentOfType<FunctionOpInterface>()) {
        op.emitRemark("insert-powersgd leaves an allreduce outside any "
                      "function as it is");
        return;
      }
      buckets.push_back(op);
      decisions.push_back({unsigned(rank), FloatType()});
    });
  }
  InsertPowerSGDOptions options;
#define COPY_OPTION(name) options.name = name;
  DDP_POWERSGD_SHARED_OPTIONS(COPY_OPTION)
#undef COPY_OPTION
  options.rank = rank;
  options.batchSameShape = batchSameShape;
  options.mode = mode;
  options.bucketCapMb = bucketCapMb;
  PowerSGDRewriter powersgd(module, options, getArgument());
  // Batched mode packs each bucket into one square matrix: its size must be
  // representable before anything is rewritten.
  bool representable = true;
  if (mode == PowerSGDMode::batched)
    for (AllReduceOp bucket : buckets)
      representable &= succeeded(powersgd.checkBatchable(bucket));
  if (!representable)
    return signalPassFailure();
  IRRewriter rewriter(&getContext());
  for (auto [bucket, decision] : llvm::zip_equal(buckets, decisions)) {
    auto [bucketRank, narrow] = decision;
    PowerSGDRewrite made = powersgd.rewrite(rewriter, bucket, bucketRank);
    // ddp-plan's "+fp16": the bucket's collectives sent narrow.
    if (narrow)
      narrowCollectives(made.collectives, narrow, getArgument());
    numCompressed += made.compressed;
    numUncompressed += made.uncompressed;
    numSkipped += made.skipped;
    numelBefore += made.numelBefore;
    numelAfter += made.numelAfter;
  }
}
