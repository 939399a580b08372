//===- InitAll.cpp - register everything ddp-opt offers -------------------===//

#include "ddp/InitAll.h"

#include "ddp/Conversion/Passes.h"
#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Pipelines/Pipelines.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void mlir::ddp::registerAllDialects(DialectRegistry &registry) {
  registry.insert<
      DDPDialect, arith::ArithDialect, bufferization::BufferizationDialect,
      cf::ControlFlowDialect, func::FuncDialect, linalg::LinalgDialect,
      math::MathDialect, memref::MemRefDialect, ml_program::MLProgramDialect,
      scf::SCFDialect, shard::ShardDialect, tensor::TensorDialect>();
}

void mlir::ddp::registerAllPasses() {
  registerDDPPasses();
  registerDDPConversionPasses();
  registerPipelines();
  registerTransformsPasses();
}
