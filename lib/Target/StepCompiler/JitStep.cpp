//===- JitStep.cpp - a step compiled just in time -------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Target/StepCompiler.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"

#include "llvm/Support/TargetSelect.h"

using namespace mlir;

static llvm::Error stepError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<std::unique_ptr<ExecutionEngine>> mlir::ddp::jitCompileStep(
    ModuleOp lowered, llvm::ArrayRef<stephost::HostFunction> hostFunctions) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  ExecutionEngineOptions engineOptions;
  auto optimize = makeOptimizingTransformer(2, 0, nullptr);
  engineOptions.transformer = optimize;
  engineOptions.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  auto engine = ExecutionEngine::create(lowered, engineOptions);
  if (!engine)
    return stepError("cannot JIT-compile: " +
                     llvm::toString(engine.takeError()));
  // The same functions, bound the same way, as the slots of a library
  // compiled ahead of time get.
  (*engine)->registerSymbols([&](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    for (const stephost::HostFunction &function : hostFunctions)
      symbols[interner(function.name)] = {
          llvm::orc::ExecutorAddr::fromPtr(function.address),
          llvm::JITSymbolFlags::Exported};
    return symbols;
  });
  (*engine)->initialize();
  return std::move(*engine);
}

llvm::Expected<stephost::PackedFunction>
mlir::ddp::lookupStepEntry(ExecutionEngine &engine, llvm::StringRef entry) {
  auto packed = engine.lookupPacked(entry);
  if (!packed)
    return stepError("cannot find the compiled @" + entry + ": " +
                     llvm::toString(packed.takeError()));
  return *packed;
}
