//===- ReassociateSums.cpp - vectorizable sums in innermost reductions ----===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Dialect/DDP/Transforms/Contractions.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPREASSOCIATESUMS
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// Adds `reassoc` to the fast-math flags of `op`.
template <typename OpTy> void allowReassociation(OpTy op) {
  op.setFastmath(op.getFastmath() | arith::FastMathFlags::reassoc);
}

struct ReassociateSums
    : public ddp::impl::DDPReassociateSumsBase<ReassociateSums> {
  void runOnOperation() override {
    getOperation().walk([&](linalg::LinalgOp op) {
      SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
      if (iterators.empty() || iterators.back() != utils::IteratorType::reduction)
        return;
      // A matmul's sum over K is BLAS's, or, with contractions=loops, in
      // source order as that option promises.
      if (isBlasContraction(op))
        return;
      Block *body = op.getBlock();
      auto yield = cast<linalg::YieldOp>(body->getTerminator());
      for (OpOperand &init : op.getDpsInitsMutable()) {
        BlockArgument running = op.getMatchingBlockArgument(&init);
        unsigned result = init.getOperandNumber() - op.getNumDpsInputs();
        Operation *combiner = yield.getOperand(result).getDefiningOp();
        if (!combiner || combiner->getBlock() != body ||
            !llvm::is_contained(combiner->getOperands(), Value(running)))
          continue;
        if (auto add = dyn_cast<arith::AddFOp>(combiner)) {
          allowReassociation(add);
          ++numReassociated;
        } else if (auto mul = dyn_cast<arith::MulFOp>(combiner)) {
          allowReassociation(mul);
          ++numReassociated;
        }
      }
    });
  }
};

} // namespace
