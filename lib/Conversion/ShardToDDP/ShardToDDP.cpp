//===- ShardToDDP.cpp - shard.all_reduce to ddp.allreduce -----------------===//
//
// Upstream MLIR expresses data-parallel gradient averaging as
// `shard.all_reduce` over a `shard.grid`. When the reduction spans every
// device of the grid, it is exactly a ddp.allreduce over the world.
//
//===----------------------------------------------------------------------===//

#include "ddp/Conversion/Passes.h"
#include "ddp/Dialect/DDP/IR/DDP.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_CONVERTSHARDTODDP
#include "ddp/Conversion/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {
struct AllReduceToDDP : OpRewritePattern<shard::AllReduceOp> {
  using OpRewritePattern::OpRewritePattern;

  /// Grid lookups, cached across the ops of one run: a collection made per
  /// op would rebuild the module's symbol table for every all_reduce.
  mutable SymbolTableCollection symbols;

  /// Why `op` cannot become a ddp.allreduce, or an empty string if it can.
  static std::string whyNot(shard::AllReduceOp op) {
    shard::ReductionKind kind = op.getReduction();
    if (kind != shard::ReductionKind::Sum &&
        kind != shard::ReductionKind::Average)
      return ("reduction '" + shard::stringifyReductionKind(kind) +
              "' is not a gradient sum or average")
          .str();
    auto type = dyn_cast<RankedTensorType>(op.getInput().getType());
    if (!type)
      return "only ranked tensors are handled (memrefs are left as they are)";
    if (type != op.getResult().getType())
      return "the result type differs from the input type";
    if (!type.getElementType().isIntOrFloat())
      return "the element type is not an integer or float";
    if (kind == shard::ReductionKind::Average &&
        !isa<FloatType>(type.getElementType()))
      return "an average of integers is not a gradient average";
    return "";
  }

  LogicalResult matchAndRewrite(shard::AllReduceOp op,
                                PatternRewriter &rewriter) const override {
    std::string reason = whyNot(op);
    if (reason.empty())
      reason = whyNotWholeGrid(op);
    if (!reason.empty()) {
      op.emitRemark() << "shard.all_reduce left unchanged: " << reason;
      return failure();
    }
    ReductionKind kind = op.getReduction() == shard::ReductionKind::Sum
                             ? ReductionKind::sum
                             : ReductionKind::mean;
    auto allreduce =
        AllReduceOp::create(rewriter, op.getLoc(), kind,
                            ValueRange{op.getInput()}, CommRole::gradient);
    rewriter.replaceOp(op, allreduce.getResults());
    return success();
  }

  /// The ddp world is every rank; the reduction must cover every grid axis
  /// with more than one device (a dynamic size counts as more than one).
  std::string whyNotWholeGrid(shard::AllReduceOp op) const {
    shard::GridOp grid = shard::getGridOrNull(op, op.getGridAttr(), symbols);
    if (!grid)
      return "its grid '" + op.getGrid().str() + "' is not defined";
    ArrayRef<int16_t> reduced = op.getGridAxes();
    for (auto [axis, size] : llvm::enumerate(grid.getShape())) {
      if (size == 1 || llvm::is_contained(reduced, int16_t(axis)))
        continue;
      return "it reduces over part of grid '" + op.getGrid().str() +
             "' only (axis " + std::to_string(axis) +
             " is not reduced), not over all ranks";
    }
    return "";
  }
};

struct ConvertShardToDDPPass
    : public ddp::impl::ConvertShardToDDPBase<ConvertShardToDDPPass> {
  void runOnOperation() override { convertShardAllReduces(getOperation()); }
};
} // namespace

void mlir::ddp::populateShardToDDPPatterns(RewritePatternSet &patterns) {
  patterns.add<AllReduceToDDP>(patterns.getContext());
}

void mlir::ddp::convertShardAllReduces(Operation *root) {
  RewritePatternSet patterns(root->getContext());
  populateShardToDDPPatterns(patterns);
  walkAndApplyPatterns(root, std::move(patterns));
}
