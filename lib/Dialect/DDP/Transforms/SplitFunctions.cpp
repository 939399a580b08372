//===- SplitFunctions.cpp - outline runs of a large function's body ------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Upstream conversions that run after bufferization cost the square of a
// function's size on a straight-line step with thousands of buckets: each
// top-level scf.if that scf-to-cf lowers splits the block and moves every op
// after it, region simplification and the verifier walk the whole function
// again after each pass. Outlining consecutive runs of top-level ops into
// private functions of bounded size makes each of them linear in the step.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPSPLITFUNCTIONS
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// Whether a value may be passed to or returned from an outlined function:
/// types that func-to-llvm converts, requests of started allreduces (that
/// convert-ddp-to-llvm passes as pointers), and no stack allocation (it
/// would not outlive the call).
bool canCrossCall(Value value) {
  if (!isa<MemRefType, IndexType, IntegerType, FloatType, RequestType>(
          value.getType()))
    return false;
  return !value.getDefiningOp<memref::AllocaOp>();
}

bool isConstant(Value value) {
  Operation *def = value.getDefiningOp();
  return def && def->getNumOperands() == 0 && matchPattern(value, m_Constant());
}

struct SplitFunctions
    : public ddp::impl::DDPSplitFunctionsBase<SplitFunctions> {
  using DDPSplitFunctionsBase::DDPSplitFunctionsBase;

  void runOnOperation() override {
    SymbolTable symbols(getOperation());
    for (auto function :
         llvm::make_early_inc_range(getOperation().getOps<func::FuncOp>())) {
      if (function.isExternal() || !function.getBody().hasOneBlock() ||
          !llvm::all_of(function.getArguments(), canCrossCall))
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
    // Every value from outside that the block uses must cross a call.
    bool crossable = true;
    body.walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        Operation *def = operand.getDefiningOp();
        Operation *owner = def ? def : operand.getParentBlock()->getParentOp();
        if (!body.findAncestorOpInBlock(*owner) &&
            operand.getParentBlock() != &body && !canCrossCall(operand) &&
            !isConstant(operand))
          crossable = false;
      }
    });
    if (!crossable)
      return;
    // Constants stay in the function, first, and are rebuilt where used.
    SmallVector<Operation *> constantOps;
    for (Operation &op : body)
      if (op.getNumResults() == 1 && isConstant(op.getResult(0)))
        constantOps.push_back(&op);
    for (Operation *op : llvm::reverse(constantOps))
      op->moveBefore(&body, body.begin());

    SmallVector<Operation *> ops;
    DenseMap<Operation *, unsigned> position;
    for (Operation &op : llvm::drop_begin(body, constantOps.size())) {
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
        if (last > i && !canCrossCall(result) && !isConstant(result)) {
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
    if (begin < numOps)
      runs.push_back({begin, numOps});
    if (runs.size() < 2)
      return;

    for (auto run : runs)
      after = outline(
          function, body, after,
          ArrayRef<Operation *>(ops).slice(run.first, run.second - run.first),
          parts++, symbols);
  }

  /// Moves `run` (consecutive top-level ops of `function`) into a new
  /// private function, placed after `after`, and calls it in their place.
  func::FuncOp outline(func::FuncOp function, Block &body, Operation *after,
                       ArrayRef<Operation *> run, size_t k,
                       SymbolTable &symbols) {
    llvm::SmallPtrSet<Operation *, 32> inRun(run.begin(), run.end());
    // Whether `value` is defined by an op of the run or inside one.
    auto definedInRun = [&](Value value) {
      Operation *def = value.getDefiningOp();
      Operation *owner = def ? def : value.getParentBlock()->getParentOp();
      Operation *ancestor = body.findAncestorOpInBlock(*owner);
      return ancestor && inRun.contains(ancestor);
    };

    // Inputs: values from outside the run (this block, enclosing blocks,
    // the function's arguments) that it uses, in order of first use.
    // Constants are rebuilt in the new function instead.
    SmallVector<Value> inputs, constants;
    llvm::SetVector<Value> seen;
    for (Operation *op : run)
      op->walk([&](Operation *nested) {
        for (Value operand : nested->getOperands()) {
          if (definedInRun(operand) || !seen.insert(operand))
            continue;
          (isConstant(operand) ? constants : inputs).push_back(operand);
        }
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
    function.getContext()
        ->getLoadedDialect<DDPDialect>()
        ->getPartAttrHelper()
        .setAttr(part, UnitAttr::get(function.getContext()));
    symbols.insert(part);
    Block *entry = part.addEntryBlock();

    // The call, where the run was.
    builder.setInsertionPoint(run.front());
    auto call = func::CallOp::create(builder, loc, part, inputs);

    IRMapping mapping;
    builder.setInsertionPointToStart(entry);
    for (Value constant : constants)
      mapping.map(constant,
                  builder.clone(*constant.getDefiningOp())
                      ->getResult(cast<OpResult>(constant).getResultNumber()));
    for (auto [input, argument] : llvm::zip(inputs, entry->getArguments()))
      mapping.map(input, argument);
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
