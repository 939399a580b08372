//===- TestBufferAliasing.cpp - report the ddp aliasing analyses ----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// test-ddp-buffer-aliasing: a remark on every ddp.allreduce_start input
// (whether it is reduced in its own buffer) and every tensor ddp.state_load
// (whether it may return the state's own buffer), from the analyses in
// ddp/Dialect/DDP/Transforms/BufferAliasing.h, so that lit tests can pin
// them down apart from bufferization.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/BufferAliasing.h"
#include "ddp/TestPasses.h"

#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;
using namespace mlir::ddp;

namespace {
struct TestBufferAliasingPass
    : public PassWrapper<TestBufferAliasingPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestBufferAliasingPass)

  StringRef getArgument() const final { return "test-ddp-buffer-aliasing"; }
  StringRef getDescription() const final {
    return "Report the ddp bufferization models' aliasing decisions";
  }

  void runOnOperation() override {
    bufferization::OneShotBufferizationOptions options;
    getOperation().walk([&](Operation *op) {
      if (auto start = dyn_cast<AllReduceStartOp>(op)) {
        for (auto [i, input] : llvm::enumerate(start.getInputs()))
          start.emitRemark()
              << "input #" << i
              << (reducesInPlace(start, input) ? " is reduced in its own buffer"
                                               : " is reduced in a copy");
      } else if (auto load = dyn_cast<StateLoadOp>(op)) {
        if (!isa<TensorType>(load.getType()))
          return;
        Operation *store = nextStoreOfState(load);
        InFlightDiagnostic remark = load.emitRemark();
        remark << (mayAliasStateBuffer(load, options)
                       ? "returns the state's own buffer"
                       : "returns a copy");
        if (store)
          remark.attachNote(store->getLoc()) << "the next store";
      }
    });
  }
};
} // namespace

void mlir::ddp::test::registerTestPasses() {
  PassRegistration<TestBufferAliasingPass>();
}
