//===- Plan.cpp - choose how each bucket is sent, from a profile ----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// ddp-plan: for each gradient bucket, the predicted time of every allowed
// way of sending it (a PlanChoice: plain, fp16, bf16, PowerSGD at a rank, a
// scheme with a cost hook), the fastest taken, and the bucket annotated
// with it, and nothing else: plain marks the bucket `uncompressed`, any
// other choice puts its decision in the bucket's `ddp.planned`, for the
// stage that compresses that way. Every choice predicts its own cost and
// names its own decision; this pass only parses the choices, compares and
// records. The predictions and reasons stay in the module's `ddp.plan`
// attribute for the compression report.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/BucketCompression.h"
#include "ddp/Dialect/DDP/Transforms/CostModel.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/PowerSGD.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Regex.h"

#include <cmath>
#include <limits>

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPPLAN
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {
using Choice = std::shared_ptr<PlanChoice>;

/// One bucket's decision.
struct Decision {
  Choice choice;
  std::string reason;
  /// Every choice evaluated, in the order of the allowed list.
  SmallVector<std::pair<Choice, PlanCost>> costs;
};

struct DDPPlanPass : public PassWithOptionNames<ddp::impl::DDPPlanBase<DDPPlanPass>> {
  using Base::Base;
  void runOnOperation() override;

protected:
  const llvm::cl::Option *getAnyOption() const override { return &profile; }

private:
  /// Parses and checks the options into `allowed`; false after an error.
  bool parseOptions(SmallVectorImpl<Choice> &allowed);
  /// Splits the inputs of `op` whose names match `never` into a plain
  /// allreduce of their own; returns it (null if nothing matched) and what
  /// is left to plan (null if nothing is).
  std::pair<AllReduceOp, AllReduceOp> splitOffNever(AllReduceOp op,
                                                    const llvm::Regex &regex);
  /// Adds the choices one entry of `choices=` stands for, `name` or
  /// `name{options}`: a registered family of choices (plain, powersgd),
  /// else a registered scheme. False after an error.
  bool parseChoice(StringRef text, const PlanChoiceOptions &plan,
                   SmallVectorImpl<Choice> &allowed);
  /// Fails, with an error, where a choice cannot predict its cost.
  FailureOr<Decision> decide(const MachineProfile &profile, AllReduceOp op,
                             ArrayRef<Choice> allowed, int64_t worldSize);

  /// The one plain choice: allowed or not, what dynamic shapes and
  /// never= get.
  Choice plainChoice = makePlainPlanChoice();
};
} // namespace

/// A choice that compresses none of a bucket's tensors (PowerSGD on
/// biases) is plain in effect.
/// The name of the gradient `input` carries: across nodes, the one the
/// node's reduction took (never= and the plan's `where` name gradients on
/// both levels alike).
static std::string gradientName(Value input) {
  return describeValue(throughNodeReduction(input));
}

static bool plainInEffect(const std::pair<Choice, PlanCost> &entry) {
  return entry.second.compressesNothing && !entry.first->isPlain();
}

static std::string formatSeconds(double seconds) {
  if (seconds >= 1.0)
    return llvm::formatv("{0:F2} s", seconds).str();
  if (seconds >= 1e-3)
    return llvm::formatv("{0:F2} ms", seconds * 1e3).str();
  return llvm::formatv("{0:F1} us", seconds * 1e6).str();
}

bool DDPPlanPass::parseChoice(StringRef text, const PlanChoiceOptions &plan,
                              SmallVectorImpl<Choice> &allowed) {
  ModuleOp module = getOperation();
  auto fail = [&](const Twine &message) {
    emitPassError(module, getArgument())
        << "choices: '" << text << "'" << message;
    return false;
  };
  StringRef name = text.trim();
  // The options with single spaces between them, so that one choice
  // spelled two ways is one column ("topk{ ratio=0.001}").
  std::string options;
  if (size_t brace = name.find('{'); brace != StringRef::npos) {
    if (!name.ends_with("}"))
      return fail(": options go in braces at the end, as topk{ratio=0.001}");
    SmallVector<StringRef> words;
    llvm::SplitString(name.drop_front(brace + 1).drop_back(), words);
    options = llvm::join(words, " ");
    name = name.take_front(brace).rtrim();
  }
  if (std::optional<PlanChoiceFactory> family = lookupPlanChoices(name)) {
    std::string why;
    FailureOr<SmallVector<Choice>> made =
        (*family)(&getContext(), options, plan, why);
    if (failed(made))
      return fail(": " + why);
    llvm::append_range(allowed, *made);
    return true;
  }
  if (!lookupPlannableScheme(name)) {
    // choices={rank=2} reaches here as "rank=2": the option parser takes
    // the outer braces for its own.
    std::string hint;
    if (name.contains('='))
      hint = "; options go in braces after the choice's name, as "
             "powersgd{rank=2}";
    return fail(" is not one of ddp-plan's choices (" +
                llvm::join(getPlanChoiceNames(), ", ") +
                ") or a scheme with a cost model (" +
                llvm::join(getPlannableSchemeNames(), ", ") + ")" + hint);
  }
  FailureOr<std::unique_ptr<CompressionScheme>> scheme = makePlannableScheme(
      name, module, options, (getArgument() + ": choices").str());
  if (failed(scheme))
    return false;
  allowed.push_back(makeSchemePlanChoice(std::move(*scheme), name, options));
  return true;
}

