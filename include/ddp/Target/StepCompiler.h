//===- StepCompiler.h - compile a step function for a host ------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Compiles a module's step function (tensor level, with ddp ops, after the
// insertion passes) for the hosts of the runtime tree (ddprt-host): ahead of
// time into a shared library and step.json that ddprt-step-runner loads, or
// just in time into a packed entry that the step loop calls. ddp-run is a
// command line around it; an embedding compiler calls it the same way:
//
//   MLIRContext context(ddp::makeStepCompilerRegistry());
//   ... parse `module` ...
//   auto signature = ddp::readStepSignature(*module);   // its entry, types
//   ddp::StepLibraryOptions options{"out/", "step.mlir"};
//   llvm::Error e = ddp::compileStepLibrary(*module, *signature, options);
//
// Failures are returned, never printed or exited on: an llvm::Error holds
// one message per problem (no tool prefix, no newline); a failed lowering
// reports through the context's diagnostics first. Code is called through
// the packed entry `_mlir_<entry>` with the descriptor words of
// ddprt-host/MemRef.h.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_TARGET_STEPCOMPILER_H
#define DDP_TARGET_STEPCOMPILER_H

#include "ddp/Pipelines/Pipelines.h"
#include "ddprt-host/HostFunctions.h"
#include "ddprt-host/StepSignature.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>

namespace mlir {
class ExecutionEngine;

namespace ddp {

/// The dialects a step module may use and their translations to LLVM IR.
DialectRegistry makeStepCompilerRegistry();

/// The step's signature as a host passes it: `entry` if given (it must name
/// a function of the module with a body), otherwise the module's only
/// public function with ddp or shard.all_reduce ops (itself or in a
/// function it calls); its arguments and results (ranked tensors of what
/// .npy holds); the module's states. Each problem is one error of the list.
llvm::Expected<stephost::StepSignature>
readStepSignature(ModuleOp module,
                  std::optional<llvm::StringRef> entry = std::nullopt);

/// Lowers `module` in place to the LLVM dialect (ddp-lower-to-llvm), the
/// entry's arguments donated: a host gives the step its argument buffers and
/// frees each buffer once, also when a result is an argument's buffer.
/// Failures are reported through the context's diagnostics. The module is
/// verified once, after the pipeline, not after each pass. `options` are
/// ddp-lower-to-llvm's (run-time checks, how contractions run).
LogicalResult lowerStep(ModuleOp module, llvm::StringRef entry,
                        const LoweringOptions &options = {});

struct StepLibraryOptions {
  /// Where the library (signature.library), its object and step.json go;
  /// created if missing.
  std::string directory;
  /// What messages call the module (its file name).
  std::string moduleName = "the module";
  /// ddp-lower-to-llvm's options.
  LoweringOptions lowering;
  /// The CPU the library is for: "" any of this architecture (x86-64
  /// without AVX), "native" this machine's, or a name LLVM knows
  /// (x86-64-v3, skylake-avx512, znver4, ...).
  std::string targetCPU;
  /// Where to write the optimized LLVM IR too ("": nowhere).
  std::string llvmOutput;
};

/// Ahead of time: lowers `module` (lowerStep), compiles it for any CPU of
/// this machine's architecture and writes the shared library with the entry
/// and its packed form `_mlir_<entry>`, and step.json. The library calls the
/// host functions through slots the loader fills; their names are added to
/// `signature.hostFunctions`.
/// What LLVM's optimizer may assume of the host functions a translated step
/// calls, said on their declarations and calls: the memref allocation
/// functions return memory nothing else points to (`noalias`, as malloc's),
/// so that loops over a buffer the step allocated are vectorized and their
/// reductions kept in registers. Both compilers call it before optimizing.
void describeHostFunctions(llvm::Module &module);

llvm::Error compileStepLibrary(ModuleOp module,
                               stephost::StepSignature &signature,
                               const StepLibraryOptions &options);

/// Just in time: compiles a lowered module (lowerStep) in this process, its
/// calls of host functions bound to `hostFunctions` (the same functions the
/// slots of an ahead-of-time library get). With `llvmOutput`, the optimized
/// LLVM IR is written there too.
llvm::Expected<std::unique_ptr<ExecutionEngine>>
jitCompileStep(ModuleOp lowered,
               llvm::ArrayRef<stephost::HostFunction> hostFunctions,
               llvm::StringRef llvmOutput = {});

/// Writes `module` as text to `path` (what --emit-llvm shows: the step as
/// it is compiled, optimized).
llvm::Error writeLLVM(const llvm::Module &module, llvm::StringRef path);

/// The packed entry `_mlir_<entry>` of a JIT-compiled step.
llvm::Expected<stephost::PackedFunction>
lookupStepEntry(ExecutionEngine &engine, llvm::StringRef entry);

} // namespace ddp
} // namespace mlir

#endif // DDP_TARGET_STEPCOMPILER_H
