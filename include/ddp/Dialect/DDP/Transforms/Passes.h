//===- Passes.h - ddp transformation passes ---------------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDP_DIALECT_DDP_TRANSFORMS_PASSES_H
#define DDP_DIALECT_DDP_TRANSFORMS_PASSES_H

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <functional>
#include <optional>

namespace mlir::ddp {

/// How insert-powersgd compresses a bucket.
enum class PowerSGDMode { layerwise, batched };

#define GEN_PASS_DECL
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"

/// Says, for a gradient bucket, the rank PowerSGD compresses it at, or
/// nothing to leave it as it is.
using PowerSGDRankSelector =
    std::function<std::optional<unsigned>(AllReduceOp bucket)>;

/// insert-powersgd on the buckets `selector` gives a rank, at that rank
/// (`options.rank` is not used for them); the way ddp-plan applies its
/// per-bucket choices.
std::unique_ptr<Pass> createInsertPowerSGD(const InsertPowerSGDOptions &options,
                                           PowerSGDRankSelector selector);

/// The elements insert-topk sends of a bucket of `numElements`:
/// max(1, floor(numElements * ratio)), at most all of them.
int64_t topKCount(int64_t numElements, double ratio);

#define GEN_PASS_REGISTRATION
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"

} // namespace mlir::ddp

#endif // DDP_DIALECT_DDP_TRANSFORMS_PASSES_H
