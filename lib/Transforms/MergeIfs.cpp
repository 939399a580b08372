//===- MergeIfs.cpp - merge adjacent scf.if ops on one condition ----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A step has one scf.if per bucket on the same condition. Upstream's
// CombineIfs merges them pairwise (each merge moves the whole grown body)
// and its ConditionPropagation walks all uses of the condition for each if:
// quadratic in the number of buckets. Merging each run at once is linear.
//
//===----------------------------------------------------------------------===//

#include "ddp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_MERGEIFS
#include "ddp/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// Moves the ops of `from` but its terminator before the terminator of
/// `into`.
void appendBody(Block &from, Block &into) {
  into.getOperations().splice(into.getTerminator()->getIterator(),
                              from.getOperations(), from.begin(),
                              from.getTerminator()->getIterator());
}

struct MergeIfs : public ddp::impl::MergeIfsBase<MergeIfs> {
  void runOnOperation() override {
    unsigned merged = 0;
    SmallVector<Block *> worklist;
    for (Block &block : getOperation().getBody())
      worklist.push_back(&block);
    while (!worklist.empty()) {
      Block *block = worklist.pop_back_val();
      merged += mergeRuns(*block);
      // The merged ifs' blocks are visited once, after their merge.
      for (Operation &op : *block)
        for (Region &region : op.getRegions())
          for (Block &nested : region)
            worklist.push_back(&nested);
    }
    if (merged == 0)
      markAllAnalysesPreserved(); // nothing changed: no verification either
  }

  static bool mergeable(Operation *op) {
    auto ifOp = dyn_cast<scf::IfOp>(op);
    return ifOp && ifOp.getNumResults() == 0;
  }

  /// Merges the runs in `block`; returns how many ifs went.
  unsigned mergeRuns(Block &block) {
    unsigned merged = 0;
    for (Operation *op = block.empty() ? nullptr : &block.front(); op;
         op = op->getNextNode()) {
      if (!mergeable(op))
        continue;
      auto first = cast<scf::IfOp>(op);
      while (Operation *next = first->getNextNode()) {
        if (!mergeable(next))
          break;
        auto ifOp = cast<scf::IfOp>(next);
        if (ifOp.getCondition() != first.getCondition())
          break;
        appendBody(*ifOp.thenBlock(), *first.thenBlock());
        if (Block *otherElse = ifOp.elseBlock()) {
          if (!first.elseBlock()) {
            Block *elseBlock = new Block();
            first.getElseRegion().push_back(elseBlock);
            OpBuilder builder = OpBuilder::atBlockEnd(elseBlock);
            scf::YieldOp::create(builder, first.getLoc());
          }
          appendBody(*otherElse, *first.elseBlock());
        }
        ifOp->erase();
        ++numMerged;
        ++merged;
      }
    }
    return merged;
  }
};

} // namespace
