//===- TileAndFuse.cpp - element-wise consumers tiled, producers fused ----===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Upstream's tile-and-fuse (scf::tileConsumerAndFuseProducersUsingSCF) on
// the chains element-wise fusion leaves: a reduction over an outer loop (a
// sum over ranks) and the element-wise op after it, with the fill it
// accumulates into. The tiles are an scf.forall: independent, for threads.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Contractions.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPTILEANDFUSE
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// A linalg op on tensors that a tile may compute a part of: not a
/// contraction, and read by one op only.
bool isFusableProducer(Operation *op) {
  auto linalgOp = dyn_cast_or_null<linalg::LinalgOp>(op);
  return linalgOp && linalgOp.hasPureTensorSemantics() &&
         !isBlasContraction(op) && op->hasOneUse();
}

/// Tile sizes over `op`'s loops (0: the loop is not tiled): about
/// `elements` per tile, taken from the innermost loops; the loops outside
/// a tile step by 1. Empty if the op is no larger than two tiles.
SmallVector<int64_t> tileSizesFor(linalg::LinalgOp op, int64_t elements) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<int64_t> sizes(ranges.size(), 0);
  int64_t total = 1;
  for (int64_t range : ranges)
    total = ShapedType::isDynamic(range) || ShapedType::isDynamic(total)
                ? ShapedType::kDynamic
                : total * range;
  if (!ShapedType::isDynamic(total) && total <= 2 * elements)
    return {};
  int64_t inTile = 1;
  int64_t d = int64_t(ranges.size()) - 1;
  for (; d >= 0; --d) {
    int64_t range = ranges[d];
    if (ShapedType::isDynamic(range) || inTile * range > elements) {
      sizes[d] = std::max<int64_t>(1, elements / inTile);
      break;
    }
    inTile *= range; // whole in the tile: not tiled
  }
  // The loops outside the first tiled one step by 1 (a loop of one
  // iteration is not tiled).
  for (--d; d >= 0; --d)
    sizes[d] = ranges[d] == 1 ? 0 : 1;
  return sizes;
}

/// Whether the loop `d` of size `range` is split by a tile size.
bool isSplit(int64_t tileSize, int64_t range) {
  return tileSize != 0 && (ShapedType::isDynamic(range) || tileSize < range);
}

/// Whether the tile of `consumer` reads a part of `operand`'s producer:
/// the operand's map uses a loop the tiles split.
bool readsAPart(linalg::LinalgOp consumer, OpOperand &operand,
                ArrayRef<int64_t> tileSizes) {
  SmallVector<int64_t> ranges = consumer.getStaticLoopRanges();
  AffineMap map = consumer.getMatchingIndexingMap(&operand);
  for (unsigned d = 0; d < ranges.size(); ++d)
    if (isSplit(tileSizes[d], ranges[d]) && map.isFunctionOfDim(d))
      return true;
  return false;
}

/// Whether `value` is computed from `iv` (through the index arithmetic that
/// tiling emits: affine.apply, affine.min).
bool dependsOn(Value value, Value iv, int depth = 8) {
  if (value == iv)
    return true;
  Operation *def = value.getDefiningOp();
  if (!def || depth == 0)
    return false;
  return llvm::any_of(def->getOperands(), [&](Value operand) {
    return dependsOn(operand, iv, depth - 1);
  });
}

/// Whether every tiling loop around `slice` (up to the block the tiled op
/// was in) moves it: a loop whose step leaves the slice where it is would
/// compute the same part of the producer again in every iteration (a
/// per-row minimum under tiles that split the row).
bool movesWithEveryLoop(tensor::ExtractSliceOp slice, Operation *outside) {
  for (Operation *parent = slice->getParentOp(); parent && parent != outside;
       parent = parent->getParentOp()) {
    auto loop = dyn_cast<LoopLikeOpInterface>(parent);
    if (!loop)
      continue;
    for (Value iv : loop.getLoopInductionVars().value_or(ValueRange()))
      if (llvm::none_of(slice.getOffsets(),
                        [&](Value offset) { return dependsOn(offset, iv); }))
        return false;
  }
  return true;
}

struct TileAndFuse : public ddp::impl::DDPTileAndFuseBase<TileAndFuse> {
  using Base::Base;

