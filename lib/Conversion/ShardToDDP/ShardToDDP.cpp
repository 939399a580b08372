//===- ShardToDDP.cpp - shard.all_reduce to ddp.allreduce -----------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Upstream MLIR expresses data-parallel gradient averaging as
// `shard.all_reduce` over a `shard.grid`. When the reduction spans every
// device of the grid, it is exactly a ddp.allreduce over the world.
//
//===----------------------------------------------------------------------===//

#include "ddp/Conversion/ShardToDDP/ShardToDDP.h"
#include "ddp/Conversion/Passes.h"
#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/IR/GradientNames.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_CONVERTSHARDTODDP
#include "ddp/Conversion/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

/// Whether `op` is a gradient reduction (a sum or average of a ranked
/// tensor) over part of its grid only: the data-parallel axis of a data x
/// tensor-parallel grid, which ddp's collectives (over every rank) cannot
/// express. Such an op is an error, not left quietly uncompressed.
static bool reducesSubGrid(shard::AllReduceOp op,
                           SymbolTableCollection &symbols) {
  shard::ReductionKind kind = op.getReduction();
  if ((kind != shard::ReductionKind::Sum &&
       kind != shard::ReductionKind::Average) ||
      !isa<RankedTensorType>(op.getInput().getType()))
    return false;
  shard::GridOp grid = shard::getGridOrNull(op, op.getGridAttr(), symbols);
  if (!grid)
    return false;
  for (auto [axis, size] : llvm::enumerate(grid.getShape()))
    if (size != 1 && !llvm::is_contained(op.getGridAxes(), int16_t(axis)))
      return true;
  return false;
}

/// The number of devices of `op`'s grid, or 0 if a size is dynamic.
static int64_t gridSize(shard::AllReduceOp op, SymbolTableCollection &symbols) {
  shard::GridOp grid = shard::getGridOrNull(op, op.getGridAttr(), symbols);
  if (!grid)
    return 0;
  int64_t devices = 1;
  for (int64_t size : grid.getShape()) {
    if (ShapedType::isDynamic(size))
      return 0;
    devices *= size;
  }
  return devices;
}

/// Why `op` cannot become a ddp.allreduce, or an empty string if it can.
static std::string whyNotDDP(shard::AllReduceOp op,
                             SymbolTableCollection &symbols) {
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
  if (!isComputeElementType(type.getElementType())) {
    std::string reason;
    llvm::raw_string_ostream(reason)
        << "the runtime does not communicate " << type.getElementType()
        << " (it takes " << computeElementTypeNames(op.getContext()) << ")";
    return reason;
  }
  // The ddp world is every rank; the reduction must cover every grid axis
  // with more than one device (a dynamic size counts as more than one).
  shard::GridOp grid = shard::getGridOrNull(op, op.getGridAttr(), symbols);
  if (!grid)
    return "its grid '" + op.getGrid().str() + "' is not defined";
  ArrayRef<int16_t> reduced = op.getGridAxes();
  for (auto [axis, size] : llvm::enumerate(grid.getShape())) {
    if (size == 1 || llvm::is_contained(reduced, int16_t(axis)))
      continue;
    std::string shape;
    for (auto [i, s] : llvm::enumerate(grid.getShape()))
      shape += (i ? "x" : "") + (ShapedType::isDynamic(s) ? std::string("?")
                                                          : std::to_string(s));
    return "it reduces over part of grid '" + op.getGrid().str() + "' (" +
           shape + ") only (axis " + std::to_string(axis) +
           " is not reduced), and ddp's collectives span every rank: a "
           "data-parallel axis of a larger grid (data x tensor parallel) "
           "is not supported; reduce over every axis of a grid of the "
           "data-parallel ranks alone";
  }
  return "";
}

namespace {
struct AllReduceToDDP : OpRewritePattern<shard::AllReduceOp> {
  AllReduceToDDP(MLIRContext *context, SymbolTableCollection &symbols,
                 bool remarks)
      : OpRewritePattern(context), symbols(symbols), remarks(remarks) {}

  /// Grid lookups, shared across the ops of one run: a collection made per
  /// op would rebuild the module's symbol table for every all_reduce.
  SymbolTableCollection &symbols;
  /// Whether an all_reduce left unchanged gets a remark with the reason.
  bool remarks;

