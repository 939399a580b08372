//===- SplitDeallocations.cpp - one bufferization.dealloc per allocation --===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Ownership-based deallocation ends a step with one bufferization.dealloc of
// every buffer the step may own, retaining every result. Upstream's
// canonicalization and simplification of that op are quadratic in its size
// (it is revisited at every change, and every buffer is compared with every
// retained value), and the pairs they leave are compared again at run time.
// Where each operand's allocation is known, the op splits into one dealloc
// per allocation, each small.
//
//===----------------------------------------------------------------------===//

#include "ddp/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_SPLITDEALLOCATIONS
#include "ddp/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// Replaces an scf.if on a constant condition by the region that runs.
void foldConstantIf(RewriterBase &rewriter, scf::IfOp ifOp, bool condition) {
  Region &region = condition ? ifOp.getThenRegion() : ifOp.getElseRegion();
  if (region.empty()) {
    rewriter.eraseOp(ifOp); // no else region: no results either
    return;
  }
  Block *block = &region.front();
  Operation *yield = block->getTerminator();
  SmallVector<Value> results(yield->getOperands());
  rewriter.inlineBlockBefore(block, ifOp);
  rewriter.eraseOp(yield);
  rewriter.replaceOp(ifOp, results);
}

/// Groups memref values by the allocation they are views of. Two values of
/// different groups never alias.
class AllocationOrigins {
public:
  explicit AllocationOrigins(Block &entry) : entry(entry) {}

  /// The group of `value`: the value an allocating op returned, or the
  /// entry block for all function arguments (a caller may pass one buffer
  /// twice); null where the origin is unknown.
  const void *groupOf(Value value) {
    SmallVector<Value> path;
    const void *group = nullptr;
    while (true) {
      if (auto known = groups.find(value); known != groups.end()) {
        group = known->second;
        break;
      }
      path.push_back(value);
      if (auto argument = dyn_cast<BlockArgument>(value)) {
        group = argument.getOwner() == &entry ? &entry : nullptr;
        break;
      }
      Operation *def = value.getDefiningOp();
      if (auto metadata = dyn_cast<memref::ExtractStridedMetadataOp>(def);
          metadata && value == metadata.getBaseBuffer()) {
        value = metadata.getSource();
        continue;
      }
      if (auto view = dyn_cast<ViewLikeOpInterface>(def);
          view && llvm::is_contained(def->getResults(), value)) {
        value = view.getViewSource();
        continue;
      }
      group =
          hasEffect<MemoryEffects::Allocate>(def, value) || isPartResult(def)
              ? value.getAsOpaquePointer()
              : nullptr;
      break;
    }
    for (Value visited : path)
      groups[visited] = group;
    return group;
  }

private:
  /// Whether `op` calls a part of the step: each buffer it returns is one
  /// it allocated, none shared with another result (split-functions).
  bool isPartResult(Operation *op) {
    auto call = dyn_cast<func::CallOp>(op);
    if (!call)
      return false;
    auto [known, inserted] =
        partCallees.try_emplace(call.getCalleeAttr(), false);
    if (inserted) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      known->second = callee && isSplitPart(callee);
    }
    return known->second;
  }

  Block &entry;
  DenseMap<Value, const void *> groups;
  DenseMap<Attribute, bool> partCallees;
};

struct SplitDeallocations
    : public ddp::impl::SplitDeallocationsBase<SplitDeallocations> {
  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (function.isExternal())
      return;
    IRRewriter rewriter(&getContext());

    // Inner ifs first, so that a folded outer if moves no if left to fold.
    SmallVector<scf::IfOp> constantIfs;
    function.walk([&](scf::IfOp ifOp) {
      if (matchPattern(ifOp.getCondition(), m_Constant()))
        constantIfs.push_back(ifOp);
    });
    for (scf::IfOp ifOp : constantIfs) {
      bool condition = matchPattern(ifOp.getCondition(), m_One());
      rewriter.setInsertionPoint(ifOp);
      foldConstantIf(rewriter, ifOp, condition);
      ++numFolded;
    }

    AllocationOrigins origins(function.getBody().front());
    SmallVector<bufferization::DeallocOp> deallocs;
    function.walk([&](bufferization::DeallocOp op) { deallocs.push_back(op); });
    for (bufferization::DeallocOp op : deallocs)
      if (split(rewriter, origins, op))
        ++numSplit;
  }

  /// Splits `op` by the groups of its operands; false if it is left as it
  /// is (one group, or an operand of unknown origin).
  static bool split(RewriterBase &rewriter, AllocationOrigins &origins,
                    bufferization::DeallocOp op) {
    struct Part {
      SmallVector<Value> memrefs, conditions, retained;
      SmallVector<unsigned> retainedIndices;
    };
    llvm::MapVector<const void *, Part> parts;
    for (auto [memref, condition] :
         llvm::zip(op.getMemrefs(), op.getConditions())) {
      const void *group = origins.groupOf(memref);
      if (!group)
        return false;
      parts[group].memrefs.push_back(memref);
      parts[group].conditions.push_back(condition);
    }
    SmallVector<unsigned> unaliased;
    for (auto [index, retained] : llvm::enumerate(op.getRetained())) {
      const void *group = origins.groupOf(retained);
      if (!group)
        return false;
      auto part = parts.find(group);
      if (part == parts.end()) {
        unaliased.push_back(index);
        continue;
      }
      part->second.retained.push_back(retained);
      part->second.retainedIndices.push_back(index);
    }
    if (parts.size() + (unaliased.empty() ? 0 : 1) <= 1)
      return false;

    rewriter.setInsertionPoint(op);
    SmallVector<Value> updated(op.getNumResults());
    for (auto &[group, part] : parts) {
      auto dealloc = bufferization::DeallocOp::create(
          rewriter, op.getLoc(), part.memrefs, part.conditions, part.retained);
      for (auto [index, result] :
           llvm::zip(part.retainedIndices, dealloc.getUpdatedConditions()))
        updated[index] = result;
    }
    // No listed buffer shares its allocation: not owned through this op.
    if (!unaliased.empty()) {
      Value no = arith::ConstantOp::create(rewriter, op.getLoc(),
                                           rewriter.getBoolAttr(false));
      for (unsigned index : unaliased)
        updated[index] = no;
    }
    rewriter.replaceOp(op, updated);
    return true;
  }
};
} // namespace
