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
constexpr double kMaxBucketMb = 1024.0 * 1024.0 * 1024.0;

struct DDPBucketizePass : public PassWithOptionNames<ddp::impl::DDPBucketizeBase<DDPBucketizePass>> {
  using Base::Base;

  void runOnOperation() override {
    for (auto [name, value] : {std::pair{"cap-mb", double(capMb)},
                               std::pair{"first-bucket-mb",
                                         double(firstBucketMb)}})
      // At most a PiB (in bytes, a count that fits 64 bits).
      if (!(value >= 0.0) || value > kMaxBucketMb) {
        emitPassError(getOperation(), getArgument())
            << name << " must be a number of MiB in [0, "
            << formatNumber(kMaxBucketMb) << "], got " << formatNumber(value);
        return signalPassFailure();
      }
    recordGradientNames(getOperation());
    BucketPolicy policy;
    policy.capBytes = uint64_t(capMb * 1024.0 * 1024.0);
    // cap-mb=0 keeps every allreduce a bucket of its own, the first too.
    policy.firstCapBytes =
        capMb == 0.0 ? 0 : uint64_t(firstBucketMb * 1024.0 * 1024.0);
    policy.reverseTies = mode == BucketingMode::ddp;
    policy.closeOnceReached = mode != BucketingMode::strict;
    uint64_t bucketed = 0;
    numBuckets += bucketizeAllReduces(getOperation(), policy);
    getOperation().walk([&](AllReduceOp op) {
      if (op.getRole() == CommRole::gradient && op.getInputs().size() > 1)
        bucketed += op.getInputs().size();
    });
    numTensors += bucketed;
  }
};
} // namespace
