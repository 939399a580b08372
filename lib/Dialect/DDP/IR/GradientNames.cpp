//===- GradientNames.cpp - the names hosts know gradients by --------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Dialect/DDP/IR/GradientNames.h"
#include "ddp/Dialect/DDP/IR/DDP.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace mlir::ddp;

/// The name a function argument's location gives it; empty if none.
static StringRef nameOfLocation(Location loc) {
  if (auto named = dyn_cast<NameLoc>(loc))
    return named.getName().getValue();
  return "";
}

/// The argument of `function` that `value` (returned by it) is the
/// allreduce of, or the argument itself; null otherwise.
static BlockArgument reducedArgument(func::FuncOp function, Value value) {
  if (auto allreduce = value.getDefiningOp<AllReduceOp>())
    value = allreduce.getInputs()[cast<OpResult>(value).getResultNumber()];
  else if (auto allreduce = value.getDefiningOp<shard::AllReduceOp>())
    value = allreduce.getInput();
  auto argument = dyn_cast<BlockArgument>(value);
  if (!argument || argument.getOwner() != &function.getBody().front())
    return nullptr;
  return argument;
}

static bool recordGradientNames(func::FuncOp function, StringAttr attrName) {
  if (function.isExternal())
    return false;
  bool changed = false;
  Block &entry = function.getBody().front();
  for (BlockArgument argument : entry.getArguments()) {
    unsigned i = argument.getArgNumber();
    StringRef fromLoc = nameOfLocation(argument.getLoc());
    auto recorded =
        function.getArgAttrOfType<StringAttr>(i, attrName);
    if (!recorded && !fromLoc.empty()) {
      function.setArgAttr(i, attrName,
                          StringAttr::get(function.getContext(), fromLoc));
      changed = true;
    } else if (recorded && fromLoc != recorded.getValue()) {
      argument.setLoc(NameLoc::get(recorded, argument.getLoc()));
      changed = true;
    }
  }
  auto returnOp = dyn_cast<func::ReturnOp>(entry.getTerminator());
  if (!returnOp)
    return changed;
  for (auto [r, value] : llvm::enumerate(returnOp.getOperands())) {
    if (function.getResultAttr(r, attrName))
      continue;
    BlockArgument argument = reducedArgument(function, value);
    if (!argument)
      continue;
    if (auto name = function.getArgAttrOfType<StringAttr>(
            argument.getArgNumber(), attrName)) {
      function.setResultAttr(r, attrName, name);
      changed = true;
    }
  }
  return changed;
}

bool mlir::ddp::recordGradientNames(Operation *root) {
  // Every pass that calls this depends on the ddp dialect.
  auto *dialect = root->getContext()->getLoadedDialect<DDPDialect>();
  assert(dialect && "recordGradientNames needs the ddp dialect loaded");
  bool changed = false;
  root->walk<WalkOrder::PreOrder>([&](func::FuncOp function) {
    changed |= ::recordGradientNames(function,
                                     dialect->getNameAttrHelper().getName());
    return WalkResult::skip();
  });
  return changed;
}

void mlir::ddp::stripGradientNames(Operation *root) {
  auto *dialect = root->getContext()->getLoadedDialect<DDPDialect>();
  if (!dialect)
    return;
  StringAttr name = dialect->getNameAttrHelper().getName();
  root->walk<WalkOrder::PreOrder>([&](func::FuncOp function) {
    auto strip = [&](ArrayAttr all, auto remove, auto dropAll) {
      if (!all)
        return;
      bool anyLeft = false;
      for (auto [i, attrs] : llvm::enumerate(all.getAsRange<DictionaryAttr>())) {
        if (attrs.get(name))
          remove(unsigned(i));
        anyLeft |= attrs.size() > (attrs.get(name) ? 1u : 0u);
      }
      if (!anyLeft)
        dropAll();
    };
    strip(
        function.getAllArgAttrs(),
        [&](unsigned i) { function.removeArgAttr(i, name); },
        [&] { function.removeArgAttrsAttr(); });
    strip(
        function.getAllResultAttrs(),
        [&](unsigned i) { function.removeResultAttr(i, name); },
        [&] { function.removeResAttrsAttr(); });
    return WalkResult::skip();
  });
}
