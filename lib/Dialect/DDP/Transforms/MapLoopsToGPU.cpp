//===- MapLoopsToGPU.cpp - the step's own loops as gpu.launch kernels -----===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One walk over the host's blocks. A parallel loop or a copy becomes a
// launch of one thread per iteration (a linear index over the whole
// iteration space: any rank, any bounds, no tiling to get right); other
// loop nests that touch buffers, with the stores just before them, become
// a launch of one thread, which runs them as the CPU would. Everything
// with a runtime call inside stays on the host, and the walk goes into it.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPMAPLOOPSTOGPU
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// Buffers of index or i1 elements hold the deallocation's bookkeeping
/// (which pointers a function owns), which the host reads.
bool isBookkeeping(Value memref) {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  return element.isIndex() || element.isInteger(1);
}

/// Whether `memref` is host memory the device cannot address: the host's
/// stack (memref.alloca) or a global of the module, seen through views.
bool isHostOnly(Value memref) {
  while (Operation *def = memref.getDefiningOp()) {
    if (isa<memref::AllocaOp, memref::GetGlobalOp>(def))
      return true;
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view)
      return false;
    memref = view.getViewSource();
  }
  return false;
}

/// Whether `op` and what it contains may run in a kernel: no calls (of the
/// runtime or of functions), no ddp ops, no allocation or free, no global
/// (a host address), no loop that is parallel itself (a kernel of one
/// thread runs loops in order), nothing already on the device, and no
/// buffer from outside that lives on the host's stack or in a global.
bool runsOnDevice(Operation *op) {
  WalkResult result = op->walk([&](Operation *nested) {
    if (isa<CallOpInterface>(nested) ||
        isa_and_nonnull<DDPDialect, gpu::GPUDialect>(nested->getDialect()) ||
        isa<memref::AllocOp, memref::AllocaOp, memref::DeallocOp,
            memref::ReallocOp, memref::GetGlobalOp>(nested) ||
        (nested != op && isa<scf::ParallelOp>(nested)))
      return WalkResult::interrupt();
    for (Value operand : nested->getOperands())
      if (isa<MemRefType>(operand.getType()) &&
          !op->isAncestor(operand.getParentBlock()->getParentOp()) &&
          isHostOnly(operand))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !result.wasInterrupted();
}

/// Whether `op` (or what it contains) reads or writes a buffer that is not
/// bookkeeping.
bool touchesData(Operation *op) {
  WalkResult result = op->walk([](Operation *nested) {
    auto effects = dyn_cast<MemoryEffectOpInterface>(nested);
    if (!effects)
      return nested->hasTrait<OpTrait::HasRecursiveMemoryEffects>()
                 ? WalkResult::advance()
                 : WalkResult::interrupt();
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (MemoryEffects::EffectInstance &instance : instances) {
      Value value = instance.getValue();
      if (!value || !isa<MemRefType>(value.getType()) || !isBookkeeping(value))
        if (isa<MemoryEffects::Read, MemoryEffects::Write>(
                instance.getEffect()))
          return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return result.wasInterrupted();
}

/// Whether `op` belongs in a one-thread kernel: a store into data, or a
/// loop nest (no results) over data that may run on the device.
bool isSerialKernelPart(Operation *op) {
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return !isBookkeeping(store.getMemRef()) && runsOnDevice(op);
  return op->getNumRegions() != 0 && op->getNumResults() == 0 &&
         runsOnDevice(op) && touchesData(op);
}

/// Whether `op` may sit between the parts of a one-thread kernel and stay
/// on the host, before the launch: pure scalar code, or an allocation
/// (which touches no memory in use).
bool mayStayBefore(Operation *op) {
  return op->getNumRegions() == 0 && !op->hasTrait<OpTrait::IsTerminator>() &&
         (isPure(op) || isa<memref::AllocOp>(op));
}

/// A host load of data whose value only reaches, through pure scalar ops
/// of its block, stores into data (a loss divided by the batch and stored
/// as the step's result): the load, those ops and the stores need no host,
/// and go into `chain`. Everything between the load and the last of them
/// must be able to join one kernel with them (pure ops stay before it).
bool isSinkableLoad(memref::LoadOp load, llvm::SetVector<Operation *> &chain) {
  if (isBookkeeping(load.getMemRef()) || !runsOnDevice(load))
    return false;
  Block *block = load->getBlock();
  llvm::SetVector<Operation *> found;
  found.insert(load);
  SmallVector<Operation *> worklist{load};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    for (Operation *user : op->getUsers()) {
      if (user->getBlock() != block)
        return false;
      if (found.contains(user))
        continue;
      if (auto store = dyn_cast<memref::StoreOp>(user)) {
        if (!isSerialKernelPart(store))
          return false;
        found.insert(store);
        continue;
      }
      if (user->getNumRegions() != 0 || !isPure(user) ||
          user->hasTrait<OpTrait::IsTerminator>())
        return false;
      found.insert(user);
      worklist.push_back(user);
    }
  }
  Operation *last = load;
  for (Operation *op : found)
    if (last->isBeforeInBlock(op))
      last = op;
  // (A parallel loop or a copy is a launch of its own, which would split
  // the kernel.)
  for (Operation *op = load->getNextNode(); op != last; op = op->getNextNode())
    if (isa<scf::ParallelOp, memref::CopyOp>(op) ||
        (!found.contains(op) && !isSerialKernelPart(op) && !mayStayBefore(op)))
      return false;
  chain.insert(found.begin(), found.end());
  return true;
}

struct MapLoopsToGPU : public ddp::impl::DDPMapLoopsToGPUBase<MapLoopsToGPU> {
  using Base::Base;

  void runOnOperation() override {
    if (blockSize < 1 || blockSize > 1024) {
      getOperation().emitError()
          << "ddp-map-loops-to-gpu: block-size must be in [1, 1024], got "
          << int64_t(blockSize);
      return signalPassFailure();
    }
    if (getOperation().isExternal())
      return;
    IRRewriter rewriter(&getContext());
    mapBlock(rewriter, getOperation().getBody().front());
  }

  void mapBlock(IRRewriter &rewriter, Block &block) {
    // The one-thread kernel being gathered: its parts, in order; and the
    // loads (with what they feed) that join it.
    SmallVector<Operation *> serial;
    llvm::SetVector<Operation *> sunk;
    auto flush = [&] {
      if (!serial.empty())
        launchSerial(rewriter, serial);
      serial.clear();
    };
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (auto loop = dyn_cast<scf::ParallelOp>(op);
          loop && loop.getNumResults() == 0 && runsOnDevice(loop)) {
        flush();
        launchParallel(rewriter, loop);
        continue;
      }
      if (auto copy = dyn_cast<memref::CopyOp>(op);
          copy && !isBookkeeping(copy.getTarget()) && runsOnDevice(copy)) {
        flush();
        launchCopy(rewriter, copy);
        continue;
      }
      auto load = dyn_cast<memref::LoadOp>(op);
      if (sunk.contains(&op) || isSerialKernelPart(&op) ||
          (load && isSinkableLoad(load, sunk))) {
        serial.push_back(&op);
        continue;
      }
      // Pure scalar code and allocations may sit between the parts of one
      // kernel; they stay on the host, before the launch.
      if (!serial.empty() && mayStayBefore(&op))
        continue;
      flush();
      // Host control flow (a branch or loop around runtime calls): its
      // blocks have loops of their own.
      for (Region &region : op.getRegions())
        for (Block &nested : region)
          mapBlock(rewriter, nested);
    }
    flush();
  }

  /// A launch of `threads` threads in blocks of blockSize (one block of
  /// one thread if `threads` is null), at the rewriter's insertion point;
  /// returns the launch and the thread's linear index (null for one
  /// thread).
  std::pair<gpu::LaunchOp, Value> createLaunch(IRRewriter &rewriter,
                                               Location loc, Value threads) {
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    Value grid = one, block = one;
    if (threads) {
      block = arith::ConstantIndexOp::create(rewriter, loc, blockSize);
      Value rounded = arith::AddIOp::create(
          rewriter, loc, threads,
          arith::ConstantIndexOp::create(rewriter, loc, blockSize - 1));
      grid = arith::DivUIOp::create(rewriter, loc, rounded, block);
    }
    auto launch =
        gpu::LaunchOp::create(rewriter, loc, grid, one, one, block, one, one);
    Block &body = launch.getBody().front();
    rewriter.setInsertionPointToStart(&body);
    gpu::TerminatorOp::create(rewriter, loc);
    rewriter.setInsertionPointToStart(&body);
    Value linear;
    if (threads) {
      Value blockId = launch.getBlockIds().x;
      Value threadId = launch.getThreadIds().x;
      Value base = arith::MulIOp::create(rewriter, loc, blockId, block);
      linear = arith::AddIOp::create(rewriter, loc, base, threadId);
    }
    return {launch, linear};
  }

  /// The iterations of `lower` to `upper` by `step` (a positive step; none
  /// if upper <= lower).
  static Value tripCount(IRRewriter &rewriter, Location loc, Value lower,
                         Value upper, Value step) {
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    Value span = arith::SubIOp::create(rewriter, loc, upper, lower);
    Value rounded = arith::AddIOp::create(
        rewriter, loc, span, arith::SubIOp::create(rewriter, loc, step, one));
    Value count = arith::DivSIOp::create(rewriter, loc, rounded, step);
    return arith::MaxSIOp::create(rewriter, loc, count, zero);
  }

  /// Within a launch: `linear` < product(`counts`), and then each
  /// dimension's index (the last one fastest), built by `body` inside the
  /// guard.
  static void guardAndDelinearize(IRRewriter &rewriter, Location loc,
                                  Value linear, Value total,
                                  ArrayRef<Value> counts,
                                  function_ref<void(ArrayRef<Value>)> body) {
    Value inside = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::ult, linear, total);
    auto guard = scf::IfOp::create(rewriter, loc, inside);
    rewriter.setInsertionPointToStart(&guard.getThenRegion().front());
    SmallVector<Value> indices(counts.size());
    Value rest = linear;
    for (size_t d = counts.size(); d-- > 0;) {
      if (d == 0) {
        indices[d] = rest;
        break;
      }
      indices[d] = arith::RemUIOp::create(rewriter, loc, rest, counts[d]);
      rest = arith::DivUIOp::create(rewriter, loc, rest, counts[d]);
    }
    body(indices);
  }

  /// A launch of one thread per point of the iteration space `counts`
  /// (the last dimension fastest), at the rewriter's insertion point; `body`
  /// builds a thread's work from its point's indices, inside the guard.
  void launchEach(IRRewriter &rewriter, Location loc, ArrayRef<Value> counts,
                  function_ref<void(ArrayRef<Value>)> body) {
    Value total;
    for (Value count : counts)
      total =
          total ? arith::MulIOp::create(rewriter, loc, total, count) : count;
    auto [launch, linear] = createLaunch(rewriter, loc, total);
    guardAndDelinearize(rewriter, loc, linear, total, counts, body);
    ++numParallel;
  }

  void launchParallel(IRRewriter &rewriter, scf::ParallelOp loop) {
    Location loc = loop.getLoc();
    rewriter.setInsertionPoint(loop);
    SmallVector<Value> counts;
    for (auto [lower, upper, step] :
         llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep()))
      counts.push_back(tripCount(rewriter, loc, lower, upper, step));
    launchEach(rewriter, loc, counts, [&](ArrayRef<Value> indices) {
      SmallVector<Value> ivs;
      for (auto [index, lower, step] :
           llvm::zip(indices, loop.getLowerBound(), loop.getStep())) {
        Value offset = arith::MulIOp::create(rewriter, loc, index, step);
        ivs.push_back(arith::AddIOp::create(rewriter, loc, lower, offset));
      }
      Block *body = loop.getBody();
      rewriter.eraseOp(body->getTerminator());
      rewriter.inlineBlockBefore(body, rewriter.getInsertionBlock(),
                                 rewriter.getInsertionPoint(), ivs);
    });
    rewriter.eraseOp(loop);
  }

  void launchCopy(IRRewriter &rewriter, memref::CopyOp copy) {
    Location loc = copy.getLoc();
    rewriter.setInsertionPoint(copy);
    Value source = copy.getSource(), target = copy.getTarget();
    auto type = cast<MemRefType>(source.getType());
    if (type.getRank() == 0) {
      createLaunch(rewriter, loc, Value());
      Value value = memref::LoadOp::create(rewriter, loc, source);
      memref::StoreOp::create(rewriter, loc, value, target);
      rewriter.eraseOp(copy);
      ++numSerial;
      return;
    }
    SmallVector<Value> counts;
    for (int64_t d = 0; d < type.getRank(); ++d)
      counts.push_back(memref::DimOp::create(rewriter, loc, source, d));
    launchEach(rewriter, loc, counts, [&](ArrayRef<Value> indices) {
      Value value = memref::LoadOp::create(rewriter, loc, source, indices);
      memref::StoreOp::create(rewriter, loc, value, target, indices);
    });
    rewriter.eraseOp(copy);
  }

  /// `parts` (in one block, in order, with only pure ops between them) in
  /// one launch of one thread, where the last of them was.
  void launchSerial(IRRewriter &rewriter, ArrayRef<Operation *> parts) {
    rewriter.setInsertionPoint(parts.back());
    auto [launch, linear] =
        createLaunch(rewriter, parts.back()->getLoc(), Value());
    Operation *terminator = launch.getBody().front().getTerminator();
    for (Operation *part : parts)
      rewriter.moveOpBefore(part, terminator);
    ++numSerial;
  }
};

} // namespace
