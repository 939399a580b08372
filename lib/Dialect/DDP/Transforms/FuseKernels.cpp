//===- FuseKernels.cpp - fuse ddp steps into the runtime's kernels --------===//
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

namespace {
/// project / backproject of G + E -> the *_residual form.
template <typename OpTy, typename FusedOpTy>
struct FuseResidualIntoProjection : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    auto split = splitResidualSums(op.getMatrices());
    if (!split)
      return failure();
    rewriter.replaceOpWithNewOp<FusedOpTy>(op, split->first, split->second,
                                           op.getFactors());
    return success();
  }
};

/// update_residual(G + E, reconstruct(P, Q)) -> reconstruct_residual.
struct FuseReconstructResidual : OpRewritePattern<UpdateResidualOp> {
  FuseReconstructResidual(MLIRContext *context, DominanceInfo &dominance)
      : OpRewritePattern(context), dominance(dominance) {}

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
    rewriter.replaceOp(reconstruct, fused.getReconstructions());
    rewriter.replaceOp(op, fused.getNewResiduals());
    return success();
  }

  DominanceInfo &dominance;
};

/// cast(scale(X)) -> cast X scaled by.
struct FuseScaleIntoCast : OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;
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
                                        scale.getFactorAttr());
    return success();
  }
};

/// scale(cast(X)) -> cast X scaled by.
struct FuseCastIntoScale : OpRewritePattern<ScaleOp> {
  using OpRewritePattern::OpRewritePattern;
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
                                        op.getFactorAttr());
    return success();
  }
};

struct DDPFuseKernelsPass
    : public ddp::impl::DDPFuseKernelsBase<DDPFuseKernelsPass> {
  void runOnOperation() override;
};
} // namespace

/// Ops the fusion left without uses (the add_residual and reconstruct ops
/// that were folded into fused ops). Only ddp compute ops are touched.
static void eraseDeadComputeOps(Operation *root) {
  SmallVector<Operation *> worklist;
  root->walk([&](Operation *op) {
    if (isa_and_nonnull<DDPDialect>(op->getDialect()) && isPure(op) &&
        op->use_empty())
      worklist.push_back(op);
  });
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    SmallVector<Operation *> producers;
    for (Value operand : op->getOperands())
      if (Operation *producer = operand.getDefiningOp())
        producers.push_back(producer);
    op->erase();
    for (Operation *producer : producers)
      if (isa_and_nonnull<DDPDialect>(producer->getDialect()) &&
          isPure(producer) && producer->use_empty() &&
          !llvm::is_contained(worklist, producer))
        worklist.push_back(producer);
  }
}

/// Which ops may merge: the same op with the same configuration (inherent
/// attributes other than the operand segment sizes).
static std::optional<Attribute> mergeKey(Operation *op) {
  if (!isa<ScaleOp, CastOp, AddResidualOp, ProjectOp, BackprojectOp,
           OrthogonalizeOp, ReconstructOp, UpdateResidualOp, ProjectResidualOp,
           BackprojectResidualOp, ReconstructResidualOp>(op))
    return std::nullopt;
  auto props = dyn_cast_or_null<DictionaryAttr>(op->getPropertiesAsAttribute());
  if (!props)
    return UnitAttr::get(op->getContext());
  NamedAttrList config(props);
  config.erase("operandSegmentSizes");
  return config.getDictionary(op->getContext());
}

void DDPFuseKernelsPass::runOnOperation() {
  Operation *root = getOperation();
  MLIRContext *context = &getContext();
  DominanceInfo dominance(root);

  RewritePatternSet patterns(context);
  patterns.add<FuseResidualIntoProjection<ProjectOp, ProjectResidualOp>,
               FuseResidualIntoProjection<BackprojectOp, BackprojectResidualOp>,
               FuseScaleIntoCast, FuseCastIntoScale>(context);
  patterns.add<FuseReconstructResidual>(context, dominance);
  unsigned before = 0;
  root->walk([&](Operation *op) {
    if (isa<AddResidualOp, ScaleOp, ReconstructOp>(op))
      ++before;
  });
  walkAndApplyPatterns(root, std::move(patterns));
  eraseDeadComputeOps(root);
  unsigned after = 0;
  root->walk([&](Operation *op) {
    if (isa<AddResidualOp, ScaleOp, ReconstructOp>(op))
      ++after;
  });
  numFused += before - after;

  SmallVector<Block *> blocks;
  root->walk([&](Block *block) { blocks.push_back(block); });
  SmallVector<SmallVector<Operation *>> groups;
  for (Block *block : blocks)
    for (auto &group : findMergeableGroups(*block, mergeKey))
      if (group.size() > 1)
        groups.push_back(std::move(group));
  for (auto &group : groups) {
    numMerged += group.size();
    mergeMultiTensorOps(group);
  }
}
