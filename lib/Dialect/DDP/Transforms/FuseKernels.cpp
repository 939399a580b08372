//===- FuseKernels.cpp - fuse ddp steps into the runtime's kernels --------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Two rewrites, in order:
//  1. producer/consumer fusion, per tensor:
//       project(add_residual(G, E), Q)       -> project_residual(G, E, Q)
//       backproject(add_residual(G, E), P)   -> backproject_residual(G, E, P)
//       update_residual(add_residual(G, E), reconstruct(P, Q))
//                                            -> reconstruct_residual(P, Q, G,
//                                            E)
//       cast(scale(X)), scale(cast(X))       -> cast scaled by
//     so M = G + E and M_hat are never stored on their own;
//  2. multi-tensor merging: ops of one kind and configuration in a block
//     become one op (one kernel launch for the whole bucket).
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPFUSEKERNELS
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

/// If every value of `values` is a result of one op of type OpTy, returns
/// that op and the result index of each value.
template <typename OpTy>
static std::optional<std::pair<OpTy, SmallVector<unsigned>>>
commonProducer(ValueRange values) {
  OpTy producer;
  SmallVector<unsigned> indices;
  for (Value value : values) {
    auto op = value.getDefiningOp<OpTy>();
    if (!op || (producer && op != producer))
      return std::nullopt;
    producer = op;
    indices.push_back(cast<OpResult>(value).getResultNumber());
  }
  if (!producer)
    return std::nullopt;
  return std::make_pair(producer, indices);
}

/// The inputs and residuals of the add_residual results `matrices`, if all
/// come from one add_residual.
static std::optional<std::pair<SmallVector<Value>, SmallVector<Value>>>
splitResidualSums(ValueRange matrices) {
  auto producer = commonProducer<AddResidualOp>(matrices);
  if (!producer)
    return std::nullopt;
  auto [add, indices] = *producer;
  SmallVector<Value> inputs, residuals;
  for (unsigned i : indices) {
    inputs.push_back(add.getInputs()[i]);
    residuals.push_back(add.getResiduals()[i]);
  }
  return std::make_pair(inputs, residuals);
}

/// A producer the fusion left without uses (its values now come from the
/// fused op) goes; one that still has other users stays.
static void eraseIfDead(RewriterBase &rewriter, Operation *producer) {
  if (producer && producer->use_empty())
    rewriter.eraseOp(producer);
}

namespace {
/// A fusion pattern; each rewrite counts one fused producer/consumer pair.
template <typename OpTy> struct FusionPattern : OpRewritePattern<OpTy> {
  FusionPattern(MLIRContext *context, unsigned &fused)
      : OpRewritePattern<OpTy>(context), fused(fused) {}
  unsigned &fused;
};

/// project / backproject of G + E -> the *_residual form.
template <typename OpTy, typename FusedOpTy>
struct FuseResidualIntoProjection : FusionPattern<OpTy> {
  using FusionPattern<OpTy>::FusionPattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    auto split = splitResidualSums(op.getMatrices());
    if (!split)
      return failure();
    Operation *sum = op.getMatrices().front().getDefiningOp();
    rewriter.replaceOpWithNewOp<FusedOpTy>(op, split->first, split->second,
                                           op.getFactors(), op.getSchemeAttr());
    eraseIfDead(rewriter, sum);
    ++this->fused;
    return success();
  }
};

/// update_residual(G + E, reconstruct(P, Q)) -> reconstruct_residual.
struct FuseReconstructResidual : FusionPattern<UpdateResidualOp> {
  FuseReconstructResidual(MLIRContext *context, unsigned &fused,
                          DominanceInfo &dominance)
      : FusionPattern(context, fused), dominance(dominance) {}

