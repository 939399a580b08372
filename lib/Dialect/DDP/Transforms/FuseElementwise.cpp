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

bool isContraction(Operation *op) {
  auto linalgOp = dyn_cast_or_null<linalg::LinalgOp>(op);
  return linalgOp && linalg::isaContractionOpInterface(linalgOp);
}

struct FuseElementwise
    : public ddp::impl::DDPFuseElementwiseBase<FuseElementwise> {
  void runOnOperation() override {
    // Upstream's fusion takes linalg.generic ops: the named ones a hook
    // writes (linalg.map, linalg.reduce, linalg.add, ...) become generics
    // first. Contractions keep their names (and BLAS), fills and
    // convolutions theirs.
    SmallVector<linalg::LinalgOp> named;
    unsigned before = 0;
    getOperation().walk([&](linalg::LinalgOp op) {
      ++before;
      if (!isa<linalg::GenericOp, linalg::FillOp>(op) && !isContraction(op) &&
          !linalg::isaConvolutionOpInterface(op) && op.hasPureTensorSemantics())
        named.push_back(op);
    });
    // Nothing to fuse (a step that only communicates, PowerSGD's): no
    // walk of the pattern driver over its many ops.
    if (before < 2)
      return markAllAnalysesPreserved();
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : named) {
      rewriter.setInsertionPoint(op);
      (void)linalg::generalizeNamedOp(rewriter, op);
    }
    auto countOps = [&] {
      unsigned count = 0;
      getOperation().walk([&](linalg::LinalgOp) { ++count; });
      return count;
    };
    RewritePatternSet patterns(&getContext());
    linalg::ControlFusionFn control = [](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      Operation *consumer = fused->getOwner();
      // One use: a producer read by two consumers would be computed twice.
      return producer && producer->hasOneUse() && !isContraction(producer) &&
             !isContraction(consumer);
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    // What fusion leaves: operands a fused body no longer reads, results
    // no one uses.
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config)))
      return signalPassFailure();
    unsigned after = countOps();
    numFused += before > after ? before - after : 0;
  }
};

} // namespace
