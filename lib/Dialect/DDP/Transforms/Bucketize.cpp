//===- Bucketize.cpp - group gradient allreduces into buckets -------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPBUCKETIZE
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {
struct DDPBucketizePass : public PassWithOptionNames<ddp::impl::DDPBucketizeBase<DDPBucketizePass>> {
  using Base::Base;

  void runOnOperation() override {
    if (!(capMb >= 0.0) || std::isinf(capMb)) {
      emitPassError(getOperation(), getArgument())
          << "cap-mb must be a finite number >= 0, got " << formatNumber(capMb);
      return signalPassFailure();
    }
    recordGradientNames(getOperation());
    uint64_t bucketed = 0;
    numBuckets +=
        bucketizeAllReduces(getOperation(), uint64_t(capMb * 1024.0 * 1024.0));
    getOperation().walk([&](AllReduceOp op) {
      if (op.getRole() == CommRole::gradient && op.getInputs().size() > 1)
        bucketed += op.getInputs().size();
    });
    numTensors += bucketed;
  }
};
} // namespace
