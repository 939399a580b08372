//===- PowerSGDPlan.cpp - PowerSGD as one of ddp-plan's choices -----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// PowerSGD at one rank, its collectives perhaps sent in fp16, as a
// PlanChoice: its cost model (docs/cost-model.md) and its rewrite through
// the decision insert-powersgd honours in a planned module.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/PowerSGD.h"
#include "ddp/Dialect/DDP/Transforms/Transforms.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::ddp;

namespace {
class PowerSGDPlanChoice : public PlanChoice {
public:
  PowerSGDPlanChoice(unsigned rank, FloatType narrow, double minCompressionRate)
      : rank(rank), narrow(narrow), minCompressionRate(minCompressionRate) {}

  std::string name() const override {
    return "powersgd-r" + std::to_string(rank) + (narrow ? "+fp16" : "");
  }

  FailureOr<PlanCost> predict(const MachineProfile &profile,
                              const BucketShape &bucket, int64_t world,
                              std::string &why) const override;

  CompressionAttr decision(MLIRContext *context) const override {
    Builder b(context);
    SmallVector<NamedAttribute> options = {
        b.getNamedAttr("rank", b.getI64IntegerAttr(rank))};
    if (narrow)
      options.push_back(b.getNamedAttr("narrow", TypeAttr::get(narrow)));
    return CompressionAttr::get(context, kPowerSGDDecision,
                                b.getDictionaryAttr(options));
  }

private:
  unsigned rank;
  FloatType narrow;
  double minCompressionRate;
};
} // namespace

// insert-powersgd, layerwise: PyTorch's per-tensor rule on the matrix view
// shape[0] x prod(shape[1:]), and its order: the uncompressed tensors'
// allreduce is started first and overlaps the projection; P's allreduce
// waits for both (one link), Q's for the orthogonalization and the
// backprojection.
FailureOr<PlanCost> PowerSGDPlanChoice::predict(const MachineProfile &profile,
                                                const BucketShape &bucket,
                                                int64_t world,
                                                std::string &) const {
  if (bucket.tensors.empty())
    return PlanCost();
  Type element = bucket.tensors.front().getElementType();
  double elementBytes = double(element.getIntOrFloatBitWidth()) / 8.0;
  SmallVector<double> uncompressedList, pList, qList;
  double project = 0.0, orthogonalize = 0.0, backproject = 0.0,
         reconstruct = 0.0;
  bool any = false;
  for (RankedTensorType type : bucket.tensors) {
    bool compressible = isa<FloatType>(element) && type.getRank() >= 1 &&
                        type.getNumElements() > 0;
    int64_t n = compressible ? type.getDimSize(0) : 0;
    int64_t m = compressible ? type.getNumElements() / n : 0;
    int64_t r = std::min<int64_t>({n, m, int64_t(rank)});
    if (!compressible ||
        !((double(n) + double(m)) * double(r) * minCompressionRate <
          double(n) * double(m))) {
      uncompressedList.push_back(bytesAsDouble(type));
      continue;
    }
    any = true;
    pList.push_back(double(n) * double(r) * elementBytes);
    qList.push_back(double(m) * double(r) * elementBytes);
    project += profile.kernelSeconds("project", n, m, r);
    orthogonalize += profile.kernelSeconds("orthogonalize", n, m, r);
    backproject += profile.kernelSeconds("backproject", n, m, r);
    reconstruct += profile.kernelSeconds("reconstruct", n, m, r);
  }
  if (!any)
    return predictPlain(profile, bucket, world, /*compressesNothing=*/true);
  // With fp16 every collective of the bucket travels in f16 (half the
  // bytes), each cast down and back: P and Q are small, the uncompressed
  // tensors are cast as fp16's buckets are.
  Type wire = element;
  double casts = 0.0;
  auto floatType = dyn_cast<FloatType>(element);
  if (narrow && floatType && floatType.getWidth() > 16) {
    wire = narrow;
    double narrowed = 0.0;
    for (ArrayRef<double> list :
         {ArrayRef<double>(uncompressedList), ArrayRef<double>(pList),
          ArrayRef<double>(qList)})
      for (double b : list)
        narrowed += b / elementBytes;
    casts = 2.0 * profile.narrowCastSeconds(narrow, narrowed);
    double ratio = 2.0 / elementBytes;
    for (SmallVector<double> *list : {&uncompressedList, &pList, &qList})
      for (double &b : *list)
        b *= ratio;
  }
  double uncompressed =
      profile.bucketAllreduceSeconds(wire, uncompressedList, world);
  double p = profile.bucketAllreduceSeconds(wire, pList, world);
  double q = profile.bucketAllreduceSeconds(wire, qList, world);
  PlanCost cost;
  cost.linkSeconds = uncompressed + p + q;
  cost.computeSeconds =
      project + orthogonalize + backproject + reconstruct + casts;
  cost.seconds = std::max(uncompressed, project) + p + orthogonalize +
                 backproject + q + reconstruct + casts;
  for (ArrayRef<double> list :
       {ArrayRef<double>(uncompressedList), ArrayRef<double>(pList),
        ArrayRef<double>(qList)})
    for (double b : list)
      cost.bytes += b;
  return cost;
}

