//===- BufferizeEntrySignatures.cpp - memref signatures before One-Shot ---===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One-Shot Module Bufferize records, for each function, which returned
// tensors are equivalent to or alias which tensor arguments, by asking for
// every pair: a step with N gradients takes N arguments and returns N
// results, and N^2 queries were most of its bufferization from N = 10,000
// on. The entry points of a step (functions the host calls, which nothing
// in the module calls) need none of that information: nothing in the module
// reads it. This pass gives them the memref signature One-Shot would give
// them, so that they have no tensor argument left to compare.
//
//===----------------------------------------------------------------------===//

#include "ddp/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/StringSet.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_BUFFERIZEENTRYSIGNATURES
#include "ddp/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// A ranked tensor without encoding: what this pass rewrites.
bool isPlainTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && !tensor.getEncoding();
}

/// The memref One-Shot gives a function boundary in ddp-lower-to-llvm
/// (LayoutMapOption::IdentityLayoutMap).
MemRefType boundaryType(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return MemRefType::get(tensor.getShape(), tensor.getElementType());
}

struct BufferizeEntrySignatures
    : public ddp::impl::BufferizeEntrySignaturesBase<BufferizeEntrySignatures> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Every name a symbol use in the module refers to, gathered in one walk
    // (a use query per function would walk the module once per function).
    llvm::StringSet<> used;
    if (std::optional<SymbolTable::UseRange> uses =
            SymbolTable::getSymbolUses(&module.getBodyRegion())) {
      for (const SymbolTable::SymbolUse &use : *uses)
        used.insert(use.getSymbolRef().getRootReference().getValue());
    } else {
      // An op with an unknown symbol table: leave every signature to
      // One-Shot rather than guess which functions are called.
      return;
    }
    for (auto function : module.getOps<func::FuncOp>())
      if (!function.isExternal() && !used.contains(function.getSymName()) &&
          rewrite(function))
        ++numFunctions;
  }

  /// Rewrites `function`'s tensor arguments and results; false if it has
  /// none or has one this pass leaves to One-Shot.
  bool rewrite(func::FuncOp function) {
    FunctionType type = function.getFunctionType();
    auto types = llvm::concat<const Type>(type.getInputs(), type.getResults());
    if (llvm::none_of(types, [](Type t) { return isa<TensorType>(t); }) ||
        llvm::any_of(types, [](Type t) {
          return isa<TensorType>(t) && !isPlainTensor(t);
        }))
      return false;

    Block &entry = function.front();
    OpBuilder builder = OpBuilder::atBlockBegin(&entry);
    SmallVector<Type> inputs(type.getInputs());
    for (BlockArgument argument : entry.getArguments()) {
      Type tensorType = argument.getType();
      if (!isPlainTensor(tensorType))
        continue;
      unsigned index = argument.getArgNumber();
      auto writable = function.getArgAttrOfType<BoolAttr>(
          index, bufferization::BufferizationDialect::kWritableAttrName);
      function.removeArgAttr(
          index, bufferization::BufferizationDialect::kWritableAttrName);
      inputs[index] = boundaryType(tensorType);
      argument.setType(inputs[index]);
      auto toTensor = bufferization::ToTensorOp::create(
          builder, argument.getLoc(), tensorType, argument,
          /*restrict=*/true, /*writable=*/!writable || writable.getValue());
      argument.replaceAllUsesExcept(toTensor.getResult(), toTensor);
    }

    SmallVector<Type> results(type.getResults());
    for (Type &result : results)
      if (isPlainTensor(result))
        result = boundaryType(result);
    for (Block &block : function.getBody()) {
      auto ret = dyn_cast<func::ReturnOp>(block.getTerminator());
      if (!ret)
        continue;
      builder.setInsertionPoint(ret);
      for (OpOperand &operand : ret->getOpOperands())
        if (isPlainTensor(operand.get().getType()))
          // read_only: returning writes nothing, as func.return's own
          // model says (two results of one tensor share its buffer).
          operand.set(bufferization::ToBufferOp::create(
              builder, ret.getLoc(), results[operand.getOperandNumber()],
              operand.get(), /*read_only=*/true));
    }
    function.setType(builder.getFunctionType(inputs, results));
    return true;
  }
};

} // namespace
