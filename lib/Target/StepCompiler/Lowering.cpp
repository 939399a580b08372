//===- Lowering.cpp - a step module down to the LLVM dialect --------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Target/StepCompiler.h"

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/InitAll.h"
#include "ddp/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"

using namespace mlir;

DialectRegistry mlir::ddp::makeStepCompilerRegistry() {
  DialectRegistry registry;
  ddp::registerAllDialects(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  // A step's parallel loops: calls of libomp (__kmpc_fork_call and the
  // work-sharing loop's bounds).
  registerOpenMPDialectTranslation(registry);
  return registry;
}

LogicalResult mlir::ddp::lowerStep(ModuleOp module, StringRef entry,
                                   const LoweringOptions &options) {
  // Both hosts (the JIT loop and ddprt-step-runner) give the step its
  // argument buffers and free each buffer once, also when a result is an
  // argument's buffer: the step returns in-place results without a copy
  // (ddp-donate-arguments).
  MLIRContext *context = module.getContext();
  if (auto function = module.lookupSymbol<func::FuncOp>(entry))
    context->getOrLoadDialect<DDPDialect>()
        ->getDonateArgumentsAttrHelper()
        .setAttr(function, UnitAttr::get(context));
  // The step is verified once, lowered: a verification of the whole module
  // after each of the pipeline's passes (what ddp-opt does, unless
  // --verify-each=false) costs a fifth of the lowering of a large step, and
  // the input was verified when it was parsed. A pass that broke the IR
  // still stops the step before it is translated, with the verifier's
  // message.
  PassManager pm(context);
  pm.enableVerifier(false);
  buildLoweringPipeline(pm, options);
  if (failed(pm.run(module)))
    return failure();
  return verify(module);
}
