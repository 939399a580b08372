//===- ApplyPlannedSchemes.cpp - ddp-plan's scheme choices, applied -------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// ddp-apply-planned-schemes: the stage of a planned module for the schemes
// registered with ddp-plan (registerPlannableScheme). Each bucket whose
// decision names one is compressed by that scheme, made from the
// decision's options by the scheme's factory; the buckets of one scheme
// and options are compressed together, as the scheme's own pass would.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/BucketCompression.h"
#include "ddp/Dialect/DDP/Transforms/CostModel.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/PowerSGD.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "llvm/ADT/MapVector.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPAPPLYPLANNEDSCHEMES
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {
struct DDPApplyPlannedSchemesPass
    : public ddp::impl::DDPApplyPlannedSchemesBase<DDPApplyPlannedSchemesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // By scheme and options, in the order the buckets come.
    llvm::MapVector<CompressionAttr, SmallVector<AllReduceOp>> byDecision;
    bool valid = true;
    for (auto [bucket, decision] :
         takePlannedBuckets(module, [](CompressionAttr decision) {
           // The built-in choices are their own stages' even where a
           // scheme was registered under the same name.
           StringRef name = decision.getScheme();
           return !llvm::is_contained(
                      ArrayRef<StringRef>{kPowerSGDDecision, "fp16", "bf16"},
                      name) &&
                  lookupPlannableScheme(name).has_value();
         })) {
      DictionaryAttr options = decision.getOptions();
      if (!options || options.size() != 1 ||
          !options.getAs<StringAttr>("options")) {
        bucket.emitError()
            << "ddp.planned " << decision
            << ": a scheme's decision is {options = \"...\"}, its options "
               "as its pass takes them";
        valid = false;
        continue;
      }
      byDecision[decision].push_back(bucket);
    }
    if (!valid)
      return signalPassFailure();
    for (auto &[decision, buckets] : byDecision) {
      StringRef options =
          decision.getOptions().getAs<StringAttr>("options").getValue();
      // The factory's reasons, at the first bucket with that decision.
      FailureOr<std::unique_ptr<CompressionScheme>> scheme =
          makePlannableScheme(decision.getScheme(), module, options,
                              getArgument(), buckets.front().getLoc());
      if (failed(scheme))
        return signalPassFailure();
      FailureOr<unsigned> count =
          applyCompressionScheme(buckets, **scheme, getArgument());
      if (failed(count))
        return signalPassFailure();
      numCompressed += *count;
    }
  }
};
} // namespace
