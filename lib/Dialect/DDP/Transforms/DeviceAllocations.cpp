//===- DeviceAllocations.cpp - buffers only the device touches ------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A use-list walk per allocation, through its views: launches, runtime
// calls and frees are the device's; anything else (a host load or store, a
// call, a return, a yield, the deallocation's pointer bookkeeping) keeps
// the buffer where the host reads it.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPDEVICEALLOCATIONS
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// Whether every use of `buffer` (a buffer or a view of it) is the
/// device's: a kernel launch's operand, a runtime call's, a view with such
/// uses, or a free (collected in `frees`).
bool onlyDeviceUses(Value buffer, SmallVectorImpl<memref::DeallocOp> &frees) {
  for (OpOperand &use : buffer.getUses()) {
    Operation *user = use.getOwner();
    if (isa<gpu::LaunchFuncOp>(user) ||
        isa_and_nonnull<DDPDialect>(user->getDialect()))
      continue;
    if (auto free = dyn_cast<memref::DeallocOp>(user)) {
      frees.push_back(free);
      continue;
    }
    auto view = dyn_cast<ViewLikeOpInterface>(user);
    if (view && view.getViewSource() == buffer && user->getNumResults() == 1 &&
        onlyDeviceUses(user->getResult(0), frees))
      continue;
    return false;
  }
  return true;
}

struct DeviceAllocations
    : public ddp::impl::DDPDeviceAllocationsBase<DeviceAllocations> {
  using Base::Base;

  void runOnOperation() override {
    auto helper = getContext()
                      .getOrLoadDialect<DDPDialect>()
                      ->getDeviceMemoryAttrHelper();
    UnitAttr unit = UnitAttr::get(&getContext());
    getOperation().walk([&](memref::AllocOp alloc) {
      Type element = alloc.getType().getElementType();
      if (element.isIndex() || element.isInteger(1) ||
          !alloc.getType().getLayout().isIdentity())
        return;
      SmallVector<memref::DeallocOp> frees;
      if (!onlyDeviceUses(alloc.getResult(), frees) || frees.empty())
        return;
      // A free of the allocation itself only (a view is never freed).
      if (llvm::any_of(frees, [&](memref::DeallocOp free) {
            return free.getMemref() != alloc.getResult();
          }))
        return;
      helper.setAttr(alloc, unit);
      for (memref::DeallocOp free : frees)
        helper.setAttr(free, unit);
      ++numDevice;
    });
  }
};

} // namespace
