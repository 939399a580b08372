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

std::vector<std::string> mlir::ddp::resultGradientNames(func::FuncOp function) {
  unsigned count = function.getNumResults();
  std::vector<std::string> names(count);
  StringAttr attrName = nameAttrName(function.getContext());
  ArrayAttr recorded = function.getAllResultAttrs();
  SmallVector<func::ReturnOp> returns;
  if (!function.isExternal())
    function.walk([&](func::ReturnOp op) { returns.push_back(op); });
  for (unsigned r = 0; r < count; ++r) {
    if (recorded)
      if (auto name = cast<DictionaryAttr>(recorded[r]).getAs<StringAttr>(
              attrName)) {
        names[r] = name.getValue().str();
        continue;
      }
    // The argument every return gives back (the allreduce of), if one.
    std::optional<unsigned> argument;
    bool agree = !returns.empty();
    for (func::ReturnOp returnOp : returns) {
      BlockArgument returned =
          reducedArgument(function, returnOp.getOperand(r));
      if (!returned || (argument && *argument != returned.getArgNumber())) {
        agree = false;
        break;
      }
      argument = returned.getArgNumber();
    }
    if (agree)
      names[r] = argumentGradientName(function, *argument);
  }
  return names;
}

/// `dicts` (one per argument or result, or none) with `name` set to
/// `values[i]` where that is not empty and differs; whether anything did.
static bool withNames(ArrayAttr dicts, size_t count, StringAttr name,
                      ArrayRef<std::string> values,
                      SmallVectorImpl<DictionaryAttr> &out) {
  MLIRContext *context = name.getContext();
  bool changed = false;
  out.clear();
  for (size_t i = 0; i < count; ++i) {
    DictionaryAttr dict = dicts ? cast<DictionaryAttr>(dicts[i])
                                : DictionaryAttr::get(context);
    if (!values[i].empty() && !dict.get(name)) {
      NamedAttrList attrs(dict);
      attrs.set(name, StringAttr::get(context, values[i]));
      dict = attrs.getDictionary(context);
      changed = true;
    }
    out.push_back(dict);
  }
  return changed;
}

static bool recordGradientNames(func::FuncOp function, StringAttr attrName) {
  if (function.isExternal())
    return false;
  bool changed = false;
  // Names from locations become attributes; attributes read back from a
  // printed module become location names again. All attributes are set
  // at once (one per argument would rebuild the list each time).
  std::vector<std::string> fromLocations;
  for (BlockArgument argument : function.getArguments()) {
    std::string fromLoc = locationName(argument.getLoc());
    auto recorded = function.getArgAttrOfType<StringAttr>(
        argument.getArgNumber(), attrName);
    if (recorded && fromLoc != recorded.getValue()) {
      argument.setLoc(NameLoc::get(recorded, argument.getLoc()));
      changed = true;
    }
    fromLocations.push_back(recorded ? std::string() : fromLoc);
  }
  SmallVector<DictionaryAttr> dicts;
  if (withNames(function.getAllArgAttrs(), function.getNumArguments(),
                attrName, fromLocations, dicts)) {
    function.setAllArgAttrs(dicts);
    changed = true;
  }
  if (withNames(function.getAllResultAttrs(), function.getNumResults(),
                attrName, resultGradientNames(function), dicts)) {
    function.setAllResultAttrs(dicts);
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
  // The dictionaries without `name`; none at all if nothing else is left.
  auto without = [&](ArrayAttr all, SmallVectorImpl<DictionaryAttr> &out) {
    bool anyLeft = false;
    out.clear();
    for (Attribute attr : all) {
      NamedAttrList attrs(cast<DictionaryAttr>(attr));
      attrs.erase(name);
      anyLeft |= !attrs.empty();
      out.push_back(attrs.getDictionary(root->getContext()));
    }
    return anyLeft;
  };
  SmallVector<DictionaryAttr> dicts;
  root->walk<WalkOrder::PreOrder>([&](func::FuncOp function) {
    if (ArrayAttr all = function.getAllArgAttrs()) {
      if (without(all, dicts))
        function.setAllArgAttrs(dicts);
      else
        function.removeArgAttrsAttr();
    }
    if (ArrayAttr all = function.getAllResultAttrs()) {
      if (without(all, dicts))
        function.setAllResultAttrs(dicts);
      else
        function.removeResAttrsAttr();
    }
    return WalkResult::skip();
  });
}
