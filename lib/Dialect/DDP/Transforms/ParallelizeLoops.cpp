//===- ParallelizeLoops.cpp - large loop nests on several threads ---------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Tiles (scf.forall on buffers) and linalg ops with an outer parallel loop
// become scf.parallel where they do enough work to pay for the threads;
// convert-scf-to-openmp takes it from there.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPPARALLELIZELOOPS
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// The parallel loops of a nest made parallel: at least this many
/// iterations among them, where the sizes are known.
constexpr int64_t kParallelIterations = 256;

/// a * b, saturating at INT64_MAX (which stands for "large").
int64_t saturatingProduct(int64_t a, int64_t b) {
  if (a == 0 || b == 0)
    return 0;
  if (a > std::numeric_limits<int64_t>::max() / b)
    return std::numeric_limits<int64_t>::max();
  return a * b;
}

/// An upper bound of dimension `dim` of `value` (a shaped value): its size,
/// or the bound of a dynamic size that ValueBounds derives (a tile's
/// affine.min), or INT64_MAX.
int64_t upperBoundOfDim(Value value, int64_t dim) {
  auto type = cast<ShapedType>(value.getType());
  if (!type.isDynamicDim(dim))
    return type.getDimSize(dim);
  FailureOr<int64_t> bound = ValueBoundsConstraintSet::computeConstantBound(
      presburger::BoundType::UB, ValueBoundsConstraintSet::Variable(value, dim),
      /*stopCondition=*/nullptr, /*closedUB=*/true);
  return succeeded(bound) ? *bound : std::numeric_limits<int64_t>::max();
}

/// Upper bounds of `op`'s loop ranges (INT64_MAX where none is known).
SmallVector<int64_t> loopRangeBounds(linalg::LinalgOp op) {
  SmallVector<int64_t> shape;
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<ShapedType>(operand.get().getType());
    if (!type)
      continue;
    for (int64_t d = 0; d < type.getRank(); ++d)
      shape.push_back(upperBoundOfDim(operand.get(), d));
  }
  AffineMap map = op.getShapesToLoopsMap();
  if (!map)
    return SmallVector<int64_t>(op.getNumLoops(),
                                std::numeric_limits<int64_t>::max());
  // The map picks operand dimensions (a loop's range is one of them).
  SmallVector<int64_t> ranges;
  for (AffineExpr expr : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    ranges.push_back(dim ? shape[dim.getPosition()]
                         : std::numeric_limits<int64_t>::max());
  }
  return ranges;
}

/// The innermost iterations of `op`, at most (INT64_MAX: unknown).
int64_t iterationsOf(linalg::LinalgOp op) {
  int64_t total = 1;
  for (int64_t range : loopRangeBounds(op))
    total = saturatingProduct(total, range);
  return total;
}

/// Iterations of a loop `ranges` (lower bound, upper bound, step), at most.
int64_t tripCount(OpFoldResult lower, OpFoldResult upper, OpFoldResult step) {
  std::optional<int64_t> lb = getConstantIntValue(lower);
  std::optional<int64_t> ub = getConstantIntValue(upper);
  std::optional<int64_t> st = getConstantIntValue(step);
  if (!lb || !ub || !st || *st <= 0)
    return std::numeric_limits<int64_t>::max();
  return *ub <= *lb ? 0 : llvm::divideCeil(*ub - *lb, *st);
}

