//===- ddp-embed.cpp - a compiler that embeds the ddp pipeline ------------===//
//
// What a training-stack compiler does with ddp-opt's library: register the
// dialect and passes, build the compression pipeline from an options struct,
// run it over a module, and print the result.
//
//   ddp-embed model.mlir [powersgd-rank]
//
//===----------------------------------------------------------------------===//

#include "ddp/InitAll.h"
#include "ddp/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

int main(int argc, char **argv) {
  if (argc < 2) {
    llvm::errs() << "usage: ddp-embed model.mlir [powersgd-rank]\n";
    return 2;
  }
  mlir::DialectRegistry registry;
  mlir::ddp::registerAllDialects(registry);
  mlir::MLIRContext context(registry);

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(argv[1], &context);
  if (!module)
    return 1; // the parser reported why

  mlir::ddp::CompressionPipelineOptions options;
  options.powersgdRank = argc > 2 ? unsigned(std::atoi(argv[2])) : 2;
  options.startIter = 0;
  options.narrow = mlir::ddp::NarrowType::fp16;
  mlir::PassManager pm(&context);
  mlir::ddp::buildCompressionPipeline(pm, options);
  if (mlir::failed(pm.run(*module)))
    return 1;
  module->print(llvm::outs());
  llvm::outs() << "\n";
  return 0;
}
