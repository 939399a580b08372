//===- InsertNarrowCompression.cpp - fp16/bf16 allreduces -----------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// PyTorch's fp16_compress_hook and bf16_compress_hook, as a rewrite: divide
// by the world size, cast to the narrow type, allreduce (sum) in that type,
// cast back. Dividing first keeps the sum of W ranks inside the narrow
// type's range. A `sum` allreduce is pre-scaled the same way and multiplied
// back by W after the cast. Also ddp-plan's fp16 and bf16 choices.
//
//===----------------------------------------------------------------------===//

#include "ddp/Conversion/ShardToDDP/ShardToDDP.h"
#include "ddp/Dialect/DDP/Transforms/CostModel.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Transforms.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_INSERTFP16COMPRESSION
#define GEN_PASS_DEF_INSERTBF16COMPRESSION
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

/// Only types wider than the narrow one are worth narrowing.
static std::string whyNotNarrowable(Type type, FloatType narrow) {
  std::string reason = whyNotCompressible(type);
  if (!reason.empty())
    return reason;
  Type element = cast<RankedTensorType>(type).getElementType();
  if (element.getIntOrFloatBitWidth() <= narrow.getWidth())
    return "it is already " + std::to_string(element.getIntOrFloatBitWidth()) +
           "-bit";
  return "";
}

/// Casts `inputs` to `narrow`, pre-scaled by 1/W, W the members of `group`
/// (fine-grained: ddp.scale then ddp.cast; ddp-fuse-kernels merges them).
/// The cast names the decision (`<"fp16">`, `<"bf16">`).
static SmallVector<Value> castDown(OpBuilder &builder, Location loc,
                                   ValueRange inputs, FloatType narrow,
                                   CommGroup group) {
  auto scaled =
      ScaleOp::create(builder, loc, inputs, inverseMembersScale(group));
  SmallVector<Type> narrowTypes;
  for (Type type : inputs.getTypes())
    narrowTypes.push_back(cast<RankedTensorType>(type).clone(narrow));
  auto cast = CastOp::create(
      builder, loc, narrowTypes, scaled.getResults(), WorldScaleAttr(),
      CompressionAttr::get(builder.getContext(),
                           getNarrowingSchemeName(narrow)));
  return cast.getResults();
}

/// Casts the reduced values back to `types`; a sum is scaled back by W.
static SmallVector<Value> castUp(OpBuilder &builder, Location loc,
                                 ValueRange reduced, TypeRange types,
                                 ReductionKind kind, CommGroup group) {
  auto cast = CastOp::create(builder, loc, types, reduced, WorldScaleAttr());
  if (kind == ReductionKind::mean)
    return cast.getResults();
  return ScaleOp::create(builder, loc, cast.getResults(), membersScale(group))
      .getResults();
}

/// True if some input is a float wider than `narrow`: only then is there
/// anything to do (narrow allreduces stay quietly).
static bool hasWideFloat(TypeRange types, FloatType narrow) {
  return llvm::any_of(types, [&](Type type) {
    auto element = dyn_cast<FloatType>(cast<ShapedType>(type).getElementType());
    return element && element.getWidth() > narrow.getWidth();
  });
}

namespace {
/// What the narrowing patterns share: the narrow type, the pass name for
/// remarks, and the count of tensors narrowed.
struct NarrowConfig {
  FloatType narrow;
  std::string passName;
  unsigned *count;
};

/// A synchronous allreduce: its narrowable tensors are split off (the
/// others stay a plain allreduce, with a remark) and sent narrow.
struct NarrowAllReduce : OpRewritePattern<AllReduceOp> {
  NarrowAllReduce(MLIRContext *context, const NarrowConfig &config)
      : OpRewritePattern(context), config(config) {}

  LogicalResult matchAndRewrite(AllReduceOp op,
                                PatternRewriter &rewriter) const override {
    FloatType narrow = config.narrow;
    // Within a node nothing crosses the network: the sum stays exact.
    if (op.getGroup() == CommGroup::node ||
        !hasWideFloat(op.getInputs().getTypes(), narrow))
      return failure();
    op = splitOffRejected(rewriter, op, config.passName, [&](Type type) {
      return whyNotNarrowable(type, narrow);
    });
    if (!op)
      return failure(); // nothing is narrowable; the op is as it was
    rewriter.setInsertionPoint(op);
    Location loc = op.getLoc();
    SmallVector<Value> down =
        castDown(rewriter, loc, op.getInputs(), narrow, op.getGroup());
    auto reduced = AllReduceOp::create(rewriter, loc, ReductionKind::sum, down,
                                       op.getRole(), op.getGroup());
    SmallVector<Value> up =
        castUp(rewriter, loc, reduced.getResults(), op.getResultTypes(),
               op.getKind(), op.getGroup());
    if (config.count)
      *config.count += op.getInputs().size();
    rewriter.replaceOp(op, up);
    return success();
  }