/// Whether the threads may run `body` side by side: it calls nothing (no
/// runtime call, no function) and so touches only memory it is given.
bool callsNothing(Operation *body) {
  WalkResult result = body->walk([&](Operation *op) {
    if (op != body && (isa<CallOpInterface>(op) ||
                       isa_and_nonnull<DDPDialect>(op->getDialect())))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !result.wasInterrupted();
}

/// Whether `op` is inside a loop that already runs on several threads (or
/// a tile loop that will).
bool inParallelLoop(Operation *op) {
  return op->getParentOfType<scf::ParallelOp>() ||
         op->getParentOfType<scf::ForallOp>();
}

struct ParallelizeLoops
    : public ddp::impl::DDPParallelizeLoopsBase<ParallelizeLoops> {
  using Base::Base;

  void runOnOperation() override {
    if (minIterations < 1) {
      getOperation().emitError() << "ddp-parallelize-loops: min-iterations "
                                    "must be at least 1, got "
                                 << int64_t(minIterations);
      return signalPassFailure();
    }
    IRRewriter rewriter(&getContext());
    // Tiles first: the linalg ops in them stay inside.
    SmallVector<scf::ForallOp> tileLoops;
    getOperation().walk([&](scf::ForallOp loop) { tileLoops.push_back(loop); });
    for (scf::ForallOp loop : tileLoops)
      if (failed(parallelizeTiles(rewriter, loop)))
        return signalPassFailure();
    if (!parallel)
      return;
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.hasPureBufferSemantics() && !inParallelLoop(op) &&
          worthThreads(op))
        ops.push_back(op);
    });
    SmallVector<Parallelized> made;
    for (linalg::LinalgOp op : ops)
      if (failed(parallelizeOp(rewriter, op, made)))
        return signalPassFailure();
    if (made.empty())
      return;
    // The loops index with identity affine.applys (as
    // convert-linalg-to-loops' do, which folds them): folded here.
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    RewritePatternSet patterns(&getContext());
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, &getContext());
    (void)applyPatternsGreedily(getOperation(), std::move(patterns), config);
    // (Then the loads' indices are the loops' variables.)
    for (auto &[loop, readOnly] : made)
      hoistInvariantLoads(loop, readOnly);
  }

  /// A parallel loop made of a linalg op, with the buffers it only reads.
  using Parallelized = std::pair<scf::ParallelOp, llvm::SmallPtrSet<Value, 4>>;

  /// Whether `op` does enough work, has only parallel loops, and nothing
  /// the threads could not share. (A reduction, a row's minimum or a
  /// contraction as loops, keeps its accumulator in memory inside the loop
  /// nest: in a thread's function, where the buffers may alias, the
  /// vectorizer cannot keep it in registers, and one thread in vector
  /// lanes beats several in scalar code.)
  ///
  /// With every-loop (a GPU's threads), an op with reduction loops too: its
  /// parallel loops are the threads, each of which runs the reduction loops
  /// of its own output elements in their order (the same operations in the
  /// same order per element as one thread would: the same bits).
  bool worthThreads(linalg::LinalgOp op) {
    if (op.getNumLoops() == 0 || op.getNumParallelLoops() == 0 ||
        (op.getNumReductionLoops() != 0 && !everyLoop) ||
        iterationsOf(op) < minIterations || !callsNothing(op))
      return false;
    // Every iteration writes its own elements: each output uses every
    // parallel loop (an op that says "parallel" of a loop its outputs do
    // not use would have the threads write the same elements).
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    for (OpOperand &init : op.getDpsInitsMutable()) {
      AffineMap map = op.getMatchingIndexingMap(&init);
      for (unsigned d = 0; d < iterators.size(); ++d)
        if (iterators[d] == utils::IteratorType::parallel &&
            !map.isFunctionOfDim(d))
          return false;
    }
    return true;
  }

  /// A tile loop (outermost, with no results once bufferized) as
  /// scf.parallel, or as scf.for nests if it is too small or calls
  /// something.
  LogicalResult parallelizeTiles(RewriterBase &rewriter, scf::ForallOp loop) {
    if (loop->getNumResults() != 0)
      return loop.emitError("ddp-parallelize-loops: a tile loop with results "
                            "after bufferization");
    // (A forall in a forall, visited first: the outer one decides.)
    bool nested = inParallelLoop(loop);
    int64_t trips = 1;
    for (auto [lower, upper, step] :
         llvm::zip(loop.getMixedLowerBound(), loop.getMixedUpperBound(),
                   loop.getMixedStep()))
      trips = saturatingProduct(trips, tripCount(lower, upper, step));
    int64_t perTile = 0;
    loop.getBody()->walk([&](linalg::LinalgOp op) {
      perTile = std::max(perTile, iterationsOf(op));
    });
    rewriter.setInsertionPoint(loop);
    if (!parallel || nested || saturatingProduct(trips, perTile) < minIterations ||
        !callsNothing(loop)) {
      ++numSequential;
      return scf::forallToForLoop(rewriter, loop);
    }
    ++numParallel;
    return scf::forallToParallelLoop(rewriter, loop);
  }

  /// `op` as loops, the leading parallel ones as one scf.parallel (added
  /// to `made`).
  LogicalResult parallelizeOp(RewriterBase &rewriter, linalg::LinalgOp op,
                              SmallVectorImpl<Parallelized> &made) {
    // (An op that cannot be reordered keeps its order: its leading
    // parallel loops, if any, are the threads.)
    if (everyLoop && op.getNumReductionLoops() != 0) {
      rewriter.setInsertionPoint(op);
      if (FailureOr<linalg::GenericOp> reordered =
              parallelLoopsFirst(rewriter, op);
          succeeded(reordered))
        op = *reordered;
    }
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    SmallVector<int64_t> ranges = loopRangeBounds(op);
    // What the op only reads (an element-wise op writes its outputs alone).
    llvm::SmallPtrSet<Value, 4> readOnly;
    for (OpOperand *input : op.getDpsInputOperands())
      readOnly.insert(input->get());
    for (Value init : op.getDpsInits())
      readOnly.erase(init);
    rewriter.setInsertionPoint(op);
    FailureOr<linalg::LinalgLoops> lowered = linalg::linalgOpToLoops(rewriter, op);
    if (failed(lowered))
      return op->emitError("ddp-parallelize-loops: cannot lower to loops");
    // The loops compute what the op did.
    rewriter.eraseOp(op);
    SmallVector<scf::ForOp> loops;
    for (Operation *loop : *lowered)
      if (auto forOp = dyn_cast<scf::ForOp>(loop))
        loops.push_back(forOp);
    if (loops.empty() || loops.size() != lowered->size() ||
        loops.size() != iterators.size())
      return success(); // already correct loops, on one thread
    auto isParallel = [&](size_t i) {
      return iterators[i] == utils::IteratorType::parallel &&
             loops[i].getInitArgs().empty();
    };
    // Whether loops[i] is all that loops[i - 1] holds.
    auto holdsOnly = [&](size_t i) {
      return loops[i - 1].getBody()->getOperations().size() == 2;
    };
    // Leading loops of one iteration (a bucket's [1 x n] view) stay as
    // they are; the parallel ones follow them. (With every-loop they are
    // part of the parallel loop: a GPU's kernel has no host loop around
    // it.)
    size_t first = 0;
    while (!everyLoop && first + 1 < loops.size() && ranges[first] == 1 &&
           isParallel(first) && holdsOnly(first + 1))
      ++first;
    scf::ForOp outer = loops[first];
    auto definedOutside = [&](scf::ForOp loop) {
      return llvm::all_of(
          ValueRange{loop.getLowerBound(), loop.getUpperBound(),
                     loop.getStep()},
          [&](Value bound) {
            return !outer->isAncestor(bound.getParentBlock()->getParentOp());
          });
    };
    // Then parallel loops until they have enough iterations, never the
    // innermost of several (the vectorizer's); with every-loop, all of
    // them (a GPU's threads).
    size_t limit = everyLoop || first + 1 == loops.size() ? loops.size()
                                                          : loops.size() - 1;
    size_t count = first;
    int64_t iterations = 1;
    while (count < limit && isParallel(count) &&
           (everyLoop || iterations < kParallelIterations) &&
           (count == first || holdsOnly(count)) &&
           definedOutside(loops[count])) {
      iterations = saturatingProduct(iterations, ranges[count]);
      ++count;
    }
    if (count == first)
      return success();
    scf::ForOp inner = loops[count - 1];
    SmallVector<Value> lowers, uppers, steps;
    for (scf::ForOp loop : ArrayRef(loops).slice(first, count - first)) {
      lowers.push_back(loop.getLowerBound());
      uppers.push_back(loop.getUpperBound());
      steps.push_back(loop.getStep());
    }
    rewriter.setInsertionPoint(outer);
    auto parallel = scf::ParallelOp::create(rewriter, outer.getLoc(), lowers,
                                            uppers, steps);
    Block *body = parallel.getBody();
    Block *innerBody = inner.getBody();
    rewriter.eraseOp(innerBody->getTerminator());
    SmallVector<Value> ivs(parallel.getInductionVars());
    // The loops outside the innermost one chosen are indexed by the
    // parallel loop too, before they go.
    for (size_t i = first; i + 1 < count; ++i)
      rewriter.replaceAllUsesWith(loops[i].getInductionVar(), ivs[i - first]);
    rewriter.inlineBlockBefore(innerBody, body->getTerminator(), ivs.back());
    rewriter.eraseOp(outer);
    made.push_back({parallel, std::move(readOnly)});
    ++numParallel;
    return success();
  }

  /// Loads of `readOnly` buffers out of the loops (of `parallel`, and it)
  /// whose induction variables they do not use: a per-row scale is loaded
  /// once per row, a scalar once. A thread's function gets its buffers
  /// through a structure, so LLVM cannot tell them from the outputs and
  /// would load these again in every iteration (and not vectorize).
  static void hoistInvariantLoads(scf::ParallelOp parallel,
                                  const llvm::SmallPtrSetImpl<Value> &readOnly) {
    SmallVector<memref::LoadOp> loads;
    parallel.walk([&](memref::LoadOp load) {
      if (readOnly.contains(load.getMemRef()))
        loads.push_back(load);
    });
    for (memref::LoadOp load : loads) {
      Operation *loop = load->getParentOp();
      while (isa<scf::ForOp, scf::ParallelOp>(loop) &&
             parallel->isAncestor(loop) &&
             llvm::all_of(load.getIndices(), [&](Value index) {
               return !loop->isAncestor(
                   index.getParentBlock()->getParentOp());
             })) {
        load->moveBefore(loop);
        loop = load->getParentOp();
      }
    }
  }
};

} // namespace
