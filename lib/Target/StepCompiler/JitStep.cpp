//===- JitStep.cpp - a step compiled just in time -------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Target/StepCompiler.h"

#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"

#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;

static llvm::Error stepError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<std::unique_ptr<ExecutionEngine>> mlir::ddp::jitCompileStep(
    ModuleOp lowered, llvm::ArrayRef<stephost::HostFunction> hostFunctions,
    llvm::StringRef llvmOutput) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
#if defined(DDP_OPENMP_LIBRARY)
  // Parallel loops call libomp: loaded into the process, whose symbols the
  // JIT resolves them from (a host that never calls libomp itself may
  // have been linked without it).
  std::string ompError;
  if (llvm::sys::DynamicLibrary::LoadLibraryPermanently(DDP_OPENMP_LIBRARY,
                                                        &ompError))
    return stepError("cannot load libomp (" + std::string(DDP_OPENMP_LIBRARY) +
                     ") for the step's parallel loops: " + ompError);
#else
  // Parallel loops call libomp, which this process then lacks.
  if (lowered.walk([](omp::ParallelOp) { return WalkResult::interrupt(); })
          .wasInterrupted())
    return stepError("the step has parallel loops, and this build has no "
                     "libomp (libomp-22-dev) to run them: run it with "
                     "--parallel-loops=false");
#endif
  ExecutionEngineOptions engineOptions;
  // No profiler notifications: the perf listener left a 24 KB dump under
  // /tmp/.debug/jit for every run, never removed. (The GDB listener only
  // registers the code in memory.)
  engineOptions.enablePerfNotificationListener = false;
  // Optimized for this machine's CPU (the JIT's code generator targets it
  // too): without a target machine the optimizer does not know the vector
  // width, and the loops of compiled compute (a quantizer's, a model's)
  // stay scalar. Floating-point results do not change: nothing allows
  // reassociation or contraction.
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    return stepError("cannot describe this machine: " +
                     llvm::toString(builder.takeError()));
  auto machine = builder->createTargetMachine();
  if (!machine)
    return stepError("cannot target this machine: " +
                     llvm::toString(machine.takeError()));
  std::shared_ptr<llvm::TargetMachine> host = std::move(*machine);
  auto optimize = makeOptimizingTransformer(2, 0, host.get());
  // ExecutionEngineOptions holds a function_ref: the callable must outlive
  // ExecutionEngine::create, which calls it.
  auto transform = [&](llvm::Module *module) -> llvm::Error {
    describeHostFunctions(*module);
    if (llvm::Error e = optimize(module))
      return e;
    if (!llvmOutput.empty())
      return writeLLVM(*module, llvmOutput);
    return llvm::Error::success();
  };
  engineOptions.transformer = transform;
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
