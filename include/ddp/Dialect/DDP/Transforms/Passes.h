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

namespace mlir::ddp {

/// How insert-powersgd compresses a bucket.
enum class PowerSGDMode { layerwise, batched };

/// Which rule ddp-bucketize assigns gradients to buckets by.
enum class BucketingMode {
  ddp,           // PyTorch DDP's: reverse parameter order, closed once reached
  ddpParamOrder, // DDP's with find_unused_parameters=True: parameter order
  strict         // no bucket over its cap, program order
};

/// What insert-quantization finds a scale and zero point for.
enum class QuantizationGranularity { perTensor, perChannel };

/// How insert-quantization's ranks exchange scales and payloads.
enum class QuantizationExchange {
  fused,  // one allgather of both
  pytorch // the scales, then the payloads, as PyTorch's hooks
};

#define GEN_PASS_DECL
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"

/// The elements insert-topk sends of a bucket of `numElements`:
/// max(1, floor(numElements * ratio)), at most all of them.
int64_t topKCount(int64_t numElements, double ratio);

class CompressionScheme;
/// insert-topk's scheme from options spelled as the pass's ("ratio=0.001");
/// emits an error at `module` and fails where they are not valid. ddp-plan's
/// `topk` choice (registerPlannableScheme).
FailureOr<std::unique_ptr<CompressionScheme>> makeTopKScheme(ModuleOp module,
                                                             StringRef options);
/// insert-quantization's scheme likewise (ddp-plan's `quantize` choice:
/// "granularity=per-channel channel-size=512 exchange=fused").
FailureOr<std::unique_ptr<CompressionScheme>>
makeQuantizationScheme(ModuleOp module, StringRef options);

#define GEN_PASS_REGISTRATION
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"

} // namespace mlir::ddp

#endif // DDP_DIALECT_DDP_TRANSFORMS_PASSES_H
