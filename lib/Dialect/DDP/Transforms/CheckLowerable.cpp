//===- CheckLowerable.cpp - bufferization models are registered -----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One-Shot Bufferize looks up each tensor op's BufferizableOpInterface in
// the context. The models are registered by the host (external models),
// so a host that forgot them gets a failure deep in the pipeline, or a
// fatal error for an interface the ddp dialect promised. Checked here
// first, with a located error that names the registration call. Also
// refused here: a bucket ddp-plan annotated that no stage compressed.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/Transforms/CostModel.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/StringSet.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPCHECKLOWERABLE
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

/// Whether One-Shot Bufferize (with function boundaries) must handle `op`.
static bool takesOrMakesTensors(Operation *op) {
  auto isTensor = [](Type type) { return isa<TensorType>(type); };
  if (llvm::any_of(op->getOperandTypes(), isTensor) ||
      llvm::any_of(op->getResultTypes(), isTensor))
    return true;
  if (auto function = dyn_cast<FunctionOpInterface>(op))
    return llvm::any_of(function.getArgumentTypes(), isTensor) ||
           llvm::any_of(function.getResultTypes(), isTensor);
  return false;
}

namespace {
struct DDPCheckLowerablePass
    : public ddp::impl::DDPCheckLowerableBase<DDPCheckLowerablePass> {
  void runOnOperation() override {
    llvm::StringSet<> reported;
    bool failed = false;
    // Outer ops first: a function is reported before the ops in it.
    getOperation().walk<WalkOrder::PreOrder>([&](Operation *op) {
      // ddp-plan only annotates: a decision no stage took would be sent
      // plain, silently.
      if (CompressionAttr decision = plannedDecision(op)) {
        failed = true;
        op->emitError()
            << "this bucket is planned as " << decision
            << " but was never compressed (it would be sent plain): "
            << plannedStagesAdvice();
      }
      // A hook's state template is instantiated per bucket by ddp-apply-hook;
      // the runtime cannot allocate one of unknown size.
      if (auto state = dyn_cast<StateOp>(op)) {
        auto tensor = dyn_cast<RankedTensorType>(state.getType());
        if (tensor && !tensor.hasStaticShape()) {
          failed = true;
          op->emitError() << "state '" << state.getSymName() << "' has type "
                          << tensor
                          << ", with a dynamic size: only a hook's state may "
                             "(--ddp-apply-hook declares one of each "
                             "bucket's size); give it a static shape";
        }
        return;
      }
      if (!takesOrMakesTensors(op))
        return;
      OperationName name = op->getName();
      if (name.hasInterface<bufferization::BufferizableOpInterface>())
        return;
      failed = true;
      if (!reported.insert(name.getStringRef()).second)
        return;
      if (!name.isRegistered()) {
        op->emitError() << "'" << name
                        << "' is not a registered op, so ddp-lower-to-llvm "
                           "cannot bufferize it";
        return;
      }
      op->emitError()
          << "'" << name
          << "' has no bufferization model in this context, so "
             "ddp-lower-to-llvm cannot lower it: register the models before "
             "creating the context, e.g. with "
             "mlir::ddp::registerAllDialects(registry) (ddp/InitAll.h), "
             "which registers every dialect and model ddp's pipelines need";
    });
    if (failed)
      signalPassFailure();
    // It only looks: the pass manager need not verify the module again.
    markAllAnalysesPreserved();
  }
};
} // namespace
