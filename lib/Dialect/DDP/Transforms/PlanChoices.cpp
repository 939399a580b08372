//===- PlanChoices.cpp - the registries of ddp-plan's choices -------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The registries ddp-plan looks each entry of `choices=` up in: families of
// choices, the built-in ones plain, fp16 and bf16 (one choice each, no
// options), powersgd and powersgd+fp16 (one choice per rank;
// PowerSGDPlan.cpp); and CompressionSchemes with a cost hook, each one
// choice (SchemePlanChoice), the built-in ones topk and quantize.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/BucketCompression.h"
#include "ddp/Dialect/DDP/Transforms/CostModel.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
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

//===----------------------------------------------------------------------===//
// Schemes with a cost hook
//===----------------------------------------------------------------------===//

/// The plannable schemes, the built-in ones registered first.
static NamedRegistry<SchemeFactory> &schemeRegistry() {
  static NamedRegistry<SchemeFactory> registry;
  static const bool builtIn = [] {
    registry.add("topk", makeTopKScheme);
    registry.add("quantize", makeQuantizationScheme);
    return true;
  }();
  (void)builtIn;
  return registry;
}

void mlir::ddp::registerPlannableScheme(StringRef name, SchemeFactory factory) {
  schemeRegistry().add(name, std::move(factory));
}

std::optional<SchemeFactory> mlir::ddp::lookupPlannableScheme(StringRef name) {
  return schemeRegistry().lookup(name);
}

FailureOr<std::unique_ptr<CompressionScheme>>
mlir::ddp::makePlannableScheme(StringRef name, ModuleOp module,
                               StringRef options, StringRef caller,
                               std::optional<Location> at) {
  std::optional<SchemeFactory> factory = lookupPlannableScheme(name);
  if (!factory)
    return failure();
  std::string choice = ("'" + name + "'").str();
  if (!options.empty())
    choice = ("'" + name + "{" + options + "}'").str();
  // The factory's diagnostics, held back and emitted again with the caller
  // and the choice in front.
  SmallVector<Diagnostic> caught;
  FailureOr<std::unique_ptr<CompressionScheme>> scheme;
  {
    ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &diag) {
      caught.push_back(std::move(diag));
      return success();
    });
    scheme = (*factory)(module, options);
  }
  DiagnosticEngine &engine = module.getContext()->getDiagEngine();
  for (Diagnostic &diag : caught) {
    Diagnostic prefixed(at.value_or(diag.getLocation()), diag.getSeverity());
    prefixed << caller << ": " << choice << ": " << diag.str();
    for (Diagnostic &note : diag.getNotes())
      prefixed.attachNote(note.getLocation()) << note.str();
    engine.emit(std::move(prefixed));
  }
  if (failed(scheme) && caught.empty())
    emitError(at.value_or(module.getLoc()))
        << caller << ": " << choice << ": the scheme refuses these options";
  return scheme;
}

std::vector<std::string> mlir::ddp::getPlannableSchemeNames() {
  return schemeRegistry().getNames();
}

namespace {
/// A scheme with a cost hook as one of ddp-plan's choices: it predicts
/// with the hook; its decision names the scheme as registered and the
/// options it was made with, from which ddp-apply-planned-schemes makes it
/// again.
class SchemePlanChoice : public PlanChoice {
public:
  SchemePlanChoice(std::unique_ptr<CompressionScheme> scheme,
                   StringRef registered, StringRef options)
      : scheme(std::move(scheme)), registered(registered.str()),
        options(options.str()) {}

  std::string name() const override {
    return options.empty() ? registered : registered + "{" + options + "}";
  }

  FailureOr<PlanCost> predict(const MachineProfile &profile,
                              const BucketShape &bucket, int64_t world,
                              std::string &why) const override {
    return scheme->predict(profile, bucket, world, why);
  }

  CompressionAttr decision(MLIRContext *context) const override {
    Builder b(context);
    return CompressionAttr::get(context, registered,
                                b.getDictionaryAttr(b.getNamedAttr(
                                    "options", b.getStringAttr(options))));
  }

private:
  std::unique_ptr<CompressionScheme> scheme;
  std::string registered, options;
};
} // namespace

std::shared_ptr<PlanChoice>
mlir::ddp::makeSchemePlanChoice(std::unique_ptr<CompressionScheme> scheme,
                                StringRef registered, StringRef options) {
  return std::make_shared<SchemePlanChoice>(std::move(scheme), registered,
                                            options);
}
