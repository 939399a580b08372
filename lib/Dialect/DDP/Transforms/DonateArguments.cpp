//===- DonateArguments.cpp - return donated argument buffers as they are --===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Ownership-based deallocation must clone a returned function argument:
// the caller of a public function keeps its arguments. A caller that hands
// its buffers over (ddp-run's step loop, which reads fresh inputs every
// step) marks the function `ddp.donate_arguments`, and the clone is
// dropped: for a gradient-sync step that is one copy of every gradient per
// step saved. A result computed into a new buffer (an fp16 step's gradients
// widened back from the f16 sum) is computed into its argument's buffer
// instead, once nothing reads that argument any more: no new buffer, and a
// caller whose destination is the argument (PyTorch's DDP bucket) has
// nothing to copy.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPDONATEARGUMENTS
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// Whether every op that reaches `argument` through uses (its users, their
/// results' users, and so on: views, requests of collectives in flight,
/// pointers taken from it) lies, in the entry block, before `point`. Then
/// the argument's buffer is free from `point` on.
bool unusedFrom(BlockArgument argument, Operation *point) {
  Block &entry = *argument.getOwner();
  SmallVector<Value> worklist{argument};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      Operation *ancestor = entry.findAncestorOpInBlock(*user);
      if (!ancestor || !ancestor->isBeforeInBlock(point))
        return false;
      llvm::append_range(worklist, user->getResults());
    }
  }
  return true;
}

/// Result `index` of `function` is a new buffer of its argument's type:
/// the buffer is replaced by the argument's where nothing uses the argument
/// after the buffer is allocated. Result i only ever takes argument i's
/// buffer: a caller whose destinations are its arguments (the step host,
/// in place) then finds each result where it goes.
bool reuseArgument(func::FuncOp function, func::ReturnOp ret, unsigned index,
                   IRRewriter &rewriter) {
  if (index >= function.getNumArguments())
    return false;
  Value result = ret.getOperand(index);
  auto alloc = result.getDefiningOp<memref::AllocOp>();
  BlockArgument argument = function.getArgument(index);
  if (!alloc || alloc->getBlock() != &function.front() ||
      alloc.getType() != argument.getType() ||
      !alloc.getType().getLayout().isIdentity())
    return false;
  // Returned once, never freed: the caller owns it through the result.
  if (llvm::count(ret.getOperands(), result) != 1 ||
      !llvm::all_of(alloc->getUsers(), [](Operation *user) {
        return !isa<memref::DeallocOp, bufferization::DeallocOp>(user);
      }))
    return false;
  if (!unusedFrom(argument, alloc))
    return false;
  rewriter.replaceOp(alloc, argument);
  return true;
}

struct DonateArguments
    : public ddp::impl::DDPDonateArgumentsBase<DonateArguments> {
  void runOnOperation() override {
    auto donated = getContext()
                       .getLoadedDialect<DDPDialect>()
                       ->getDonateArgumentsAttrHelper();
    IRRewriter rewriter(&getContext());
    unsigned donatedHere = 0;
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (!donated.isAttrPresent(function) || function.isExternal())
        continue;
      // An argument is returned as itself once; a second result of the same
      // buffer stays a copy, so that no two results share a buffer.
      llvm::SmallDenseSet<Value> returned;
      function.walk([&](bufferization::CloneOp clone) {
        auto argument = dyn_cast<BlockArgument>(clone.getInput());
        if (!argument || argument.getOwner() != &function.front() ||
            returned.contains(argument))
          return;
        if (!llvm::all_of(clone->getUsers(), [](Operation *user) {
              return isa<func::ReturnOp>(user);
            }))
          return;
        if (!clone.getOutput().hasOneUse())
          return;
        returned.insert(argument);
        rewriter.replaceOp(clone, argument);
        ++numDonated;
        ++donatedHere;
      });
      if (!function.getBody().hasOneBlock())
        continue;
      auto ret = dyn_cast<func::ReturnOp>(function.front().getTerminator());
      if (!ret)
        continue;
      for (unsigned index = 0; index < ret.getNumOperands(); ++index)
        if (reuseArgument(function, ret, index, rewriter)) {
          ++numReused;
          ++donatedHere;
        }
    }
    if (donatedHere == 0)
      markAllAnalysesPreserved(); // nothing changed: no verification either
  }
};
} // namespace