bool DDPPlanPass::parseOptions(SmallVectorImpl<Choice> &allowed) {
  ModuleOp module = getOperation();
  auto fail = [&](const Twine &message) {
    emitPassError(module, getArgument()) << message;
    return false;
  };
  if (profile.empty())
    return fail("needs profile=PATH, a machine profile written by "
                "ddprt-calibrate (measured with mpirun, or --hand for a "
                "cluster you are not on)");
  SmallVector<unsigned> rankList(ranks.begin(), ranks.end());
  if (rankList.empty())
    rankList = {1, 2, 4};
  for (unsigned r : rankList)
    if (r == 0 || r > kMaxPlannedPowerSGDRank)
      return fail("ranks: " + Twine(r) +
                  " is not a PowerSGD rank (ranks are from 1 to 2147483647)");
  if (minRank == 0)
    return fail("min-rank=0: ranks are >= 1");
  SmallVector<std::string> choiceList(choices.begin(), choices.end());
  if (choiceList.empty())
    choiceList = {"plain", "fp16", "bf16", "powersgd", "powersgd+fp16"};
  PlanChoiceOptions plan;
  plan.ranks = rankList;
  plan.minRank = minRank;
  plan.minCompressionRate = minCompressionRate;
  for (const std::string &text : choiceList)
    if (!parseChoice(text, plan, allowed))
      return false;
  // Duplicates (choices=plain,plain) would print twice.
  SmallVector<Choice> unique;
  for (const Choice &c : allowed)
    if (llvm::none_of(unique,
                      [&](const Choice &u) { return u->name() == c->name(); }))
      unique.push_back(c);
  allowed.assign(unique.begin(), unique.end());
  if (world < 0)
    return fail(llvm::formatv("world={0}: a number of ranks >= 1, or 0 for "
                              "the profile's",
                              int64_t(world)));
  if (!(tolerance >= 0.0 && tolerance < 1.0))
    return fail("tolerance=" + formatNumber(tolerance) +
                ": a fraction in [0, 1)");
  std::string error;
  if (!never.empty() && !llvm::Regex(never).isValid(error))
    return fail("never='" + never +
                "' is not a valid regular expression: " + error);
  unsigned largest = 1;
  for (unsigned r : rankList)
    largest = std::max(largest, r);
  return succeeded(
      checkPowerSGDOptions(largest, minCompressionRate, /*startIter=*/0,
                           /*epsilon=*/0.0, bucketCapMb,
                           [&](const Twine &message) { fail(message); }));
}

std::pair<AllReduceOp, AllReduceOp>
DDPPlanPass::splitOffNever(AllReduceOp op, const llvm::Regex &regex) {
  SmallVector<unsigned> kept, matched;
  for (auto [i, input] : llvm::enumerate(op.getInputs()))
    (regex.match(gradientName(input)) ? matched : kept).push_back(i);
  if (matched.empty())
    return {nullptr, op};
  IRRewriter rewriter(op->getContext());
  rewriter.setInsertionPoint(op);
  auto pick = [&](ArrayRef<unsigned> indices) {
    SmallVector<Value> values;
    for (unsigned i : indices)
      values.push_back(op.getInputs()[i]);
    return values;
  };
  SmallVector<Value> results(op.getNumResults());
  auto plain =
      AllReduceOp::create(rewriter, plannedPlainLoc(op.getLoc()), op.getKind(),
                          pick(matched), CommRole::uncompressed, op.getGroup());
  op.emitRemark() << getArgument() << " sends "
                  << llvm::join(llvm::map_range(matched,
                                                [&](unsigned i) {
                                                  return gradientName(
                                                      op.getInputs()[i]);
                                                }),
                                ", ")
                  << " plain: never='" << never << "' matches";
  for (auto [k, i] : llvm::enumerate(matched))
    results[i] = plain.getResult(k);
  AllReduceOp rest;
  if (!kept.empty()) {
    rest = AllReduceOp::create(rewriter, op.getLoc(), op.getKind(), pick(kept),
                               op.getRole(), op.getGroup());
    for (auto [k, i] : llvm::enumerate(kept))
      results[i] = rest.getResult(k);
  }
  rewriter.replaceOp(op, results);
  return {plain, rest};
}

