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

/// Inserts, before `op`, the reduction of `inputs` within the node: a mean
/// stays a mean (the mean of the node means is the world's), a sum a sum.
SmallVector<Value> reduceWithinNode(RewriterBase &rewriter, Operation *op,
                                    ReductionKind kind, ValueRange inputs,
                                    CommRole role) {
  rewriter.setInsertionPoint(op);
  auto node = AllReduceOp::create(rewriter, op->getLoc(), kind, inputs, role,
                                  CommGroup::node);
  return SmallVector<Value>(node.getResults());
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
      if (auto allreduce = dyn_cast<AllReduceOp>(op)) {
        SmallVector<Value> local =
            reduceWithinNode(rewriter, op, allreduce.getKind(),
                             allreduce.getInputs(), allreduce.getRole());
        rewriter.modifyOpInPlace(op, [&] {
          allreduce.getInputsMutable().assign(local);
          allreduce.setGroup(CommGroup::across_nodes);
        });
      } else {
        auto start = cast<AllReduceStartOp>(op);
        SmallVector<Value> local = reduceWithinNode(
            rewriter, op, start.getKind(), start.getInputs(), start.getRole());
        rewriter.modifyOpInPlace(op, [&] {
          start.getInputsMutable().assign(local);
          start.setGroup(CommGroup::across_nodes);
        });
      }
      ++numSplit;
    }
  }
};

} // namespace
