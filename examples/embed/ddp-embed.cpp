//===- ddp-embed.cpp - a compiler that embeds the ddp pipelines
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//------------===//
//
// What a training-stack compiler does with ddp-opt's library: register what
// the pipelines need with one call, build the compression pipeline from an
// options struct, run it over a module, optionally lower the result to the
// LLVM dialect, and print it.
//
//   ddp-embed model.mlir [powersgd-rank] [--lower] [--without-models]
//
// --without-models registers the dialects but not their bufferization
// models, to show what a host that forgets them is told.
//
//===----------------------------------------------------------------------===//

#include "ddp/InitAll.h"
#include "ddp/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include "ddp/Dialect/DDP/IR/DDP.h"

#include <cstdlib>

int main(int argc, char **argv) {
  const char *file = nullptr;
  unsigned rank = 2;
  bool lower = false, withoutModels = false;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "--lower")
      lower = true;
    else if (arg == "--without-models")
      withoutModels = true;
    else if (!file)
      file = argv[i];
    else
      rank = unsigned(std::atoi(argv[i]));
  }
  if (!file) {
    llvm::errs() << "usage: ddp-embed model.mlir [powersgd-rank] [--lower] "
                    "[--without-models]\n";
    return 2;
  }

  mlir::DialectRegistry registry;
  if (withoutModels)
    registry.insert<mlir::ddp::DDPDialect, mlir::arith::ArithDialect,
                    mlir::func::FuncDialect, mlir::tensor::TensorDialect>();
  else
    mlir::ddp::registerAllDialects(registry); // everything the pipelines need
  mlir::MLIRContext context(registry);

  // Diagnostics (the parser's, the passes') point into the file.
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(file, sourceMgr, &context);
  if (!module)
    return 1; // the parser reported why

  mlir::ddp::CompressionPipelineOptions options;
  options.powersgdRank = rank;
  options.startIter = 0;
  options.narrow = mlir::ddp::NarrowType::fp16;
  mlir::PassManager pm(&context);
  mlir::ddp::buildCompressionPipeline(pm, options);
  if (lower)
    mlir::ddp::buildLoweringPipeline(pm);
  if (mlir::failed(pm.run(*module)))
    return 1; // the passes reported why, at the ops' locations
  module->print(llvm::outs());
  llvm::outs() << "\n";
  return 0;
}
