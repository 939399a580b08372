//===- ExpandBuckets.cpp - ddp.flatten/unflatten as tensor ops ------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The bucket ops say what a compression scheme works on; upstream's tensor
// ops say how, and bufferize: a flat bucket is the gradients collapsed to
// 1-D and concatenated; a gradient of the reduced bucket is a slice of it,
// expanded to the gradient's shape.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPEXPANDBUCKETS
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {
struct ExpandFlatten : OpRewritePattern<FlattenOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(FlattenOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> pieces;
    for (Value input : op.getInputs())
      pieces.push_back(flattenTensor(rewriter, op.getLoc(), input));
    if (pieces.size() == 1) {
      rewriter.replaceOp(op, pieces.front());
      return success();
    }
    rewriter.replaceOpWithNewOp<tensor::ConcatOp>(op, op.getType(),
                                                  /*dim=*/0, pieces);
    return success();
  }
};

struct ExpandUnflatten : OpRewritePattern<UnflattenOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(UnflattenOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> results;
    int64_t offset = 0;
    Location loc = op.getLoc();
    for (Type type : op.getResultTypes()) {
      auto tensor = cast<RankedTensorType>(type);
      int64_t size = tensor.getNumElements();
      Value slice = op.getInput();
      if (op->getNumResults() > 1)
        slice = tensor::ExtractSliceOp::create(
            rewriter, loc, op.getInput(),
            ArrayRef<OpFoldResult>{rewriter.getIndexAttr(offset)},
            ArrayRef<OpFoldResult>{rewriter.getIndexAttr(size)},
            ArrayRef<OpFoldResult>{rewriter.getIndexAttr(1)});
      results.push_back(unflattenTensor(rewriter, loc, slice, tensor));
      offset += size;
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct DDPExpandBucketsPass
    : public ddp::impl::DDPExpandBucketsBase<DDPExpandBucketsPass> {
  void runOnOperation() override {
    // Nothing to expand: nothing changes, nothing to verify again.
    if (!getOperation()
             ->walk([](Operation *op) {
               return isa<FlattenOp, UnflattenOp>(op) ? WalkResult::interrupt()
                                                      : WalkResult::advance();
             })
             .wasInterrupted())
      return markAllAnalysesPreserved();
    // A bucket nothing communicated (noop) folds away instead.
    getOperation().walk([](UnflattenOp op) {
      SmallVector<OpFoldResult> folded;
      if (failed(op->fold(folded)))
        return;
      for (auto [result, value] : llvm::zip(op.getResults(), folded))
        result.replaceAllUsesWith(cast<Value>(value));
      op.erase();
    });
    getOperation().walk([](FlattenOp op) {
      if (op->use_empty())
        op.erase();
    });
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandFlatten, ExpandUnflatten>(&getContext());
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};
} // namespace
