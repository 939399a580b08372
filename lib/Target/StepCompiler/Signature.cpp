//===- Signature.cpp - a step's entry and signature -----------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Which function of a module is the step, and what a host passes it and
// gets back: readStepSignature.
//
//===----------------------------------------------------------------------===//

#include "ddp/Target/StepCompiler.h"

#include "ddp/Conversion/ShardToDDP/ShardToDDP.h"
#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/IR/GradientNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using stephost::StepSignature;
using stephost::TensorSpec;

namespace {

llvm::Error stepError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The .npy type string of an element type; empty if .npy cannot hold it.
std::string npyDescr(Type type) {
  if (type.isF32())
    return "<f4";
  if (type.isF64())
    return "<f8";
  if (type.isF16())
    return "<f2";
  if (type.isSignlessInteger(64))
    return "<i8";
  if (type.isSignlessInteger(32))
    return "<i4";
  if (type.isSignlessInteger(16))
    return "<i2";
  if (type.isSignlessInteger(8))
    return "|i1";
  return "";
}

std::string typeString(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

TensorSpec tensorSpec(RankedTensorType type, std::string dtype) {
  TensorSpec spec{std::move(dtype), {}};
  for (int64_t d : type.getShape())
    spec.shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
  return spec;
}

/// Whether `function` has ddp ops or shard.all_reduce, itself or in a
/// function it calls (memoized in `known`; a call cycle counts as none).
bool synchronizesGradients(func::FuncOp function, SymbolTableCollection &table,
                           llvm::DenseMap<Operation *, bool> &known) {
  auto [it, inserted] = known.try_emplace(function, false);
  if (!inserted)
    return it->second;
  bool found = false;
  function.walk([&](Operation *op) {
    if (isa_and_nonnull<ddp::DDPDialect>(op->getDialect()) ||
        isa<shard::AllReduceOp>(op)) {
      found = true;
      return WalkResult::interrupt();
    }
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto callee = table.lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      if (callee && !callee.isExternal() &&
          synchronizesGradients(callee, table, known)) {
        found = true;
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  known[function] = found;
  return found;
}

/// `entry` if given (it must name a function of the module), otherwise the
/// module's only public function that synchronizes gradients. Says which
/// functions there are when it cannot choose.
llvm::Expected<std::string> resolveEntry(ModuleOp module,
                                         std::optional<llvm::StringRef> entry) {
  std::vector<std::string> publicFunctions, candidates;
  SymbolTableCollection table;
  llvm::DenseMap<Operation *, bool> known;
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function.isExternal() || !function.isPublic())
      continue;
    publicFunctions.push_back(function.getName().str());
    if (synchronizesGradients(function, table, known))
      candidates.push_back(function.getName().str());
  }
  auto list = [](const std::vector<std::string> &names) {
    std::string text;
    for (const std::string &name : names)
      text += (text.empty() ? "@" : ", @") + name;
    return text.empty() ? std::string("none") : text;
  };
  if (entry) {
    auto function = module.lookupSymbol<func::FuncOp>(*entry);
    if (!function || function.isExternal())
      return stepError("--entry=" + *entry + ": the module has no " +
                       (function ? "body for " : "") + "func.func @" + *entry +
                       " (its public functions: " + list(publicFunctions) +
                       ")");
    return entry->str();
  }
  if (candidates.size() == 1)
    return candidates.front();
  if (candidates.empty())
    return stepError("no public function of the module has ddp or "
                     "shard.all_reduce ops to run; name one with --entry (its "
                     "public functions: " +
                     list(publicFunctions) + ")");
  return stepError("the module has " + llvm::Twine(candidates.size()) +
                   " public functions with ddp or shard.all_reduce ops: " +
                   list(candidates) + "; choose one with --entry");
}

} // namespace

llvm::Expected<StepSignature>
mlir::ddp::readStepSignature(ModuleOp module,
                             std::optional<llvm::StringRef> entry) {
  llvm::Expected<std::string> entryName = resolveEntry(module, entry);
  if (!entryName)
    return entryName.takeError();
  StepSignature signature;
  signature.entry = *entryName;
  auto function = module.lookupSymbol<func::FuncOp>(signature.entry);
  if (!function)
    return stepError("the module has no func.func @" + signature.entry);
  // The name becomes a C symbol (and `_mlir_<name>`): a NUL would cut it,
  // and the JIT's lookup of a cut name crashed.
  for (char c : signature.entry)
    if ((unsigned char)c < 0x20 || c == 0x7f)
      return stepError("the entry's name holds a NUL or another control "
                       "character, which a compiled function's name cannot "
                       "hold; rename the function");
  llvm::Error errors = llvm::Error::success();
  auto collect = [&](TypeRange types, StringRef what,
                     std::vector<TensorSpec> &out) {
    for (auto [i, type] : llvm::enumerate(types)) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      std::string dtype = tensor ? npyDescr(tensor.getElementType()) : "";
      if (dtype.empty()) {
        errors = llvm::joinErrors(
            std::move(errors),
            stepError(llvm::Twine("@") + signature.entry + " " + what + " " +
                      llvm::Twine(i) + " has type " + typeString(type) +
                      "; ddp-run passes ranked tensors of f16, f32, f64 or "
                      "integers (what .npy holds)"));
        continue;
      }
      out.push_back(tensorSpec(tensor, dtype));
    }
  };
  collect(function.getArgumentTypes(), "argument", signature.arguments);
  collect(function.getResultTypes(), "result", signature.results);
  if (errors)
    return std::move(errors);
  // Names: the `ddp.name` the passes or the importer recorded (which
  // survives printing), else the arguments' name locations; a result is
  // named after the argument it returns the average of.
  for (unsigned a = 0; a < function.getNumArguments(); ++a)
    signature.argumentNames.push_back(ddp::argumentGradientName(function, a));
  signature.resultNames = ddp::resultGradientNames(function);
  auto *dialect = module.getContext()->getOrLoadDialect<ddp::DDPDialect>();
  // The job size its collectives were written for (every function that
  // records one must agree).
  for (auto candidate : module.getOps<func::FuncOp>()) {
    IntegerAttr size = dialect->getWorldSizeAttrHelper().getAttr(candidate);
    if (!size)
      continue;
    if (signature.worldSize && signature.worldSize != size.getInt())
      return stepError("@" + candidate.getName() + " was written for " +
                       llvm::Twine(size.getInt()) +
                       " ranks but another function for " +
                       llvm::Twine(signature.worldSize));
    signature.worldSize = size.getInt();
  }
  // A module still written with upstream's shard.all_reduce: its grid.
  if (signature.worldSize == 0)
    signature.worldSize = ddp::shardWorldSize(module);
  for (auto state : module.getOps<ddp::StateOp>()) {
    stephost::StateSpec spec;
    spec.name = state.getSymName().str();
    // A scalar state (the step counter) is one element.
    Type element = state.getType();
    if (auto tensor = dyn_cast<RankedTensorType>(element)) {
      element = tensor.getElementType();
      spec.type = tensorSpec(tensor, "");
    }
    std::string dtype = element.isBF16() ? "bf16" : npyDescr(element);
    spec.type.dtype = dtype.empty() ? typeString(element) : dtype;
    if (IntegerAttr start = dialect->getStartIterAttrHelper().getAttr(state))
      spec.startIter = start.getInt();
    signature.states.push_back(spec);
  }
  return signature;
}