std::shared_ptr<PlanChoice>
mlir::ddp::makePowerSGDPlanChoice(unsigned rank, FloatType narrow,
                                  double minCompressionRate) {
  return std::make_shared<PowerSGDPlanChoice>(rank, narrow, minCompressionRate);
}

FailureOr<SmallVector<std::shared_ptr<PlanChoice>>>
mlir::ddp::makePowerSGDPlanChoices(StringRef options,
                                   const PlanChoiceOptions &plan,
                                   FloatType narrow, std::string &why) {
  SmallVector<std::shared_ptr<PlanChoice>> choices;
  if (!options.empty()) {
    unsigned rank = 0;
    StringRef value = options.trim();
    if (!value.consume_front("rank=") || value.getAsInteger(10, rank) ||
        rank == 0 || rank > kMaxPlannedPowerSGDRank) {
      why = "PowerSGD's option is rank=R, one rank from 1 to 2147483647 "
            "(ddp-plan's ranks= gives several)";
      return failure();
    }
    if (rank < plan.minRank) {
      why = llvm::formatv("rank {0} is below min-rank={1}", rank, plan.minRank)
                .str();
      return failure();
    }
    choices.push_back(
        makePowerSGDPlanChoice(rank, narrow, plan.minCompressionRate));
    return choices;
  }
  for (unsigned r : plan.ranks)
    if (r >= plan.minRank)
      choices.push_back(
          makePowerSGDPlanChoice(r, narrow, plan.minCompressionRate));
  if (choices.empty()) {
    why = llvm::formatv("no rank in ranks={0} is at least min-rank={1}: "
                        "PowerSGD has nothing to try",
                        llvm::join(llvm::map_range(plan.ranks,
                                                   [](unsigned r) {
                                                     return std::to_string(r);
                                                   }),
                                   ","),
                        plan.minRank)
              .str();
    return failure();
  }
  return choices;
}

FailureOr<std::pair<unsigned, FloatType>>
mlir::ddp::parsePowerSGDDecision(AllReduceOp bucket, CompressionAttr decision) {
  DictionaryAttr options = decision.getOptions();
  auto rank = options ? options.getAs<IntegerAttr>("rank") : IntegerAttr();
  auto narrow = options ? options.getAs<TypeAttr>("narrow") : TypeAttr();
  if (!rank || !rank.getType().isSignlessInteger(64) || rank.getInt() < 1 ||
      rank.getInt() > int64_t(kMaxPlannedPowerSGDRank) ||
      (options.get("narrow") &&
       !(narrow && isa<Float16Type, BFloat16Type>(narrow.getValue()))) ||
      options.size() != 1u + bool(narrow)) {
    bucket.emitError() << "ddp.planned " << decision
                       << ": a PowerSGD decision is {rank = R : i64} (R >= "
                          "1), with narrow = f16 or bf16 for its collectives";
    return failure();
  }
  return std::make_pair(unsigned(rank.getInt()),
                        narrow ? cast<FloatType>(narrow.getValue())
                               : FloatType());
}
