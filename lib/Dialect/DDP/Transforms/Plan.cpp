//===- Plan.cpp - choose how each bucket is sent, from a profile ----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// ddp-plan: for each gradient bucket, the predicted time of every allowed
// way of sending it (CostModel.h), the fastest taken, and the bucket
// rewritten the way that choice sends it, and nothing else: plain buckets
// are marked uncompressed, fp16/bf16 ones go through the narrowing
// patterns, PowerSGD ones through PowerSGDRewriter at their own rank (and
// their collectives through the narrowing patterns for "+fp16").
// The predictions and reasons stay in the module's `ddp.plan` attribute for
// the compression report.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/BucketCompression.h"
#include "ddp/Dialect/DDP/Transforms/CostModel.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/PowerSGD.h"
#include "ddp/Dialect/DDP/Transforms/Transforms.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
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
/// One bucket's decision.
struct Decision {
  PlanChoice choice;
  std::string reason;
  /// Every choice evaluated, in the order of the allowed list.
  SmallVector<std::pair<PlanChoice, PlanCost>> costs;
};

struct DDPPlanPass : public PassWithOptionNames<ddp::impl::DDPPlanBase<DDPPlanPass>> {
  using Base::Base;
  void runOnOperation() override;

protected:
  ArrayRef<OptionAlias> getOptionAliases() const override {
    return powerSGDOptionAliases();
  }
  const llvm::cl::Option *getAnyOption() const override { return &profile; }

private:
  /// Parses and checks the options into `allowed`; false after an error.
  bool parseOptions(SmallVectorImpl<PlanChoice> &allowed);
  /// Splits the inputs of `op` whose names match `never` into a plain
  /// allreduce of their own; returns it (null if nothing matched) and what
  /// is left to plan (null if nothing is).
  std::pair<AllReduceOp, AllReduceOp> splitOffNever(AllReduceOp op,
                                                    const llvm::Regex &regex);
  /// A choice of a registered scheme, `name` or `name{options}`; nothing
  /// after an error.
  std::optional<PlanChoice> parseSchemeChoice(StringRef text);
  /// Fails, with an error, where a scheme cannot predict its cost.
  FailureOr<Decision> decide(const MachineProfile &profile, AllReduceOp op,
                             ArrayRef<PlanChoice> allowed, int64_t worldSize);
};
} // namespace

/// Sends `ops` (allreduces, and waits of started ones) in `narrow`, as
/// insert-fp16/bf16-compression would, touching no other op.
static void narrowOps(ArrayRef<Operation *> ops, FloatType narrow,
                      StringRef passName) {
  if (ops.empty())
    return;
  RewritePatternSet patterns(narrow.getContext());
  populateNarrowCompressionPatterns(patterns, narrow, passName);
  GreedyRewriteConfig config;
  config.setStrictness(GreedyRewriteStrictness::ExistingOps);
  (void)applyOpPatternsGreedily(ops, std::move(patterns), config);
}

/// A choice that compresses none of a bucket's tensors (PowerSGD on
/// biases) is plain in effect.
static bool plainInEffect(const std::pair<PlanChoice, PlanCost> &entry) {
  return entry.second.compressesNothing &&
         entry.first.kind != PlanChoice::Kind::plain;
}

static std::string formatSeconds(double seconds) {
  if (seconds >= 1.0)
    return llvm::formatv("{0:F2} s", seconds).str();
  if (seconds >= 1e-3)
    return llvm::formatv("{0:F2} ms", seconds * 1e3).str();
  return llvm::formatv("{0:F1} us", seconds * 1e6).str();
}

