//===- ExpandIntegerDivision.cpp - rounding divisions as ops LLVM lowers --===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPEXPANDINTEGERDIVISION
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;

namespace {

struct ExpandIntegerDivision
    : public ddp::impl::DDPExpandIntegerDivisionBase<ExpandIntegerDivision> {
  void runOnOperation() override {
    bool any = false;
    getOperation().walk([&](Operation *op) {
      if (isa<arith::CeilDivSIOp, arith::CeilDivUIOp, arith::FloorDivSIOp>(op))
        any = true;
      return any ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (!any)
      return markAllAnalysesPreserved();
    RewritePatternSet patterns(&getContext());
    arith::populateCeilFloorDivExpandOpsPatterns(patterns);
    // Only these patterns: nothing else to fold, walk once.
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    config.enableFolding(false);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config))) {
      getOperation().emitError()
          << "ddp-expand-integer-division: the expansion did not converge";
      signalPassFailure();
    }
  }
};

} // namespace
