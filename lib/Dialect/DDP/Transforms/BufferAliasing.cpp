//===- BufferAliasing.cpp - when a ddp op may use a buffer in place
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//--------===//
//
// The analyses behind two decisions of the bufferization models
// (BufferizableOpInterfaceImpl.cpp): whether ddp.allreduce_start reduces a
// gradient's own buffer, and whether ddp.state_load returns the state's own
// buffer instead of a copy. test-ddp-buffer-aliasing reports both.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/BufferAliasing.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace mlir::ddp;

/// Whether `value` is an argument of its function (not of a nested block).
bool mlir::ddp::isFunctionArgument(Value value) {
  auto argument = dyn_cast<BlockArgument>(value);
  if (!argument)
    return false;
  auto function =
      dyn_cast_or_null<FunctionOpInterface>(argument.getOwner()->getParentOp());
  return function && argument.getOwner() == &function.getFunctionBody().front();
}

bool mlir::ddp::isFunctionArgumentTensor(Value value) {
  if (auto toTensor = value.getDefiningOp<bufferization::ToTensorOp>())
    value = toTensor.getBuffer();
  return isFunctionArgument(value);
}

/// Whether allreduce_start may reduce `input`'s own buffer. The analysis
/// cannot see that ddp.wait's results are the start's buffers, so the start
/// reduces in place only where no other handle on the buffer can exist: the
/// buffer is a function argument that One-Shot left in place (the start
/// declares a write to arguments, so a non-writable one arrives as a copy and
/// callers in the module know it changes) or a fresh allocation written only
/// by ddp ops or copies before the start, and every other use of it never runs
/// in the same execution as the start (the other branch of the warm-up scf.if).
/// Otherwise it reduces a copy. Like the warm-up's allreduce, it then leaves
/// the reduced gradient in the argument's buffer in both branches, so the
/// step's results have an ownership known at compile time (a fresh buffer in
/// one branch and the argument in the other made buffer deallocation keep a
/// run-time ownership flag per gradient and compare every buffer with every
/// result at the end of the step). Runs while bufferizing, when `input` is
/// the to_tensor of its buffer.
bool mlir::ddp::reducesInPlace(AllReduceStartOp start, Value input) {
  // The buffer: a function argument (tensor-typed until One-Shot rewrites
  // the signature) or what a bufferized producer's to_tensor wraps.
  auto toTensor = input.getDefiningOp<bufferization::ToTensorOp>();
  Value buffer = toTensor ? toTensor.getBuffer() : input;
  bool fresh = bool(buffer.getDefiningOp<memref::AllocOp>());
  if (isa<BlockArgument>(buffer)) {
    if (!isFunctionArgument(buffer))
      return false;
  } else if (!fresh) {
    return false;
  }
  if (auto type = dyn_cast<MemRefType>(buffer.getType());
      type && !type.getLayout().isIdentity())
    return false;
  // An op bufferized earlier reaches the buffer through a to_buffer that
  // One-Shot places next to the value's definition: judge its users.
  auto exclusive = [&](Operation *user) {
    if (auto toBuffer = dyn_cast<bufferization::ToBufferOp>(user))
      return llvm::all_of(toBuffer->getUsers(), [&](Operation *inner) {
        return insideMutuallyExclusiveRegions(start, inner);
      });
    return insideMutuallyExclusiveRegions(start, user);
  };
  unsigned usesByStart = 0;
  for (OpOperand &use : input.getUses()) {
    if (use.getOwner() == start.getOperation())
      ++usesByStart;
    else if (!exclusive(use.getOwner()))
      return false;
  }
  if (toTensor) {
    for (Operation *user : buffer.getUsers()) {
      if (user == toTensor.getOperation() ||
          insideMutuallyExclusiveRegions(start, user))
        continue;
      // One-Shot's copy of an argument the start may not write is a
      // memref.copy into a fresh buffer.
      bool producer = fresh &&
                      (isa_and_nonnull<DDPDialect>(user->getDialect()) ||
                       isa<memref::CopyOp>(user)) &&
                      user->getBlock() == start->getBlock() &&
                      user->isBeforeInBlock(start);
      if (!producer)
        return false;
    }
  }
  return usesByStart == 1;
}

/// The first store of `load`'s state after it that runs whenever the load
/// does: a store in the load's block or in the block of an op holding it.
/// Null if there is none, or if another load or store of the state or a call
/// (the callee could read or write the state) may run in between. Looks only
/// at the ops between the two, not at the whole function: with one state per
/// gradient, a search of the whole function for each load was quadratic.
Operation *mlir::ddp::nextStoreOfState(StateLoadOp load) {
  StringRef name = load.getState();
  auto touchesState = [&](Operation *op) {
    WalkResult result = op->walk([&](Operation *inner) {
      auto other = dyn_cast<StateLoadOp>(inner);
      auto store = dyn_cast<StateStoreOp>(inner);
      if ((other && other.getState() == name) ||
          (store && store.getState() == name) || isa<CallOpInterface>(inner))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    return result.wasInterrupted();
  };
  for (Operation *at = load; at && !isa<FunctionOpInterface>(at);
       at = at->getParentOp()) {
    for (Operation *op = at->getNextNode(); op; op = op->getNextNode()) {
      if (auto store = dyn_cast<StateStoreOp>(op);
          store && store.getState() == name)
        return store;
      if (touchesState(op))
        return nullptr;
    }
  }
  return nullptr;
}

/// Whether `load` may return the state's own buffer: a store S of the state
/// runs after the load whenever the load does (nextStoreOfState), with no
/// loop between them; and every value that may alias the loaded buffer is
/// used before S (or by it), by ddp ops only. Then updating the buffer in
/// place is invisible: S overwrites the state anyway, nobody reads the old
/// value after it, and no other load of the state runs in between (one
/// before the load either copied or was done with the buffer before a store
/// of its own).
bool mlir::ddp::mayAliasStateBuffer(StateLoadOp load,
                                    const BufferizationOptions &options) {
  Operation *firstStore = nextStoreOfState(load);
  if (!firstStore)
    return false;
  Block *block = firstStore->getBlock();
  // Not in a loop that the store is outside of: every iteration would
  // update the one buffer.
  if (getEnclosingRepetitiveRegion(load.getOperation()) !=
      getEnclosingRepetitiveRegion(firstStore))
    return false;
  // Follow the aliases the bufferization models declare; an op without a
  // model may alias any of its tensor results.
  AnalysisState state(options);
  SmallVector<Value> worklist{load.getResult()};
  DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      Operation *inBlock = block->findAncestorOpInBlock(*user);
      if (!inBlock ||
          (inBlock != firstStore && !inBlock->isBeforeInBlock(firstStore)))
        return false;
      // Only runtime calls touch it (on GPUs it is device memory that host
      // code cannot read).
      if (!isa_and_nonnull<DDPDialect>(user->getDialect()) &&
          !isa<scf::YieldOp>(user))
        return false;
      if (auto bufferizable = options.dynCastBufferizableOp(user)) {
        for (const AliasingValue &alias :
             bufferizable.getAliasingValues(use, state))
          worklist.push_back(alias.value);
        continue;
      }
      for (Value result : user->getResults())
        if (isa<TensorType>(result.getType()))
          worklist.push_back(result);
    }
  }
  return true;
}
