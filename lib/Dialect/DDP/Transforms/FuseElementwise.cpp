//===- FuseElementwise.cpp - element-wise fusion, contractions left whole -===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Upstream's element-wise fusion patterns with a control function that keeps
// contractions (what ddp-matmuls-to-runtime hands to BLAS) out of it.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Contractions.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPFUSEELEMENTWISE
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// A concatenation (a flattened bucket) inserted at the start of a filled
/// tensor (a quantizer's padding to whole channels) as one concatenation
/// that ends with the filled tail: the pieces are copied once, into the
/// padded buffer, instead of into a buffer of their own and then again.
struct ConcatIntoFilledTensor : OpRewritePattern<tensor::InsertSliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tensor::InsertSliceOp insert,
                                PatternRewriter &rewriter) const override {
    auto concat = insert.getSource().getDefiningOp<tensor::ConcatOp>();
    auto fill = insert.getDest().getDefiningOp<linalg::FillOp>();
    RankedTensorType type = insert.getDestType();
    if (!concat || !fill || !concat->hasOneUse() || !fill->hasOneUse() ||
        type.getRank() != 1 || !type.hasStaticShape() ||
        !insert.getSourceType().hasStaticShape() ||
        !fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>())
      return failure();
    // At offset 0, contiguous.
    if (!llvm::equal(insert.getStaticOffsets(), ArrayRef<int64_t>{0}) ||
        !llvm::equal(insert.getStaticStrides(), ArrayRef<int64_t>{1}))
      return failure();
    int64_t tail = type.getDimSize(0) - insert.getSourceType().getDimSize(0);
    if (tail <= 0)
      return failure();
    Location loc = insert.getLoc();
    Value empty = tensor::EmptyOp::create(rewriter, loc, ArrayRef<int64_t>{tail},
                                          type.getElementType());
    Value filled =
        linalg::FillOp::create(rewriter, loc, fill.getInputs()[0], empty)
            .getResult(0);
    SmallVector<Value> pieces(concat.getInputs());
    pieces.push_back(filled);
    rewriter.replaceOpWithNewOp<tensor::ConcatOp>(insert, type, 0, pieces);
    return success();
  }
};

struct FuseElementwise
    : public ddp::impl::DDPFuseElementwiseBase<FuseElementwise> {
  void runOnOperation() override {
    // Upstream's fusion takes linalg.generic ops: the named ones a hook
    // writes (linalg.map, linalg.reduce, linalg.add, ...) become generics
    // first. Contractions keep their names (and BLAS), fills and
    // convolutions theirs.
    SmallVector<linalg::LinalgOp> named;
    unsigned before = 0;
    bool paddedBucket = false;
    getOperation().walk([&](Operation *op) {
      if (auto insert = dyn_cast<tensor::InsertSliceOp>(op))
        paddedBucket |=
            bool(insert.getSource().getDefiningOp<tensor::ConcatOp>());
      auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
      if (!linalgOp)
        return;
      ++before;
      if (!isa<linalg::GenericOp, linalg::FillOp>(op) && !isBlasContraction(op) &&
          !linalg::isaConvolutionOpInterface(linalgOp) &&
          linalgOp.hasPureTensorSemantics())
        named.push_back(linalgOp);
    });
    // Nothing to fuse (a step that only communicates, PowerSGD's): no
    // walk of the pattern driver over its many ops.
    if (before < 2 && !paddedBucket)
      return markAllAnalysesPreserved();
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : named) {
      rewriter.setInsertionPoint(op);
      (void)linalg::generalizeNamedOp(rewriter, op);
    }
    RewritePatternSet patterns(&getContext());
    linalg::ControlFusionFn control = [](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      Operation *consumer = fused->getOwner();
      // One use: a producer read by two consumers would be computed twice.
      return producer && producer->hasOneUse() && !isBlasContraction(producer) &&
             !isBlasContraction(consumer);
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    // What fusion leaves: operands a fused body no longer reads, results
    // no one uses.
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    patterns.add<ConcatIntoFilledTensor>(&getContext());
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config))) {
      getOperation().emitError()
          << "ddp-fuse-elementwise: fusion did not converge";
      return signalPassFailure();
    }
    unsigned after = 0;
    getOperation().walk([&](linalg::LinalgOp) { ++after; });
    numFused += before > after ? before - after : 0;
  }
};

} // namespace
