//===- PlanChoices.cpp - the families of ddp-plan's choices ---------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The registry ddp-plan looks each entry of `choices=` up in, and the
// built-in families: plain, fp16 and bf16 (one choice each, no options),
// powersgd and powersgd+fp16 (one choice per rank; PowerSGDPlan.cpp).
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/CostModel.h"
#include "ddp/Dialect/DDP/Transforms/PowerSGD.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

using namespace mlir;
using namespace mlir::ddp;

namespace {
/// Sending the bucket as it is: ddp-plan marks its allreduce uncompressed,
/// with a location saying the plan chose it (see plannedPlainLoc).
class PlainPlanChoice : public PlanChoice {
public:
  std::string name() const override { return "plain"; }
  bool isPlain() const override { return true; }
  FailureOr<PlanCost> predict(const MachineProfile &profile,
                              const BucketShape &bucket, int64_t world,
                              std::string &) const override {
    return predictPlain(profile, bucket, world);
  }
  CompressionAttr decision(MLIRContext *) const override { return {}; }
};

using Choices = SmallVector<std::shared_ptr<PlanChoice>>;

/// A family that is one choice and takes no options.
PlanChoiceFactory
single(std::function<std::shared_ptr<PlanChoice>(MLIRContext *)> make) {
  return
      [make](MLIRContext *context, StringRef options, const PlanChoiceOptions &,
             std::string &why) -> FailureOr<Choices> {
        if (!options.empty()) {
          why = "takes no options";
          return failure();
        }
        return Choices{make(context)};
      };
}

PlanChoiceFactory powerSGDFamily(bool fp16) {
  return [fp16](MLIRContext *context, StringRef options,
                const PlanChoiceOptions &plan,
                std::string &why) -> FailureOr<Choices> {
    return makePowerSGDPlanChoices(
        options, plan, fp16 ? Float16Type::get(context) : FloatType(), why);
  };
}

/// The families of choices, the built-in ones registered first.
NamedRegistry<PlanChoiceFactory> &choiceRegistry() {
  static NamedRegistry<PlanChoiceFactory> registry;
  static const bool builtIn = [] {
    registry.add("plain",
                 single([](MLIRContext *) { return makePlainPlanChoice(); }));
    registry.add("fp16", single([](MLIRContext *context) {
                   return makeNarrowPlanChoice(Float16Type::get(context));
                 }));
    registry.add("bf16", single([](MLIRContext *context) {
                   return makeNarrowPlanChoice(BFloat16Type::get(context));
                 }));
    registry.add("powersgd", powerSGDFamily(/*fp16=*/false));
    registry.add("powersgd+fp16", powerSGDFamily(/*fp16=*/true));
    return true;
  }();
  (void)builtIn;
  return registry;
}
} // namespace

std::shared_ptr<PlanChoice> mlir::ddp::makePlainPlanChoice() {
  return std::make_shared<PlainPlanChoice>();
}

void mlir::ddp::registerPlanChoices(StringRef name, PlanChoiceFactory factory) {
  choiceRegistry().add(name, std::move(factory));
}

std::optional<PlanChoiceFactory> mlir::ddp::lookupPlanChoices(StringRef name) {
  return choiceRegistry().lookup(name);
}

std::vector<std::string> mlir::ddp::getPlanChoiceNames() {
  return choiceRegistry().getNames();
}
