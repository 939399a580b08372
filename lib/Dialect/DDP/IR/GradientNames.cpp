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

std::string mlir::ddp::locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location part : fused.getLocations())
      if (std::string name = locationName(part); !name.empty())
        return name;
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return locationName(callSite.getCallee());
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

static StringAttr nameAttrName(MLIRContext *context) {
  return StringAttr::get(context, DDPDialect::getDialectNamespace() + ".name");
}

std::string mlir::ddp::argumentGradientName(func::FuncOp function,
                                            unsigned index) {
  if (auto recorded = function.getArgAttrOfType<StringAttr>(
          index, nameAttrName(function.getContext())))
    return recorded.getValue().str();
  if (function.isExternal())
    return "";
  return locationName(function.getArgument(index).getLoc());
}

std::string mlir::ddp::resultGradientName(func::FuncOp function,
                                          unsigned index) {
  if (auto recorded = function.getResultAttrOfType<StringAttr>(
          index, nameAttrName(function.getContext())))
    return recorded.getValue().str();
  if (function.isExternal())
    return "";
  // The argument every return gives back (the allreduce of), if one.
  std::optional<unsigned> argument;
  bool agree = true;
  function.walk([&](func::ReturnOp returnOp) {
    BlockArgument returned =
        reducedArgument(function, returnOp.getOperand(index));
    if (!returned || (argument && *argument != returned.getArgNumber()))
      agree = false;
    else
      argument = returned.getArgNumber();
  });
  return agree && argument ? argumentGradientName(function, *argument) : "";
}

static bool recordGradientNames(func::FuncOp function, StringAttr attrName) {
  if (function.isExternal())
    return false;
  bool changed = false;
  for (BlockArgument argument : function.getArguments()) {
    unsigned i = argument.getArgNumber();
    std::string fromLoc = locationName(argument.getLoc());
    auto recorded = function.getArgAttrOfType<StringAttr>(i, attrName);
    if (!recorded && !fromLoc.empty()) {
      function.setArgAttr(i, attrName,
                          StringAttr::get(function.getContext(), fromLoc));
      changed = true;
    } else if (recorded && fromLoc != recorded.getValue()) {
      argument.setLoc(NameLoc::get(recorded, argument.getLoc()));
      changed = true;
    }
  }
  for (unsigned r = 0; r < function.getNumResults(); ++r) {
    if (function.getResultAttr(r, attrName))
      continue;
    std::string name = resultGradientName(function, r);
    if (name.empty())
      continue;
    function.setResultAttr(r, attrName,
                           StringAttr::get(function.getContext(), name));
    changed = true;
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