std::optional<PlanChoice> DDPPlanPass::parseSchemeChoice(StringRef text) {
  ModuleOp module = getOperation();
  StringRef name = text, options;
  if (size_t brace = text.find('{'); brace != StringRef::npos) {
    if (!text.ends_with("}")) {
      emitPassError(module, getArgument())
          << "choices: '" << text
          << "': a scheme's options go in braces at the end, as "
             "topk{ratio=0.001}";
      return std::nullopt;
    }
    name = text.take_front(brace);
    options = text.drop_front(brace + 1).drop_back();
  }
  std::optional<SchemeFactory> factory = lookupPlannableScheme(name);
  if (!factory) {
    emitPassError(module, getArgument())
        << "choices: '" << text
        << "' is not one of plain, fp16, bf16, powersgd, powersgd+fp16 "
           "or a scheme with a cost model ("
        << llvm::join(getPlannableSchemeNames(), ", ") << ")";
    return std::nullopt;
  }
  FailureOr<std::unique_ptr<CompressionScheme>> scheme =
      (*factory)(module, options);
  if (failed(scheme))
    return std::nullopt;
  PlanChoice choice;
  choice.kind = PlanChoice::Kind::scheme;
  choice.scheme = std::move(*scheme);
  choice.spelling = text.str();
  return choice;
}

bool DDPPlanPass::parseOptions(SmallVectorImpl<PlanChoice> &allowed) {
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
    if (r == 0)
      return fail("ranks: 0 is not a PowerSGD rank (ranks are >= 1)");
  if (minRank == 0)
    return fail("min-rank=0: ranks are >= 1");
  SmallVector<std::string> choiceList(choices.begin(), choices.end());
  if (choiceList.empty())
    choiceList = {"plain", "fp16", "bf16", "powersgd", "powersgd+fp16"};
  for (const std::string &name : choiceList) {
    if (name == "plain")
      allowed.push_back({PlanChoice::Kind::plain, 0});
    else if (name == "fp16")
      allowed.push_back({PlanChoice::Kind::fp16, 0});
    else if (name == "bf16")
      allowed.push_back({PlanChoice::Kind::bf16, 0});
    else if (name == "powersgd" || name == "powersgd+fp16") {
      auto kind = name == "powersgd" ? PlanChoice::Kind::powersgd
                                     : PlanChoice::Kind::powersgdFP16;
      unsigned before = allowed.size();
      for (unsigned r : rankList)
        if (r >= minRank)
          allowed.push_back({kind, r});
      if (allowed.size() == before)
        return fail(llvm::formatv(
            "no rank in ranks={0} is at least "
            "min-rank={1}: PowerSGD has nothing to try",
            llvm::join(
                llvm::map_range(rankList,
                                [](unsigned r) { return std::to_string(r); }),
                ","),
            unsigned(minRank)));
    } else if (std::optional<PlanChoice> scheme = parseSchemeChoice(name)) {
      allowed.push_back(std::move(*scheme));
    } else {
      return false;
    }
  }
  // Duplicates (choices=plain,plain) would print twice.
  SmallVector<PlanChoice> unique;
  for (const PlanChoice &c : allowed)
    if (llvm::none_of(unique, [&](const PlanChoice &u) {
          return u.kind == c.kind && u.rank == c.rank &&
                 u.spelling == c.spelling;
        }))
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
  for (const PlanChoice &c : allowed)
    largest = std::max(largest, c.rank);
  return succeeded(checkPowerSGDOptions(
      largest, minCompressionRate, startIter, orthogonalizationEpsilon,
      bucketCapMb, [&](const Twine &message) { fail(message); }));
}

std::pair<AllReduceOp, AllReduceOp>
DDPPlanPass::splitOffNever(AllReduceOp op, const llvm::Regex &regex) {
  SmallVector<unsigned> kept, matched;
  for (auto [i, input] : llvm::enumerate(op.getInputs()))
    (regex.match(describeValue(input)) ? matched : kept).push_back(i);
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
  auto plain = AllReduceOp::create(
      rewriter, plannedPlainLoc(op.getLoc()), op.getKind(),
      pick(matched), CommRole::uncompressed);
  op.emitRemark() << getArgument() << " sends "
                  << llvm::join(llvm::map_range(matched,
                                                [&](unsigned i) {
                                                  return describeValue(
                                                      op.getInputs()[i]);
                                                }),
                                ", ")
                  << " plain: never='" << never << "' matches";
  for (auto [k, i] : llvm::enumerate(matched))
    results[i] = plain.getResult(k);
  AllReduceOp rest;
  if (!kept.empty()) {
    rest = AllReduceOp::create(rewriter, op.getLoc(), op.getKind(), pick(kept),
                               op.getRole());
    for (auto [k, i] : llvm::enumerate(kept))
      results[i] = rest.getResult(k);
  }
  rewriter.replaceOp(op, results);
  return {plain, rest};
}