  NarrowConfig config;
};

/// A started allreduce and its wait: sent narrow as a whole, or left as it
/// is (with a remark) if one tensor cannot be. The pattern is rooted at the
/// wait, which comes last, so that a driver walking forward has visited
/// everything it changes.
struct NarrowAllReduceStart : OpRewritePattern<WaitOp> {
  NarrowAllReduceStart(MLIRContext *context, const NarrowConfig &config)
      : OpRewritePattern(context), config(config) {}

  LogicalResult matchAndRewrite(WaitOp wait,
                                PatternRewriter &rewriter) const override {
    auto op = wait.getRequest().getDefiningOp<AllReduceStartOp>();
    FloatType narrow = config.narrow;
    if (!op || op.getGroup() == CommGroup::node ||
        !hasWideFloat(op.getInputs().getTypes(), narrow))
      return failure();
    for (auto [i, type] : llvm::enumerate(op.getInputs().getTypes())) {
      std::string reason = whyNotNarrowable(type, narrow);
      if (reason.empty())
        continue;
      // A started allreduce is split only by its producer; leave it whole.
      op.emitRemark() << config.passName
                      << " leaves this allreduce_start as it is: "
                      << "tensor #" << i << " (" << type << ") " << reason;
      return failure();
    }
    rewriter.setInsertionPoint(op);
    Location loc = op.getLoc();
    SmallVector<Value> down =
        castDown(rewriter, loc, op.getInputs(), narrow, op.getGroup());
    auto start = AllReduceStartOp::create(rewriter, loc, ReductionKind::sum,
                                          down, op.getRole(), op.getGroup());
    rewriter.setInsertionPoint(wait);
    auto newWait = WaitOp::create(rewriter, wait.getLoc(), start.getRequest());
    SmallVector<Value> up =
        castUp(rewriter, wait.getLoc(), newWait.getResults(),
               wait.getResultTypes(), op.getKind(), op.getGroup());
    if (config.count)
      *config.count += op.getInputs().size();
    rewriter.replaceOp(wait, up);
    rewriter.eraseOp(op);
    return success();
  }

  NarrowConfig config;
};

/// Runs the patterns on one function: whole-grid shard.all_reduces become
/// ddp.allreduce first (convert-shard-to-ddp's patterns), so that they are
/// narrowed too. Fails on a shard.all_reduce over a sub-grid.
FailureOr<unsigned> narrowAllReduces(func::FuncOp function, FloatType narrow,
                                     StringRef passName) {
  MLIRContext *context = function.getContext();
  recordGradientNames(function);
  SymbolTableCollection symbols;
  if (failed(checkShardAllReduces(function, symbols)))
    return failure();
  RewritePatternSet shard(context);
  populateShardToDDPPatterns(shard, symbols);
  walkAndApplyPatterns(function, std::move(shard));
  unsigned count = 0;
  RewritePatternSet patterns(context);
  populateNarrowCompressionPatterns(patterns, narrow, passName, &count);
  walkAndApplyPatterns(function, std::move(patterns));
  return count;
}

/// The buckets of `function` ddp-plan planned as `narrow`, sent so;
/// everything else is left to its own stage.
FailureOr<unsigned> narrowPlannedBuckets(func::FuncOp function,
                                         FloatType narrow, StringRef passName) {
  SmallVector<Operation *> buckets;
  bool valid = true;
  for (auto [bucket, decision] :
       takePlannedBuckets(function, [&](CompressionAttr decision) {
         return decision.getScheme() == getNarrowingSchemeName(narrow);
       })) {
    if (decision.getOptions() && !decision.getOptions().empty()) {
      bucket.emitError() << "ddp.planned " << decision << ": "
                         << getNarrowingSchemeName(narrow)
                         << " takes no options";
      valid = false;
    } else if (!hasWideFloat(bucket.getInputs().getTypes(), narrow)) {
      // The patterns would leave it as it is: sent plain, against the plan.
      bucket.emitError() << "ddp.planned " << decision
                         << ": no tensor of this bucket is a float wider "
                            "than 16 bits";
      valid = false;
    }
    buckets.push_back(bucket);
  }
  if (!valid)
    return failure();
  unsigned count = 0;
  narrowCollectives(buckets, narrow, passName, &count);
  return count;
}

/// The pass of `narrow`: every allreduce of the function, or with
/// `planned` the buckets ddp-plan planned so.
FailureOr<unsigned> runNarrowPass(func::FuncOp function, FloatType narrow,
                                  bool planned, StringRef passName) {
  if (planned)
    return narrowPlannedBuckets(function, narrow, passName);
  if (failed(refusePlannedBuckets(function, passName)))
    return failure();
  return narrowAllReduces(function, narrow, passName);
}

struct InsertFP16CompressionPass
    : public ddp::impl::InsertFP16CompressionBase<InsertFP16CompressionPass> {
  using Base::Base;
  void runOnOperation() override {
    FailureOr<unsigned> count =
        runNarrowPass(getOperation(), Float16Type::get(&getContext()), planned,
                      getArgument());
    if (failed(count))
      return signalPassFailure();
    numCompressed += *count;
  }
};

struct InsertBF16CompressionPass
    : public ddp::impl::InsertBF16CompressionBase<InsertBF16CompressionPass> {
  using Base::Base;
  void runOnOperation() override {
    FailureOr<unsigned> count =
        runNarrowPass(getOperation(), BFloat16Type::get(&getContext()), planned,
                      getArgument());
    if (failed(count))
      return signalPassFailure();
    numCompressed += *count;
  }
};
} // namespace

