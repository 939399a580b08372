//===- InsertPowerSGD.cpp - PowerSGD low-rank gradient compression --------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// PowerSGD's CompressionScheme (PowerSGDScheme, PowerSGD.h), and
// insert-powersgd, which applies it: it forms the gradient buckets
// (formGradientBuckets) and rewrites each one (or those its buckets= filter
// names) at the pass's rank, PyTorch's powerSGD_hook for a whole model.
// With `planned`, it rewrites only the buckets ddp-plan planned as
// PowerSGD, each at the rank (and with the narrow collectives) of its
// decision.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/BucketCompression.h"
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

//===----------------------------------------------------------------------===//
// PowerSGDScheme
//===----------------------------------------------------------------------===//

PowerSGDScheme::PowerSGDScheme(const InsertPowerSGDOptions &options,
                               StringRef passName)
    : options(options), passName(passName.str()) {}

PowerSGDScheme::~PowerSGDScheme() = default;

StringRef PowerSGDScheme::getName() const { return kPowerSGDDecision; }

DictionaryAttr PowerSGDScheme::getOptions(MLIRContext *context) const {
  Builder b(context);
  return b.getDictionaryAttr(
      b.getNamedAttr("rank", b.getI64IntegerAttr(options.rank)));
}

LogicalResult PowerSGDScheme::initialize(ModuleOp module) {
  // One rewriter per application: the step counters, the numbering of
  // states and random streams are the module's.
  rewriter = std::make_unique<PowerSGDRewriter>(module, options, passName);
  return success();
}

LogicalResult PowerSGDScheme::check(AllReduceOp allreduce) {
  assert(rewriter && "apply PowerSGDScheme with applyCompressionScheme, "
                     "which initializes it first");
  if (!allreduce->getParentOfType<FunctionOpInterface>())
    return allreduce.emitError()
           << passName
           << ": a PowerSGD bucket must be in a function (its step counter "
              "is the function's)";
  if (options.mode == PowerSGDMode::batched)
    return rewriter->checkBatchable(allreduce);
  return success();
}

FailureOr<unsigned> PowerSGDScheme::rewrite(CompressionRewriter &builder,
                                            AllReduceOp allreduce) {
  unsigned rank = options.rank;
  FloatType narrow;
  // Used once: the bucket is replaced, and its address may be reused.
  if (auto decision = decisions.find(allreduce); decision != decisions.end()) {
    std::tie(rank, narrow) = decision->second;
    decisions.erase(decision);
  }
  PowerSGDRewrite made = rewriter->rewrite(builder, allreduce, rank);
  // ddp-plan's "+fp16": the bucket's collectives sent narrow.
  if (narrow)
    narrowCollectives(made.collectives, narrow, passName);
  totals.compressed += made.compressed;
  totals.uncompressed += made.uncompressed;
  totals.skipped += made.skipped;
  totals.numelBefore += made.numelBefore;
  totals.numelAfter += made.numelAfter;
  return made.compressed > 0 ? 1u : 0u;
}

void PowerSGDScheme::setDecision(AllReduceOp bucket, unsigned rank,
                                 FloatType narrow) {
  decisions[bucket] = {rank, narrow};
}

//===----------------------------------------------------------------------===//
// insert-powersgd
//===----------------------------------------------------------------------===//

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

  if (planned && !buckets.empty()) {
    emitPassError(module, getArgument())
        << "buckets= does not apply with planned: ddp-plan chose the buckets "
           "(use its never= option)";
    return signalPassFailure();
  }
  InsertPowerSGDOptions options;
#define COPY_OPTION(name) options.name = name;
  DDP_POWERSGD_SHARED_OPTIONS(COPY_OPTION)
#undef COPY_OPTION
  options.rank = rank;
  options.batchSameShape = batchSameShape;
  options.mode = mode;
  options.bucketCapMb = bucketCapMb;
  PowerSGDScheme scheme(options, getArgument());

  FailureOr<unsigned> count;
  if (planned) {
    // The buckets ddp-plan planned as PowerSGD, each at its rank, and
    // nothing else (the plan bucketed already).
    SmallVector<AllReduceOp> chosen;
    for (auto [bucket, decision] :
         takePlannedBuckets(module, [](CompressionAttr decision) {
           return decision.getScheme() == kPowerSGDDecision;
         })) {
      FailureOr<std::pair<unsigned, FloatType>> parsed =
          parsePowerSGDDecision(bucket, decision);
      if (failed(parsed))
        return signalPassFailure();
      scheme.setDecision(bucket, parsed->first, parsed->second);
      chosen.push_back(bucket);
    }
    count = applyCompressionScheme(chosen, scheme, getArgument());
  } else {
    if (failed(refusePlannedBuckets(module, getArgument())))
      return signalPassFailure();
    // The rewrite sees ddp.allreduce buckets only; a module as users write
    // it gets them here.
    if (failed(formGradientBuckets(module, bucketCapMb)))
      return signalPassFailure();
    // The driver takes the buckets in the module's functions.
    module.walk([&](AllReduceOp op) {
      auto function = op->getParentOfType<func::FuncOp>();
      if (op.isCompressible() &&
          (!function || function->getParentOp() != module))
        op.emitRemark() << getArgument()
                        << " leaves an allreduce outside the module's "
                           "functions as it is";
    });
    count = applyCompressionScheme(module, scheme, BucketFilter{buckets},
                                   getArgument());
  }
  if (failed(count))
    return signalPassFailure();
  const PowerSGDRewrite &made = scheme.getTotals();
  numCompressed += made.compressed;
  numUncompressed += made.uncompressed;
  numSkipped += made.skipped;
  numelBefore += made.numelBefore;
  numelAfter += made.numelAfter;
}
