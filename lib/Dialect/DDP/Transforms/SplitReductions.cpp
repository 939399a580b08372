//===- SplitReductions.cpp - exact reductions over many threads -----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A reduction whose every output combines with a minimum or maximum (a
// quantizer's range over a bucket) has one result whatever the order of its
// terms: it is split into chunks of the reduction loop, reduced in parallel
// into partial results, which a second loop nest combines. Sums are left
// alone: their bits depend on the order.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPSPLITREDUCTIONS
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// Whether `value` (in `body`) depends on one of `outputs`.
bool dependsOn(Value value, ArrayRef<BlockArgument> outputs) {
  SmallVector<Value> worklist{value};
  llvm::SmallPtrSet<Value, 8> seen;
  while (!worklist.empty()) {
    Value next = worklist.pop_back_val();
    if (!seen.insert(next).second)
      continue;
    if (auto argument = dyn_cast<BlockArgument>(next)) {
      if (llvm::is_contained(outputs, argument))
        return true;
      continue;
    }
    Operation *def = next.getDefiningOp();
    if (def->getNumRegions() != 0)
      return true;
    llvm::append_range(worklist, def->getOperands());
  }
  return false;
}

/// The op that combines output `k`'s running value with the term of an
/// iteration, if it is a minimum or maximum (exact: the same result in any
/// order, NaN and signed zeros included; minnumf and maxnumf are not, their
/// choice between -0 and +0 is left open) and the term does not depend on
/// any output.
Operation *exactCombiner(linalg::GenericOp op, unsigned k) {
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Operation *combine = yield.getOperand(k).getDefiningOp();
  if (!combine || combine->getBlock() != &body ||
      !isa<arith::MinimumFOp, arith::MaximumFOp, arith::MinSIOp, arith::MaxSIOp,
           arith::MinUIOp, arith::MaxUIOp>(combine))
    return nullptr;
  ArrayRef<BlockArgument> outputs =
      body.getArguments().drop_front(op.getNumDpsInputs());
  BlockArgument out = outputs[k];
  Value lhs = combine->getOperand(0), rhs = combine->getOperand(1);
  Value term = lhs == out ? rhs : rhs == out ? lhs : Value();
  if (!term || term == out || !out.hasOneUse() || dependsOn(term, outputs))
    return nullptr;
  return combine;
}