  void runOnOperation() override {
    if (tileElements < 1) {
      getOperation().emitError() << "ddp-tile-and-fuse: tile-elements must "
                                    "be at least 1, got "
                                 << int64_t(tileElements);
      return signalPassFailure();
    }
    // A chain needs two linalg ops (a step that only communicates has
    // none): no pattern driver walks its many ops then.
    unsigned linalgOps = 0;
    getOperation().walk([&](linalg::LinalgOp) { ++linalgOps; });
    if (linalgOps < 2)
      return markAllAnalysesPreserved();
    if (failed(moveReshapes())) {
      getOperation().emitError()
          << "ddp-tile-and-fuse: moving reshapes did not converge";
      return signalPassFailure();
    }

    // The consumers, last first: a chain is tiled from its end; and what a
    // tile may compute a part of, decided before tiling adds uses.
    SmallVector<std::pair<linalg::LinalgOp, SmallVector<int64_t>>> roots;
    llvm::SmallPtrSet<Operation *, 16> fusable;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (isFusableProducer(op))
        fusable.insert(op);
      if (!op.hasPureTensorSemantics() ||
          op.getNumLoops() != op.getNumParallelLoops() || op.getNumLoops() == 0)
        return;
      SmallVector<int64_t> sizes = tileSizesFor(op, tileElements);
      if (sizes.empty())
        return;
      bool worthIt = llvm::any_of(op->getOpOperands(), [&](OpOperand &operand) {
        return isFusableProducer(operand.get().getDefiningOp()) &&
               readsAPart(op, operand, sizes);
      });
      if (worthIt)
        roots.push_back({op, sizes});
    });
    // (Moving reshapes may have changed the IR: no analysis is kept.)
    if (roots.empty())
      return;
    IRRewriter rewriter(&getContext());
    // Roots fused into a later root's tiles are gone.
    llvm::SmallPtrSet<Operation *, 8> erased;
    for (auto &[root, sizes] : llvm::reverse(roots)) {
      if (erased.contains(root.getOperation()))
        continue;
      scf::SCFTileAndFuseOptions options;
      SmallVector<OpFoldResult> tileSizes = llvm::map_to_vector(
          sizes, [&](int64_t size) -> OpFoldResult {
            return rewriter.getIndexAttr(size);
          });
      options.tilingOptions.setTileSizes(tileSizes);
      // The tiles are independent (the root has only parallel loops):
      // scf.forall, which ddp-parallelize-loops runs on several threads.
      options.tilingOptions.setLoopType(
          scf::SCFTilingOptions::LoopType::ForallOp);
      Operation *outside = root->getParentOp();
      options.setFusionControlFn(
          [&](tensor::ExtractSliceOp slice, OpResult producer,
              bool isDestination)
              -> std::optional<scf::SCFTileAndFuseOptions::ControlFnResult> {
            // The tiled consumer reads the producer too, until it replaces
            // the original: ask whether it had one user before tiling.
            Operation *op = producer.getOwner();
            if (!fusable.contains(op))
              return std::nullopt;
            // A slice as large as the whole producer would compute all of
            // it in every tile.
            auto type = cast<RankedTensorType>(producer.getType());
            ArrayRef<int64_t> sliceSizes = slice.getStaticSizes();
            bool part = llvm::any_of(
                llvm::zip(sliceSizes, type.getShape()), [](auto pair) {
                  auto [slice, whole] = pair;
                  return ShapedType::isDynamic(slice) ||
                         ShapedType::isDynamic(whole) || slice < whole;
                });
            if (!part || !movesWithEveryLoop(slice, outside))
              return std::nullopt;
            ++numFused;
            return scf::SCFTileAndFuseOptions::ControlFnResult{};
          });
      rewriter.setInsertionPoint(root);
      FailureOr<scf::SCFTileAndFuseResult> tiled =
          scf::tileConsumerAndFuseProducersUsingSCF(
              rewriter, cast<TilingInterface>(root.getOperation()), options);
      if (failed(tiled))
        continue; // left as it is: correct, one pass per op
      for (OpResult result : root->getResults())
        rewriter.replaceAllUsesWith(result, tiled->replacements.lookup(result));
      rewriter.eraseOp(root);
      // The fused producers are dead but for slices of them that tiling
      // left unused: those go first.
      for (Operation *producer : tiled->fusedProducers)
        for (Operation *user : llvm::make_early_inc_range(producer->getUsers()))
          if (isa<tensor::ExtractSliceOp>(user) && user->use_empty())
            rewriter.eraseOp(user);
      for (Operation *producer : llvm::reverse(tiled->fusedProducers))
        if (producer->use_empty()) {
          erased.insert(producer);
          rewriter.eraseOp(producer);
        }
      ++numTiled;
    }
    // What tiling left: index arithmetic to fold, dead slices.
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    RewritePatternSet patterns(&getContext());
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, &getContext());
    affine::AffineMinOp::getCanonicalizationPatterns(patterns, &getContext());
    // A tile's part of a tensor.empty is an empty tile: the fill a fused
    // sum starts from gets a buffer of a tile, not a slice of one as large
    // as the whole result, which would be written back to memory.
    tensor::populateFoldTensorEmptyPatterns(patterns);
    // Folding only: a driver that stops before a fixed point leaves correct
    // IR.
    (void)applyPatternsGreedily(getOperation(), std::move(patterns), config);
  }

  /// Upstream's reshape propagation, for a reshape of a linalg op's result
  /// that an element-wise consumer reads: the consumer then reads the
  /// producer directly, and the reshape moves to the result.
  LogicalResult moveReshapes() {
    RewritePatternSet patterns(&getContext());
    linalg::ControlFusionFn control = [](OpOperand *operand) {
      Operation *reshape = operand->get().getDefiningOp();
      if (!isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
              reshape))
        return false;
      Operation *producer = reshape->getOperand(0).getDefiningOp();
      auto consumer = dyn_cast<linalg::GenericOp>(operand->getOwner());
      return consumer && isFusableProducer(producer) &&
             reshape->hasOneUse() &&
             consumer.getNumLoops() == consumer.getNumParallelLoops();
    };
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, control);
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    return applyPatternsGreedily(getOperation(), std::move(patterns), config);
  }
};

} // namespace
