//===- Transforms.h - ddp rewrite patterns ----------------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The rewrites of the ddp passes as patterns, for compilers that compose
// them with their own (the passes are thin drivers around these).
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_TRANSFORMS_TRANSFORMS_H
#define DDP_DIALECT_DDP_TRANSFORMS_TRANSFORMS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::ddp {

/// fp16_compress_hook / bf16_compress_hook: every ddp.allreduce and
/// ddp.allreduce_start with a float wider than `narrow` is divided by the
/// world size, cast to `narrow`, summed in it and cast back. Tensors that
/// cannot be (dynamic or 0-d, already narrow) stay a plain allreduce, with a
/// remark naming `passName`. `count`, if given, is incremented by the
/// tensors narrowed. The ops the patterns create are narrow already, so a
/// driver that revisits them (the greedy one) terminates.
void populateNarrowCompressionPatterns(RewritePatternSet &patterns,
                                       FloatType narrow, StringRef passName,
                                       unsigned *count = nullptr);

/// Sends `ops` (ddp.allreduce and ddp.allreduce_start ops) in `narrow` with
/// those patterns, touching no other op: the buckets ddp-plan planned as
/// fp16 or bf16, and the collectives of its "powersgd+fp16" ones. Adds the
/// tensors narrowed to `count` if given.
void narrowCollectives(ArrayRef<Operation *> ops, FloatType narrow,
                       StringRef passName, unsigned *count = nullptr);

} // namespace mlir::ddp

#endif // DDP_DIALECT_DDP_TRANSFORMS_TRANSFORMS_H
