//===- Passes.h - passes that keep upstream's pipeline linear ---*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Dialect-neutral workarounds for upstream passes whose cost grows with the
// square of a function's size (Passes.td says which, and when each can go).
//
//===----------------------------------------------------------------------===//

#ifndef DDP_TRANSFORMS_PASSES_H
#define DDP_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace ddp {

#define GEN_PASS_DECL
#include "ddp/Transforms/Passes.h.inc"

/// The unit attribute split-functions gives each function it outlines: a
/// private function, called only, that returns only buffers it allocated,
/// no two of them one buffer.
inline constexpr StringLiteral kSplitPartAttrName = "split_functions.part";

/// Whether `function` is one split-functions outlined.
inline bool isSplitPart(Operation *function) {
  return function->hasAttr(kSplitPartAttrName);
}

#define GEN_PASS_REGISTRATION
#include "ddp/Transforms/Passes.h.inc"

} // namespace ddp
} // namespace mlir

#endif // DDP_TRANSFORMS_PASSES_H
