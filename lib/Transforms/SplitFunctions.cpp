//===- SplitFunctions.cpp - outline runs of a large function's body ------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Upstream's passes after bufferization cost the square of a function's
// size on a straight-line step with thousands of buckets (ownership-based
// deallocation compares every buffer live at a bucket with every other;
// scf-to-cf splits the block after every top-level scf.if, moving the rest
// of the block each time), and each runs on one thread per function.
// Outlining consecutive runs of top-level ops into private functions of
// bounded size makes them linear in the step and lets them run in parallel
// over the parts.
//
// The cut comes before deallocation, whose function-boundary contract is
// that a callee owns none of its arguments and hands its caller every
// result. A part therefore only returns buffers it allocates (the caller
// frees them); a view of the function's arguments (or another pure op of
// invariants) that a later part uses is rebuilt there, as constants are; a cut
// is not made where any other buffer is live across it. Nothing is copied.
//
//===----------------------------------------------------------------------===//

#include "ddp/Transforms/Passes.h"

#include "mlir/Conversion/ConvertToLLVM/ToLLVMInterface.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_SPLITFUNCTIONS
#include "ddp/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// Whether a value may be passed to an outlined function: builtin types
/// that func-to-llvm converts, types whose dialect lowers them to LLVM
/// itself (a ConvertToLLVMPatternInterface: a started collective's request
/// becomes a pointer), and no stack allocation (it would not outlive the
/// call).
bool canPass(Value value) {
  Type type = value.getType();
  if (!isa<MemRefType, IndexType, IntegerType, FloatType>(type) &&
      !type.getDialect()
           .getRegisteredInterface<ConvertToLLVMPatternInterface>())
    return false;
  return !value.getDefiningOp<memref::AllocaOp>();
}

/// Whether an outlined function may return a value: one it can be passed,
/// and for a buffer, one that the op defining it allocates (a part hands
/// its caller the ownership of every buffer it returns, and no two of them
/// are one buffer).
bool canReturn(Value value) {
  if (!canPass(value))
    return false;
  if (!isa<MemRefType>(value.getType()))
    return true;
  Operation *def = value.getDefiningOp();
  return def && hasEffect<MemoryEffects::Allocate>(def, value);
}

/// The op of `body` that defines `value` or holds the block that does; null
/// if `value` comes from outside `body` or is an argument of `body`.
Operation *ancestorIn(Block &body, Value value) {
  Operation *def = value.getDefiningOp();
  return body.findAncestorOpInBlock(
      def ? *def : *value.getParentBlock()->getParentOp());
}

bool isConstant(Value value) {
  Operation *def = value.getDefiningOp();
  return def && def->getNumOperands() == 0 && matchPattern(value, m_Constant());
}

struct SplitFunctions : public ddp::impl::SplitFunctionsBase<SplitFunctions> {
  using Base::Base;

  void runOnOperation() override {
    SymbolTable symbols(getOperation());
    for (auto function :
         llvm::make_early_inc_range(getOperation().getOps<func::FuncOp>())) {
      // A part is as large as it was cut to be.
      if (function.isExternal() || !function.getBody().hasOneBlock() ||
          isSplitPart(function) ||
          !llvm::all_of(function.getArguments(), canPass))
        continue;
      // The branches of a top-level scf.if first (ddp-schedule-overlap
      // versions a step into one), so that the function's block then
      // weighs what is left in it.
      Operation *after = function;
      unsigned parts = 0;
      Block &top = function.getBody().front();
      for (auto ifOp : top.getOps<scf::IfOp>())
        for (Region &region : ifOp->getRegions())
          if (region.hasOneBlock())
            split(function, region.front(), after, parts, symbols);
      split(function, top, after, parts, symbols);
    }
  }

