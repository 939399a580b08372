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
// step saved.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPDONATEARGUMENTS
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {
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
    }
    if (donatedHere == 0)
      markAllAnalysesPreserved(); // nothing changed: no verification either
  }
};
} // namespace