struct SplitReductions
    : public ddp::impl::DDPSplitReductionsBase<SplitReductions> {
  using Base::Base;

  void runOnOperation() override {
    if (chunk < 2) {
      getOperation().emitError()
          << "ddp-split-reductions: chunk must be at least 2, got "
          << int64_t(chunk);
      return signalPassFailure();
    }
    SmallVector<linalg::LinalgOp> candidates;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.hasPureBufferSemantics() && op.getNumReductionLoops() == 1 &&
          op.getNumDpsInits() != 0)
        candidates.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : candidates)
      split(rewriter, op);
  }

  void split(IRRewriter &rewriter, linalg::LinalgOp linalgOp) {
    // Cheap checks first: a named op is generalized only if it qualifies.
    std::optional<int64_t> staticSize;
    {
      SmallVector<int64_t> ranges = linalgOp.getStaticLoopRanges();
      SmallVector<utils::IteratorType> iterators =
          linalgOp.getIteratorTypesArray();
      for (unsigned d = 0; d < iterators.size(); ++d)
        if (iterators[d] == utils::IteratorType::reduction &&
            !ShapedType::isDynamic(ranges[d]))
          staticSize = ranges[d];
      if (staticSize && *staticSize <= chunk)
        return;
    }
    for (OpOperand &init : linalgOp.getDpsInitsMutable())
      if (!linalgOp.getMatchingIndexingMap(&init).isProjectedPermutation())
        return;
    if (auto generic = dyn_cast<linalg::GenericOp>(linalgOp.getOperation()))
      for (unsigned k = 0; k < generic.getNumDpsInits(); ++k)
        if (!exactCombiner(generic, k))
          return;
    rewriter.setInsertionPoint(linalgOp);
    FailureOr<linalg::GenericOp> reordered =
        parallelLoopsFirst(rewriter, linalgOp);
    if (failed(reordered))
      return;
    linalg::GenericOp op = *reordered;
    if (op.getIteratorTypesArray().back() != utils::IteratorType::reduction)
      return;
    SmallVector<Operation *> combiners;
    for (unsigned k = 0; k < op.getNumDpsInits(); ++k)
      combiners.push_back(exactCombiner(op, k));
    if (llvm::is_contained(combiners, nullptr))
      return;
    for (OpOperand *input : op.getDpsInputOperands())
      if (!isa<MemRefType>(input->get().getType()))
        return;

    Location loc = op.getLoc();
    rewriter.setInsertionPoint(op);
    SmallVector<Range, 4> ranges = cast<linalg::LinalgOp>(op.getOperation())
                                       .createLoopRanges(rewriter, loc);
    unsigned numLoops = ranges.size();
    unsigned numParallel = numLoops - 1;
    auto index = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(rewriter, loc, v);
    };
    auto valueOf = [&](OpFoldResult ofr) {
      return getValueOrCreateConstantIndexOp(rewriter, loc, ofr);
    };
    Value zero = index(0), one = index(1), chunkSize = index(chunk);
    Value total = valueOf(ranges.back().size);
    Value chunks = arith::DivUIOp::create(
        rewriter, loc,
        arith::AddIOp::create(rewriter, loc, total, index(chunk - 1)),
        chunkSize);

    // A partial result per chunk and output element: [chunks, output...].
    SmallVector<Value> outputs = op.getDpsInits();
    SmallVector<Value> partials;
    for (Value output : outputs) {
      auto type = cast<MemRefType>(output.getType());
      SmallVector<int64_t> shape{ShapedType::kDynamic};
      llvm::append_range(shape, type.getShape());
      SmallVector<Value> sizes{chunks};
      for (int64_t d = 0; d < type.getRank(); ++d)
        if (type.isDynamicDim(d))
          sizes.push_back(memref::DimOp::create(rewriter, loc, output, d));
      partials.push_back(memref::AllocOp::create(
          rewriter, loc, MemRefType::get(shape, type.getElementType()), sizes));
    }

    // The indices of `operand` at loop indices `ivs`.
    auto indicesOf = [&](OpOperand *operand, ValueRange ivs) {
      AffineMap map = op.getMatchingIndexingMap(operand);
      SmallVector<Value> indices;
      for (unsigned r = 0; r < map.getNumResults(); ++r)
        indices.push_back(affine::AffineApplyOp::create(
            rewriter, loc, map.getSubMap({r}), ivs));
      return indices;
    };
    SmallVector<Value> parallelLowers(numParallel, zero),
        parallelSteps(numParallel, one), parallelUppers;
    for (unsigned d = 0; d < numParallel; ++d)
      parallelUppers.push_back(valueOf(ranges[d].size));

    // 1. Each chunk of each output element, in parallel.
    SmallVector<Value> lowers{zero}, uppers{chunks}, steps{one};
    llvm::append_range(lowers, parallelLowers);
    llvm::append_range(uppers, parallelUppers);
    llvm::append_range(steps, parallelSteps);
    auto chunkLoop =
        scf::ParallelOp::create(rewriter, loc, lowers, uppers, steps);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(chunkLoop.getBody());
      SmallVector<Value> ivs(chunkLoop.getInductionVars());
      Value first = arith::MulIOp::create(rewriter, loc, ivs[0], chunkSize);
      Value last = arith::MinUIOp::create(
          rewriter, loc, arith::AddIOp::create(rewriter, loc, first, chunkSize),
          total);
      SmallVector<Value> parallelIvs(llvm::drop_begin(ivs));
      SmallVector<Value> initial;
      for (OpOperand &init : op.getDpsInitsMutable()) {
        SmallVector<Value> at = parallelIvs;
        at.push_back(zero);
        initial.push_back(memref::LoadOp::create(rewriter, loc, init.get(),
                                                 indicesOf(&init, at)));
      }
      auto inner = scf::ForOp::create(rewriter, loc, first, last, one, initial);
      {
        OpBuilder::InsertionGuard innerGuard(rewriter);
        rewriter.setInsertionPointToStart(inner.getBody());
        SmallVector<Value> at = parallelIvs;
        at.push_back(inner.getInductionVar());
        Block &body = op.getRegion().front();
        IRMapping mapping;
        for (OpOperand *input : op.getDpsInputOperands())
          mapping.map(body.getArgument(input->getOperandNumber()),
                      memref::LoadOp::create(rewriter, loc, input->get(),
                                             indicesOf(input, at)));
        for (unsigned k = 0; k < outputs.size(); ++k)
          mapping.map(body.getArgument(op.getNumDpsInputs() + k),
                      inner.getRegionIterArgs()[k]);
        for (Operation &nested : body.without_terminator())
          rewriter.clone(nested, mapping);
        SmallVector<Value> yielded;
        for (Value value : body.getTerminator()->getOperands())
          yielded.push_back(mapping.lookupOrDefault(value));
        scf::YieldOp::create(rewriter, loc, yielded);
      }
      for (unsigned k = 0; k < outputs.size(); ++k) {
        SmallVector<Value> at = parallelIvs;
        at.push_back(zero);
        SmallVector<Value> indices{ivs[0]};
        llvm::append_range(indices, indicesOf(&op.getDpsInitsMutable()[k], at));
        memref::StoreOp::create(rewriter, loc, inner.getResult(k), partials[k],
                                indices);
      }
    }

    // 2. Each output element combines its chunks' partial results.
    auto combineChunks = [&](ValueRange parallelIvs) {
      for (unsigned k = 0; k < outputs.size(); ++k) {
        OpOperand &init = op.getDpsInitsMutable()[k];
        SmallVector<Value> at(parallelIvs);
        at.push_back(zero);
        SmallVector<Value> indices = indicesOf(&init, at);
        Value initialValue =
            memref::LoadOp::create(rewriter, loc, init.get(), indices);
        auto loop = scf::ForOp::create(rewriter, loc, zero, chunks, one,
                                       ValueRange{initialValue});
        OpBuilder::InsertionGuard guard(rewriter);
        rewriter.setInsertionPointToStart(loop.getBody());
        SmallVector<Value> partialIndices{loop.getInductionVar()};
        llvm::append_range(partialIndices, indices);
        Value part =
            memref::LoadOp::create(rewriter, loc, partials[k], partialIndices);
        Operation *combine = combiners[k];
        IRMapping mapping;
        mapping.map(combine->getOperand(0), loop.getRegionIterArgs()[0]);
        mapping.map(combine->getOperand(1), part);
        Operation *combined = rewriter.clone(*combine, mapping);
        scf::YieldOp::create(rewriter, loc, combined->getResult(0));
        rewriter.setInsertionPointAfter(loop);
        memref::StoreOp::create(rewriter, loc, loop.getResult(0), init.get(),
                                indices);
      }
    };
    if (numParallel == 0) {
      combineChunks({});
    } else {
      auto combineLoop = scf::ParallelOp::create(rewriter, loc, parallelLowers,
                                                 parallelUppers, parallelSteps);
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(combineLoop.getBody());
      SmallVector<Value> ivs(combineLoop.getInductionVars());
      combineChunks(ivs);
    }
    for (Value partial : partials)
      memref::DeallocOp::create(rewriter, loc, partial);
    rewriter.eraseOp(op);
    ++numSplit;
  }
};

} // namespace
