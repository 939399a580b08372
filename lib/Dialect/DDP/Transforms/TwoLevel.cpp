//===- TwoLevel.cpp - reduce within each node, then across nodes ----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A two-level allreduce, as the PowerSGD paper and NCCL's tree/ring
// hierarchies place it: the ranks of a machine reduce exactly through shared
// memory, and only one copy per machine crosses the network. Compression
// passes that run afterwards see the `across_nodes` allreduce (gradients,
// on the slow link) and leave the `node` one alone (AllReduceOp::
// isCompressible), so the compression is applied where the bytes are
// expensive and to fewer participants.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPTWOLEVEL
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// Splits `op`, an allreduce or a started one over the world, in place:
/// the same reduction within the node is inserted before it (a mean stays a
/// mean: the mean of the node means is the world's; a sum a sum), and `op`
/// reduces that across nodes.
template <typename OpTy> void splitInTwo(RewriterBase &rewriter, OpTy op) {
  rewriter.setInsertionPoint(op);
  auto node = AllReduceOp::create(rewriter, op.getLoc(), op.getKind(),
                                  op.getInputs(), op.getRole(),
                                  CommGroup::node);
  rewriter.modifyOpInPlace(op, [&] {
    op.getInputsMutable().assign(node.getResults());
    op.setGroup(CommGroup::across_nodes);
  });
}

struct DDPTwoLevelPass
    : public PassWithOptionNames<ddp::impl::DDPTwoLevelBase<DDPTwoLevelPass>> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Operation *> worldOps;
    getOperation().walk([&](Operation *op) {
      if (auto allreduce = dyn_cast<AllReduceOp>(op);
          allreduce && allreduce.getGroup() == CommGroup::world)
        worldOps.push_back(op);
      if (auto start = dyn_cast<AllReduceStartOp>(op);
          start && start.getGroup() == CommGroup::world)
        worldOps.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : worldOps) {
      if (auto allreduce = dyn_cast<AllReduceOp>(op))
        splitInTwo(rewriter, allreduce);
      else
        splitInTwo(rewriter, cast<AllReduceStartOp>(op));
      ++numSplit;
    }
  }
};

} // namespace