  LogicalResult matchAndRewrite(UpdateResidualOp op,
                                PatternRewriter &rewriter) const override {
    auto split = splitResidualSums(op.getInputs());
    auto producer = commonProducer<ReconstructOp>(op.getReconstructions());
    if (!split || !producer)
      return failure();
    auto [reconstruct, indices] = *producer;
    // The fused op replaces the reconstruct op: it must produce all its
    // results, in order, and G and E must be available there.
    if (reconstruct.getNumResults() != indices.size() ||
        !llvm::equal(indices, llvm::seq<unsigned>(0, indices.size())))
      return failure();
    for (Value value : llvm::concat<Value>(split->first, split->second))
      if (!dominance.properlyDominates(value, reconstruct))
        return failure();
    rewriter.setInsertionPoint(reconstruct);
    auto fused = ReconstructResidualOp::create(
        rewriter, reconstruct.getLoc(), reconstruct.getPs(),
        reconstruct.getQs(), split->first, split->second);
    Operation *sum = op.getInputs().front().getDefiningOp();
    rewriter.replaceOp(reconstruct, fused.getReconstructions());
    rewriter.replaceOp(op, fused.getNewResiduals());
    eraseIfDead(rewriter, sum);
    ++this->fused;
    return success();
  }

  DominanceInfo &dominance;
};

/// cast(scale(X)) -> cast X scaled by.
struct FuseScaleIntoCast : FusionPattern<CastOp> {
  using FusionPattern::FusionPattern;
  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getFactor())
      return failure();
    auto producer = commonProducer<ScaleOp>(op.getInputs());
    if (!producer)
      return failure();
    auto [scale, indices] = *producer;
    SmallVector<Value> inputs;
    for (unsigned i : indices)
      inputs.push_back(scale.getInputs()[i]);
    rewriter.replaceOpWithNewOp<CastOp>(op, op.getResultTypes(), inputs,
                                        scale.getFactorAttr(),
                                        op.getSchemeAttr());
    eraseIfDead(rewriter, scale);
    ++fused;
    return success();
  }
};

/// scale(cast(X)) -> cast X scaled by.
struct FuseCastIntoScale : FusionPattern<ScaleOp> {
  using FusionPattern::FusionPattern;
  LogicalResult matchAndRewrite(ScaleOp op,
                                PatternRewriter &rewriter) const override {
    auto producer = commonProducer<CastOp>(op.getInputs());
    if (!producer || producer->first.getFactor())
      return failure();
    auto [cast, indices] = *producer;
    SmallVector<Value> inputs;
    for (unsigned i : indices)
      inputs.push_back(cast.getInputs()[i]);
    rewriter.replaceOpWithNewOp<CastOp>(op, op.getResultTypes(), inputs,
                                        op.getFactorAttr(),
                                        cast.getSchemeAttr());
    eraseIfDead(rewriter, cast);
    ++fused;
    return success();
  }
};

struct DDPFuseKernelsPass
    : public ddp::impl::DDPFuseKernelsBase<DDPFuseKernelsPass> {
  void runOnOperation() override;
};
} // namespace

/// Which ops may merge: compute ops (pure multi-tensor ops; collectives are
/// bucketize's business) of one kind with the same configuration.
static std::optional<Attribute> mergeKey(Operation *op) {
  auto multi = dyn_cast<MultiTensorOpInterface>(op);
  if (!multi || !isPure(op))
    return std::nullopt;
  Attribute configuration = multi.getConfiguration();
  return configuration ? configuration : UnitAttr::get(op->getContext());
}

void DDPFuseKernelsPass::runOnOperation() {
  Operation *root = getOperation();
  MLIRContext *context = &getContext();
  DominanceInfo dominance(root);

  RewritePatternSet patterns(context);
  unsigned fused = 0;
  patterns.add<FuseResidualIntoProjection<ProjectOp, ProjectResidualOp>,
               FuseResidualIntoProjection<BackprojectOp, BackprojectResidualOp>,
               FuseScaleIntoCast, FuseCastIntoScale>(context, fused);
  patterns.add<FuseReconstructResidual>(context, fused, dominance);
  walkAndApplyPatterns(root, std::move(patterns));
  numFused += fused;

  SmallVector<Block *> blocks;
  root->walk([&](Block *block) { blocks.push_back(block); });
  SmallVector<SmallVector<Operation *>> groups;
  for (Block *block : blocks)
    for (auto &group : findMergeableGroups(*block, mergeKey))
      if (group.size() > 1)
        groups.push_back(std::move(group));
  IRRewriter rewriter(context);
  for (auto &group : groups) {
    numMerged += group.size();
    mergeMultiTensorOps(rewriter, group);
  }
  if (fused == 0 && groups.empty())
    markAllAnalysesPreserved(); // nothing changed: no verification either
}