FailureOr<Decision> DDPPlanPass::decide(const MachineProfile &profile,
                                        AllReduceOp op,
                                        ArrayRef<PlanChoice> allowed,
                                        int64_t worldSize) {
  Decision decision;
  BucketShape shape;
  for (Type type : op.getInputs().getTypes()) {
    auto tensor = cast<RankedTensorType>(type);
    if (!tensor.hasStaticShape()) {
      decision.choice = {PlanChoice::Kind::plain, 0};
      decision.reason = "a dynamic shape: its size is not known before the run";
      return decision;
    }
    shape.tensors.push_back(tensor);
  }
  for (const PlanChoice &choice : allowed) {
    if (choice.kind != PlanChoice::Kind::scheme) {
      decision.costs.push_back(
          {choice, predictBucket(profile, shape, choice, worldSize,
                                 minCompressionRate)});
      continue;
    }
    std::string why;
    FailureOr<PlanCost> cost =
        choice.scheme->predict(profile, shape, worldSize, why);
    if (failed(cost))
      return op.emitError() << getArgument() << ": cannot weigh '"
                            << choice.name() << "' for this bucket: " << why;
    decision.costs.push_back({choice, *cost});
  }
  // The fastest; a choice that compresses nothing is plain in effect and
  // only taken where plain is not allowed.
  const std::pair<PlanChoice, PlanCost> *best = nullptr, *plain = nullptr;
  for (const auto &entry : decision.costs) {
    if (entry.first.kind == PlanChoice::Kind::plain)
      plain = &entry;
    if (plainInEffect(entry))
      continue;
    if (!best || entry.second.seconds < best->second.seconds)
      best = &entry;
  }
  if (!best) {
    // Only choices that compress nothing here (powersgd on biases):
    // plain in effect, which the rewrite gives.
    decision.choice = allowed.front();
    decision.reason = decision.choice.name() +
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
  const std::pair<PlanChoice, PlanCost> *second = nullptr;
  for (const auto &entry : decision.costs)
    if (&entry != best && !plainInEffect(entry))
      if (!second || entry.second.seconds < second->second.seconds)
        second = &entry;
  std::string next = second
                         ? llvm::formatv("; next {0} {1}", second->first.name(),
                                         formatSeconds(second->second.seconds))
                               .str()
                         : std::string();
  if (!plain) {
    decision.reason = llvm::formatv("fastest allowed ({0}){1}",
                                    formatSeconds(best->second.seconds), next)
                          .str();
    return decision;
  }
  double plainSeconds = plain->second.seconds;
  if (best == plain && !second) {
    decision.reason = "no allowed compression changes these tensors";
    return decision;
  }
  if (best == plain) {
    // Plain is fastest: every compression costs more than it saves.
    const auto &cost = second->second;
    decision.reason =
        llvm::formatv("plain {0} is fastest: {1} would take {2} ({3} on the "
                      "link, {4} computing)",
                      formatSeconds(plainSeconds), second->first.name(),
                      formatSeconds(cost.seconds),
                      formatSeconds(cost.linkSeconds),
                      formatSeconds(cost.computeSeconds))
            .str();
    return decision;
  }
  double gain = 1.0 - best->second.seconds / plainSeconds;
  if (gain < tolerance) {
    decision.choice = plain->first;
    decision.reason =
        llvm::formatv("{0} would save {1:F1}% of plain's {2}, under "
                      "tolerance={3}: not worth its error",
                      best->first.name(), gain * 100.0,
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
  SmallVector<PlanChoice> allowed;
  if (!parseOptions(allowed))
    return signalPassFailure();
  std::string error;
  FailureOr<MachineProfile> loaded =
      MachineProfile::load(profile, kernels, error);
  if (failed(loaded)) {
    emitPassError(module, getArgument()) << error;
    return signalPassFailure();
  }
  const MachineProfile &machine = *loaded;
  bool computes = llvm::any_of(allowed, [](const PlanChoice &c) {
    return c.kind != PlanChoice::Kind::plain;
  });
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
    if (op.getRole() == CommRole::gradient &&
        op->getParentOfType<FunctionOpInterface>())
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
  SmallVector<std::pair<AllReduceOp, PlanChoice>> toPowerSGD;
  llvm::MapVector<CompressionScheme *, SmallVector<AllReduceOp>> toScheme;
  SmallVector<Operation *> toFP16, toBF16;
  auto record = [&](AllReduceOp op, const Decision &decision) {
    SmallVector<NamedAttribute> predicted;
    // The profile's bounds keep predictions far below this; saturated all
    // the same rather than converted out of range.
    for (auto &[choice, cost] : decision.costs) {
      StringAttr name = b.getStringAttr(choice.name());
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
      names.push_back(describeValue(input));
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
        b.getNamedAttr("choice", b.getStringAttr(decision.choice.name())),
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
        byUser.choice = {PlanChoice::Kind::plain, 0};
        byUser.reason = "never='" + std::string(never) + "' matches";
        record(plain, byUser);
        ++numPlain;
      }
      op = rest;
      if (!op)
        continue;
    }
    FailureOr<Decision> decided = decide(machine, op, allowed, worldSize);
    if (failed(decided))
      return signalPassFailure();
    Decision &decision = *decided;
    record(op, decision);
    switch (decision.choice.kind) {
    case PlanChoice::Kind::plain:
      op.setRole(CommRole::uncompressed);
      op->setLoc(plannedPlainLoc(op.getLoc()));
      ++numPlain;
      break;
    case PlanChoice::Kind::fp16:
    case PlanChoice::Kind::bf16:
      (decision.choice.kind == PlanChoice::Kind::fp16 ? toFP16 : toBF16)
          .push_back(op);
      ++numNarrow;
      break;
    case PlanChoice::Kind::powersgd:
    case PlanChoice::Kind::powersgdFP16:
      toPowerSGD.push_back({op, decision.choice});
      ++numPowerSGD;
      break;
    case PlanChoice::Kind::scheme:
      toScheme[decision.choice.scheme.get()].push_back(op);
      ++numScheme;
      break;
    }
  }

  // The rewrites, each restricted to its buckets.
  narrowOps(toFP16, Float16Type::get(context), getArgument());
  narrowOps(toBF16, BFloat16Type::get(context), getArgument());
  for (auto &[scheme, ops] : toScheme)
    if (failed(applyCompressionScheme(ops, *scheme, getArgument())))
      return signalPassFailure();
  // PowerSGD, each bucket at its rank; the collectives of a "+fp16"
  // bucket are sent narrow, as insert-fp16-compression would send them.
  InsertPowerSGDOptions options;
#define COPY_OPTION(name) options.name = name;
  DDP_POWERSGD_SHARED_OPTIONS(COPY_OPTION)
#undef COPY_OPTION
  PowerSGDRewriter powersgd(module, options, getArgument());
  IRRewriter rewriter(context);
  for (auto [op, choice] : toPowerSGD) {
    PowerSGDRewrite made = powersgd.rewrite(rewriter, op, choice.rank);
    if (choice.kind == PlanChoice::Kind::powersgdFP16)
      narrowOps(made.collectives, Float16Type::get(context), getArgument());
  }

  context->getLoadedDialect<DDPDialect>()->getPlanAttrHelper().setAttr(
      module,
      b.getDictionaryAttr({
          b.getNamedAttr("profile", b.getStringAttr(machine.getDescription())),
          b.getNamedAttr("world", b.getI64IntegerAttr(worldSize)),
          b.getNamedAttr("choices", b.getStrArrayAttr(choices.getArrayRef())),
          b.getNamedAttr("buckets", b.getArrayAttr(entries)),
      }));
}
