//===- InsertHostBarriers.cpp - wait for the device where host code needs it =//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One forward walk per block with one bit of state: whether runtime calls
// were made since the last barrier. A barrier goes before the first op that
// may touch memory while the bit is set.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPINSERTHOSTBARRIERS
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// Whether `op` (not counting the ops it contains) may read, write or free
/// memory on the host. An allocation does not touch memory in use.
bool touchesMemory(Operation *op) {
  auto effects = conflictingEffects(op);
  return !effects || !effects->empty();
}

/// A runtime call, a kernel launch (ddp-map-loops-to-gpu's, outlined), or
/// a free of device memory (ddp-device-allocations'), which the runtime
/// enqueues on the compute stream the same way.
bool isRuntimeCall(Operation *op) {
  return (isa_and_nonnull<DDPDialect>(op->getDialect()) &&
          !isa<BufferHostBarrierOp>(op)) ||
         isa<gpu::LaunchFuncOp>(op) ||
         (isa<memref::DeallocOp>(op) &&
          op->hasAttr(DDPDialect::DeviceMemoryAttrHelper::getNameStr()));
}

struct Summary {
  bool callsRuntime = false;
  bool hostTouchesMemory = false;
};

/// What the ops nested in `op` do.
Summary summarize(Operation *op) {
  Summary summary;
  op->walk([&](Operation *nested) {
    if (nested == op)
      return;
    if (isRuntimeCall(nested))
      summary.callsRuntime = true;
    else if (touchesMemory(nested))
      summary.hostTouchesMemory = true;
  });
  return summary;
}

struct InsertHostBarriers
    : public ddp::impl::DDPInsertHostBarriersBase<InsertHostBarriers> {
  using Base::Base;

  void runOnOperation() override {
    for (Block &block : getOperation().getBody())
      (void)walk(block, /*busy=*/false);
  }

  /// Places barriers in `block`, entered with the device `busy` or not;
  /// returns whether it is busy at the end.
  bool walk(Block &block, bool busy) {
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (isRuntimeCall(&op)) {
        busy = true;
        continue;
      }
      if (isa<BufferHostBarrierOp>(op)) {
        busy = false;
        continue;
      }
      if (op.getNumRegions() == 0 ||
          !op.hasTrait<OpTrait::HasRecursiveMemoryEffects>()) {
        // The function's return hands the buffers to its caller. (Nested
        // blocks end in their op, which the walk of the outer block
        // continues from.)
        bool returns = op.hasTrait<OpTrait::IsTerminator>() &&
                       op.getParentOp() == getOperation();
        if (busy && (touchesMemory(&op) || returns)) {
          insertBefore(&op);
          busy = false;
        }
        continue;
      }
      Summary inside = summarize(&op);
      if (busy && inside.hostTouchesMemory) {
        insertBefore(&op);
        busy = false;
      }
      // A loop's next iteration starts after its body's runtime calls.
      bool entry =
          busy || (isa<LoopLikeOpInterface>(op) && inside.callsRuntime);
      bool exit = false;
      for (Region &region : op.getRegions())
        for (Block &nested : region)
          exit |= walk(nested, entry);
      busy = busy || exit || inside.callsRuntime;
    }
    return busy;
  }

  void insertBefore(Operation *op) {
    OpBuilder builder(op);
    BufferHostBarrierOp::create(builder, op->getLoc());
    ++numBarriers;
  }
};

} // namespace