  /// Cuts `body` (the function's block, or a block nested in it) into runs
  /// of about max-ops ops, each outlined into @<function>.part<k>.
  void split(func::FuncOp function, Block &body, Operation *&after,
             unsigned &parts, SymbolTable &symbols) {
    // Whether `value` is defined outside `body` (an argument of the
    // function, or a value of the block around a nested one).
    auto outside = [&](Value value) {
      return !ancestorIn(body, value) && value.getParentBlock() != &body;
    };
    // Every value from outside that the block uses must cross a call.
    bool crossable = true;
    body.walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (outside(operand) && !canPass(operand) && !isConstant(operand))
          crossable = false;
    });
    if (!crossable)
      return;

    // Invariants stay in the function, first (once it is cut), and are
    // rebuilt in each part that uses them: constants, and pure ops (no side
    // effect, speculatable) of invariants and of values from outside (views
    // of the arguments).
    llvm::SmallPtrSet<Operation *, 32> invariants;
    SmallVector<Operation *> invariantOps;
    for (Operation &op : body) {
      if (op.getNumResults() == 0 || op.getNumRegions() != 0 ||
          op.hasTrait<OpTrait::IsTerminator>() || !isPure(&op))
        continue;
      bool invariant = llvm::all_of(op.getOperands(), [&](Value operand) {
        if (outside(operand) ||
            (operand.getParentBlock() == &body && isa<BlockArgument>(operand)))
          return canPass(operand) || isConstant(operand);
        return invariants.contains(operand.getDefiningOp());
      });
      if (!invariant)
        continue;
      invariants.insert(&op);
      invariantOps.push_back(&op);
    }

    SmallVector<Operation *> ops;
    DenseMap<Operation *, unsigned> position;
    for (Operation &op : body) {
      if (invariants.contains(&op))
        continue;
      position[&op] = ops.size();
      ops.push_back(&op);
    }
    size_t numOps = ops.size() - 1; // the terminator stays

    // Where each top-level result is used last (in top-level positions), and
    // the cuts that a value which cannot cross a call forbids.
    std::vector<int> blockedDelta(ops.size() + 1, 0);
    std::vector<unsigned> weight(ops.size(), 0);
    unsigned total = 0;
    for (size_t i = 0; i < numOps; ++i) {
      ops[i]->walk([&](Operation *) { ++weight[i]; });
      total += weight[i];
      for (Value result : ops[i]->getResults()) {
        size_t last = i;
        for (Operation *user : result.getUsers())
          last = std::max<size_t>(
              last, position.lookup(body.findAncestorOpInBlock(*user)));
        // Cuts after i .. last - 1 would make `result` cross a call.
        if (last > i && !canReturn(result)) {
          ++blockedDelta[i];
          --blockedDelta[last];
        }
      }
    }
    if (total <= maxOps)
      return;

    // Runs of about maxOps ops, cut only where allowed.
    SmallVector<std::pair<size_t, size_t>> runs;
    size_t begin = 0;
    unsigned size = 0;
    int blocked = 0;
    for (size_t i = 0; i < numOps; ++i) {
      size += weight[i];
      blocked += blockedDelta[i];
      if (size >= maxOps && blocked == 0) {
        runs.push_back({begin, i + 1});
        begin = i + 1;
        size = 0;
      }
    }
    // A value that cannot cross a call and that the terminator uses keeps
    // the ops from its definition on in the function.
    if (begin < numOps && blocked == 0)
      runs.push_back({begin, numOps});
    if (runs.size() + (begin < numOps && blocked != 0) < 2)
      return;

    for (Operation *op : llvm::reverse(invariantOps))
      op->moveBefore(&body, body.begin());

    for (auto run : runs)
      after = outline(
          function, body, after,
          ArrayRef<Operation *>(ops).slice(run.first, run.second - run.first),
          parts++, invariants, symbols);
  }

  /// Moves `run` (consecutive top-level ops of `function`) into a new
  /// private function, placed after `after`, and calls it in their place.
  func::FuncOp outline(func::FuncOp function, Block &body, Operation *after,
                       ArrayRef<Operation *> run, size_t k,
                       const llvm::SmallPtrSetImpl<Operation *> &invariants,
                       SymbolTable &symbols) {
    llvm::SmallPtrSet<Operation *, 32> inRun(run.begin(), run.end());
    // Whether `value` is defined by an op of the run or inside one.
    auto definedInRun = [&](Value value) {
      Operation *ancestor = ancestorIn(body, value);
      return ancestor && inRun.contains(ancestor);
    };
    auto isInvariant = [&](Value value) {
      Operation *def = value.getDefiningOp();
      return def && invariants.contains(def);
    };

    // Inputs: values from outside the run (this block, enclosing blocks,
    // the function's arguments) that it uses, in order of first use.
    // Constants and the invariants of the block (with what they use) are
    // rebuilt in the new function instead.
    SmallVector<Value> inputs;
    llvm::SetVector<Operation *> rebuilt;
    llvm::SetVector<Value> seen;
    std::function<void(Value)> use = [&](Value operand) {
      if (definedInRun(operand) || !seen.insert(operand))
        return;
      if (isInvariant(operand)) {
        Operation *def = operand.getDefiningOp();
        for (Value nested : def->getOperands())
          use(nested);
        rebuilt.insert(def);
      } else if (isConstant(operand)) {
        rebuilt.insert(operand.getDefiningOp());
      } else {
        inputs.push_back(operand);
      }
    };
    for (Operation *op : run)
      op->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          use(operand);
      });
    // Outputs: results of the run used after it.
    SmallVector<Value> outputs;
    for (Operation *op : run)
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              return !inRun.contains(body.findAncestorOpInBlock(*user));
            }))
          outputs.push_back(result);

    OpBuilder builder(function.getContext());
    builder.setInsertionPointAfter(after);
    Location loc = run.front()->getLoc();
    auto part = func::FuncOp::create(
        builder, loc, (function.getName() + ".part" + Twine(k)).str(),
        builder.getFunctionType(ValueRange(inputs).getTypes(),
                                ValueRange(outputs).getTypes()));
    part.setPrivate();
    part->setAttr(kSplitPartAttrName, UnitAttr::get(function.getContext()));
    symbols.insert(part);
    Block *entry = part.addEntryBlock();

    // The call, where the run was.
    builder.setInsertionPoint(run.front());
    auto call = func::CallOp::create(builder, loc, part, inputs);

    // What is rebuilt, in the order it was collected: an invariant after
    // the invariants it uses.
    IRMapping mapping;
    for (auto [input, argument] : llvm::zip(inputs, entry->getArguments()))
      mapping.map(input, argument);
    builder.setInsertionPointToStart(entry);
    for (Operation *op : rebuilt)
      builder.clone(*op, mapping);
    entry->getOperations().splice(entry->end(), body.getOperations(),
                                  run.front()->getIterator(),
                                  std::next(run.back()->getIterator()));
    for (Operation &op : *entry)
      op.walk([&](Operation *nested) {
        for (OpOperand &operand : nested->getOpOperands())
          if (Value mapped = mapping.lookupOrNull(operand.get()))
            operand.set(mapped);
      });
    builder.setInsertionPointToEnd(entry);
    func::ReturnOp::create(builder, loc, outputs);

    for (auto [output, result] : llvm::zip(outputs, call.getResults()))
      output.replaceUsesWithIf(result, [&](OpOperand &use) {
        return use.getOwner()->getParentOfType<func::FuncOp>() != part;
      });
    ++numParts;
    return part;
  }
};

} // namespace