FailureOr<Decision> DDPPlanPass::decide(const MachineProfile &profile,
                                        AllReduceOp op,
                                        ArrayRef<Choice> allowed,
                                        int64_t worldSize) {
  Decision decision;
  BucketShape shape;
  for (Type type : op.getInputs().getTypes()) {
    auto tensor = cast<RankedTensorType>(type);
    if (!tensor.hasStaticShape()) {
      decision.choice = plainChoice;
      decision.reason = "a dynamic shape: its size is not known before the run";
      return decision;
    }
    shape.tensors.push_back(tensor);
  }
  for (const Choice &choice : allowed) {
    std::string why;
    FailureOr<PlanCost> cost = choice->predict(profile, shape, worldSize, why);
    if (failed(cost))
      return op.emitError() << getArgument() << ": cannot weigh '"
                            << choice->name() << "' for this bucket: " << why;
    decision.costs.push_back({choice, *cost});
  }
  // The fastest; a choice that compresses nothing is plain in effect and
  // only taken where plain is not allowed.
  const std::pair<Choice, PlanCost> *best = nullptr, *plainEntry = nullptr;
  for (const auto &entry : decision.costs) {
    if (entry.first->isPlain())
      plainEntry = &entry;
    if (plainInEffect(entry))
      continue;
    if (!best || entry.second.seconds < best->second.seconds)
      best = &entry;
  }
  if (!best) {
    // Only choices that compress nothing here (powersgd on biases):
    // plain in effect, which the rewrite gives.
    decision.choice = allowed.front();
    decision.reason = decision.choice->name() +
                      " compresses none of these tensors (the per-tensor "
                      "rule, min-compression-rate); they are sent plain";
    return decision;
  }
  decision.choice = best->first;
  if (allowed.size() == 1) {
    decision.reason = "the only choice allowed";
    return decision;
  }
  // The runner-up, for the reason.
  const std::pair<Choice, PlanCost> *second = nullptr;
  for (const auto &entry : decision.costs)
    if (&entry != best && !plainInEffect(entry))
      if (!second || entry.second.seconds < second->second.seconds)
        second = &entry;
  std::string next =
      second ? llvm::formatv("; next {0} {1}", second->first->name(),
                             formatSeconds(second->second.seconds))
                   .str()
             : std::string();
  if (!plainEntry) {
    decision.reason = llvm::formatv("fastest allowed ({0}){1}",
                                    formatSeconds(best->second.seconds), next)
                          .str();
    return decision;
  }
  double plainSeconds = plainEntry->second.seconds;
  if (best == plainEntry && !second) {
    decision.reason = "no allowed compression changes these tensors";
    return decision;
  }
  if (best == plainEntry) {
    // Plain is fastest: every compression costs more than it saves.
    const auto &cost = second->second;
    decision.reason =
        llvm::formatv("plain {0} is fastest: {1} would take {2} ({3} on the "
                      "link, {4} computing)",
                      formatSeconds(plainSeconds), second->first->name(),
                      formatSeconds(cost.seconds),
                      formatSeconds(cost.linkSeconds),
                      formatSeconds(cost.computeSeconds))
            .str();
    return decision;
  }
  double gain = 1.0 - best->second.seconds / plainSeconds;
  if (gain < tolerance) {
    decision.choice = plainEntry->first;
    decision.reason =
        llvm::formatv("{0} would save {1:F1}% of plain's {2}, under "
                      "tolerance={3}: not worth its error",
                      best->first->name(), gain * 100.0,
                      formatSeconds(plainSeconds), formatNumber(tolerance))
            .str();
    return decision;
  }
  decision.reason = llvm::formatv("{0:F2}x faster than plain ({1} vs {2}){3}",
                                  plainSeconds / best->second.seconds,
                                  formatSeconds(best->second.seconds),
                                  formatSeconds(plainSeconds), next)
                        .str();
  return decision;
}

void DDPPlanPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *context = &getContext();
  SmallVector<Choice> allowed;
  if (!parseOptions(allowed))
    return signalPassFailure();
  // Its plain buckets are pinned (role uncompressed) and its others may be
  // compressed already: a second plan would see only what is left.
  auto *dialect = context->getLoadedDialect<DDPDialect>();
  if (dialect->getPlanAttrHelper().isAttrPresent(module)) {
    emitPassError(module, getArgument())
        << "the module is planned already (it has 'ddp.plan'): plan the "
           "module as it was before ddp-plan or ddp-compress{plan=...}";
    return signalPassFailure();
  }
  std::string error;
  FailureOr<MachineProfile> loaded =
      MachineProfile::load(profile, kernels, error);
  if (failed(loaded)) {
    emitPassError(module, getArgument()) << error;
    return signalPassFailure();
  }
  const MachineProfile &machine = *loaded;
  bool computes =
      llvm::any_of(allowed, [](const Choice &c) { return !c->isPlain(); });
  if (computes && !machine.hasKernels()) {
    emitPassError(module, getArgument())
        << "the profile has no kernel times (a --hand profile): give "
           "kernels=PATH, a profile from ddprt-calibrate --kernels-only on "
           "the machine that computes, or choices=plain";
    return signalPassFailure();
  }
  int64_t worldSize = world > 0 ? int64_t(world) : machine.getWorldSize();

  // Buckets, as insert-powersgd makes them.
  if (failed(formGradientBuckets(module, bucketCapMb)))
    return signalPassFailure();

  SmallVector<AllReduceOp> buckets;
  module.walk([&](AllReduceOp op) {
    if (op.isCompressible() && op->getParentOfType<FunctionOpInterface>())
      buckets.push_back(op);
  });
  std::optional<llvm::Regex> neverRegex;
  if (!never.empty())
    neverRegex.emplace(never);

  Builder b(context);
  SmallVector<Attribute> entries;
  // Every choice a bucket was predicted under, in the order the planner
  // weighs them (the report's columns).
  llvm::SetVector<StringRef> choices;
  // What each bucket is sent as, in program order.
  SmallVector<std::pair<AllReduceOp, Choice>> decided;
  auto record = [&](AllReduceOp op, const Decision &decision) {
    SmallVector<NamedAttribute> predicted;
    // The profile's bounds keep predictions far below this; saturated all
    // the same rather than converted out of range.
    for (auto &[choice, cost] : decision.costs) {
      StringAttr name = b.getStringAttr(choice->name());
      choices.insert(name.getValue());
      predicted.push_back(NamedAttribute(
          name,
          b.getI64IntegerAttr(cost.seconds * 1e9 < 9e18
                                  ? int64_t(std::llround(cost.seconds * 1e9))
                                  : INT64_MAX)));
    }
    SmallVector<std::string> names;
    int64_t elements = 0;
    for (Value input : op.getInputs()) {
      names.push_back(gradientName(input));
      auto type = cast<RankedTensorType>(input.getType());
      // Saturated: the sum of a bucket's counts may not fit.
      if (type.hasStaticShape() &&
          llvm::AddOverflow(elements, type.getNumElements(), elements))
        elements = std::numeric_limits<int64_t>::max();
    }
    std::string where = names.size() <= 4
                            ? llvm::join(names, ",")
                            : names.front() + ",...," + names.back();
    auto function = op->getParentOfType<FunctionOpInterface>();
    entries.push_back(b.getDictionaryAttr({
        b.getNamedAttr("function", b.getStringAttr(function.getName())),
        b.getNamedAttr("tensors", b.getI64IntegerAttr(names.size())),
        b.getNamedAttr("where", b.getStringAttr(where)),
        b.getNamedAttr("elements", b.getI64IntegerAttr(elements)),
        b.getNamedAttr("choice", b.getStringAttr(decision.choice->name())),
        b.getNamedAttr("reason", b.getStringAttr(decision.reason)),
        b.getNamedAttr("predicted_ns", b.getDictionaryAttr(predicted)),
    }));
  };

  for (AllReduceOp op : buckets) {
    if (neverRegex) {
      // The split-off part is a bucket of its own, plain by the user's word.
      auto [plain, rest] = splitOffNever(op, *neverRegex);
      if (plain) {
        Decision byUser;
        byUser.choice = plainChoice;
        byUser.reason = "never='" + std::string(never) + "' matches";
        record(plain, byUser);
        ++numPlain;
      }
      op = rest;
      if (!op)
        continue;
    }
    FailureOr<Decision> decision = decide(machine, op, allowed, worldSize);
    if (failed(decision))
      return signalPassFailure();
    record(op, *decision);
    decided.push_back({op, decision->choice});
    ++(decision->choice->isPlain() ? numPlain : numOther);
  }

  // The annotations, for the stages that send each bucket its way.
  auto planned =
      context->getLoadedDialect<DDPDialect>()->getPlannedAttrHelper();
  for (auto &[op, choice] : decided) {
    if (choice->isPlain()) {
      op.setRole(CommRole::uncompressed);
      op->setLoc(plannedPlainLoc(op.getLoc()));
      continue;
    }
    planned.setAttr(op, choice->decision(context));
  }

  dialect->getPlanAttrHelper().setAttr(
      module,
      b.getDictionaryAttr({
          b.getNamedAttr("profile", b.getStringAttr(machine.getDescription())),
          b.getNamedAttr("world", b.getI64IntegerAttr(worldSize)),
          b.getNamedAttr("choices", b.getStrArrayAttr(choices.getArrayRef())),
          b.getNamedAttr("buckets", b.getArrayAttr(entries)),
      }));
}