void mlir::ddp::populateNarrowCompressionPatterns(RewritePatternSet &patterns,
                                                  FloatType narrow,
                                                  StringRef passName,
                                                  unsigned *count) {
  NarrowConfig config{narrow, passName.str(), count};
  patterns.add<NarrowAllReduce, NarrowAllReduceStart>(patterns.getContext(),
                                                      config);
}

void mlir::ddp::narrowCollectives(ArrayRef<Operation *> ops, FloatType narrow,
                                  StringRef passName, unsigned *count) {
  if (ops.empty())
    return;
  RewritePatternSet patterns(narrow.getContext());
  populateNarrowCompressionPatterns(patterns, narrow, passName, count);
  GreedyRewriteConfig config;
  config.setStrictness(GreedyRewriteStrictness::ExistingOps);
  (void)applyOpPatternsGreedily(ops, std::move(patterns), config);
}

namespace {
/// ddp-plan's fp16 and bf16: the bucket divided by W and cast down, sent,
/// cast back.
class NarrowPlanChoice : public PlanChoice {
public:
  explicit NarrowPlanChoice(FloatType narrow) : narrow(narrow) {}

  std::string name() const override {
    return getNarrowingSchemeName(narrow).str();
  }

  FailureOr<PlanCost> predict(const MachineProfile &profile,
                              const BucketShape &bucket, int64_t world,
                              std::string &) const override {
    if (bucket.tensors.empty())
      return PlanCost();
    auto element = dyn_cast<FloatType>(bucket.tensors.front().getElementType());
    if (!element || element.getWidth() <= 16)
      return predictPlain(profile, bucket, world, /*compressesNothing=*/true);
    // Two passes over the bucket (the narrowing cast's rate for both).
    double elements = 0.0;
    SmallVector<double> narrowBytes;
    for (RankedTensorType type : bucket.tensors) {
      elements += double(type.getNumElements());
      narrowBytes.push_back(double(type.getNumElements()) * 2.0);
    }
    PlanCost cost;
    cost.computeSeconds = 2.0 * profile.narrowCastSeconds(narrow, elements);
    cost.linkSeconds =
        profile.bucketAllreduceSeconds(narrow, narrowBytes, world);
    cost.seconds = cost.computeSeconds + cost.linkSeconds;
    cost.bytes = elements * 2.0;
    return cost;
  }

  CompressionAttr decision(MLIRContext *context) const override {
    return CompressionAttr::get(context, getNarrowingSchemeName(narrow));
  }

private:
  FloatType narrow;
};
} // namespace

std::shared_ptr<PlanChoice> mlir::ddp::makeNarrowPlanChoice(FloatType narrow) {
  return std::make_shared<NarrowPlanChoice>(narrow);
}