  LogicalResult matchAndRewrite(shard::AllReduceOp op,
                                PatternRewriter &rewriter) const override {
    std::string reason = whyNotDDP(op, symbols);
    if (!reason.empty()) {
      // convertShardAllReduces makes a gradient reduction over a sub-grid
      // an error; the rest stays, with a remark.
      if (remarks && !reducesSubGrid(op, symbols))
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
};

struct ConvertShardToDDPPass
    : public ddp::impl::ConvertShardToDDPBase<ConvertShardToDDPPass> {
  using Base::Base;

  void runOnOperation() override {
    // The gradients' names first, while their locations still hold them.
    bool named = recordGradientNames(getOperation());
    // A module without shard ops (every ddp module after the compression
    // pipeline) is otherwise left as it is, and need not be verified again.
    Dialect *shard = getContext().getLoadedDialect<shard::ShardDialect>();
    if (!shard || !getOperation()
                       ->walk([&](Operation *op) {
                         return op->getDialect() == shard
                                    ? WalkResult::interrupt()
                                    : WalkResult::advance();
                       })
                       .wasInterrupted()) {
      if (!named)
        markAllAnalysesPreserved();
      return;
    }
    if (failed(convertShardAllReduces(getOperation(), complete)))
      signalPassFailure();
  }
};
} // namespace

void mlir::ddp::populateShardToDDPPatterns(RewritePatternSet &patterns,
                                           SymbolTableCollection &symbols,
                                           bool remarks) {
  patterns.add<AllReduceToDDP>(patterns.getContext(), symbols, remarks);
}

LogicalResult mlir::ddp::checkShardAllReduces(Operation *root,
                                              SymbolTableCollection &symbols) {
  auto *dialect = root->getContext()->getLoadedDialect<DDPDialect>();
  auto worldAttr = dialect->getWorldSizeAttrHelper();
  auto i64 = IntegerType::get(root->getContext(), 64);
  bool refused = false;
  root->walk([&](shard::AllReduceOp op) {
    std::string reason = whyNotDDP(op, symbols);
    if (!reason.empty()) {
      if (reducesSubGrid(op, symbols)) {
        op.emitError() << "shard.all_reduce cannot become a ddp collective: "
                       << reason;
        refused = true;
      }
      return;
    }
    int64_t size = gridSize(op, symbols);
    auto function = op->getParentOfType<FunctionOpInterface>();
    if (size == 0 || !function)
      return;
    IntegerAttr recorded = worldAttr.getAttr(function);
    if (recorded && recorded.getInt() != size) {
      op.emitError() << "shard.all_reduce over the " << size
                     << " devices of grid '" << op.getGrid()
                     << "', but @" << function.getName()
                     << " already reduces over " << recorded.getInt()
                     << ": ddp's collectives span every rank of one job";
      refused = true;
      return;
    }
    worldAttr.setAttr(function, IntegerAttr::get(i64, size));
  });
  return failure(refused);
}

int64_t mlir::ddp::shardWorldSize(Operation *root) {
  SymbolTableCollection symbols;
  int64_t size = 0;
  root->walk([&](shard::AllReduceOp op) {
    if (!whyNotDDP(op, symbols).empty())
      return WalkResult::advance();
    size = gridSize(op, symbols);
    return WalkResult::interrupt();
  });
  return size;
}

LogicalResult mlir::ddp::convertShardAllReduces(ModuleOp module,
                                                bool complete) {
  SymbolTableCollection symbols;
  // A grid is erased when nothing refers to it any more: after the rewrite
  // when it was used before (it described the devices of the all_reduces
  // that are now ddp collectives), or at all when `complete`. The LLVM
  // translation has no shard ops, so a grid left behind stops it.
  SmallVector<shard::GridOp> grids =
      llvm::to_vector(module.getOps<shard::GridOp>());
  llvm::SmallPtrSet<Operation *, 4> usedBefore;
  for (shard::GridOp grid : grids)
    if (!SymbolTable::symbolKnownUseEmpty(grid, module))
      usedBefore.insert(grid);

  if (failed(checkShardAllReduces(module, symbols)))
    return failure();

  RewritePatternSet patterns(module.getContext());
  // With `complete`, what is left is an error below, with the same reason.
  populateShardToDDPPatterns(patterns, symbols, /*remarks=*/!complete);
  walkAndApplyPatterns(module, std::move(patterns));

  IRRewriter rewriter(module.getContext());
  for (shard::GridOp grid : grids)
    if ((complete || usedBefore.contains(grid)) &&
        SymbolTable::symbolKnownUseEmpty(grid, module))
      rewriter.eraseOp(grid);
  if (!complete)
    return success();

  // Anything of the shard dialect that is left cannot be lowered by ddp. A
  // grid still in use is reported through its users.
  bool failedAny = false;
  module.walk([&](Operation *op) {
    if (!isa_and_nonnull<shard::ShardDialect>(op->getDialect()) ||
        isa<shard::GridOp>(op))
      return;
    failedAny = true;
    if (auto allReduce = dyn_cast<shard::AllReduceOp>(op)) {
      allReduce.emitError()
          << "shard.all_reduce cannot become a ddp collective: "
          << whyNotDDP(allReduce, symbols);
      return;
    }
    op->emitError() << "'" << op->getName()
                    << "' cannot be lowered by ddp: of the shard dialect only "
                       "shard.all_reduce over every rank becomes a ddp "
                       "collective; lower the others with upstream's shard "
                       "passes first";
  });
  if (failedAny)
    return failure();
  // Only ops of other dialects can still refer to a grid.
  for (shard::GridOp grid : module.getOps<shard::GridOp>()) {
    InFlightDiagnostic diag = grid.emitError()
                              << "shard.grid @" << grid.getSymName()
                              << " cannot be lowered and is still used";
    if (auto uses = SymbolTable::getSymbolUses(grid, module))
      for (const SymbolTable::SymbolUse &use : *uses) {
        diag.attachNote(use.getUser()->getLoc())
            << "used by '" << use.getUser()->getName() << "'";
        break;
      }
    failedAny = true;
  }
  return failure(failedAny);
}
