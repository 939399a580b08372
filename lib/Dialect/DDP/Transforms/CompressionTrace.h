//===- CompressionTrace.h - what each gradient sends -----------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The compression report's reading of a module (private to the pass):
// CompressionTrace.cpp finds what every gradient sends, CompressionReport.cpp
// prints it.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_TRANSFORMS_COMPRESSIONTRACE_H
#define DDP_DIALECT_DDP_TRANSFORMS_COMPRESSIONTRACE_H

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <tuple>

namespace mlir::ddp {

/// What one gradient (or one batched bucket) sends per step.
struct ReportRow {
  std::tuple<unsigned, unsigned, unsigned> order;
  std::string where;
  SmallVector<int64_t> shape;
  std::string dtype;
  /// "plain", "uncompressed" (a scheme left it), "plain (plan)", or the
  /// scheme the IR names ("powersgd", "topk", "fp16"), with "+fp16" or
  /// "+bf16" where what it sends was narrowed after.
  std::string decision = "plain";
  /// The schemes that narrowed what it sends ("fp16"), in the decision.
  SmallVector<std::string, 1> narrowings;
  /// Whether everything it sends was narrowed, or else how many of its
  /// gradients were, each before a bucket's scheme took it.
  bool narrowedWhole = false;
  unsigned narrowedTensors = 0;
  unsigned getNarrowedTensors() const {
    return narrowedWhole ? tensors : narrowedTensors;
  }
  bool compressed = false;
  int64_t rank = 0;
  int64_t numelBefore = 0, numelAfter = 0;
  int64_t bytesBefore = 0, bytesAfter = 0;
  std::string sentAs;
  /// A scheme's options (#ddp.compression), by name.
  SmallVector<NamedAttribute> options;
  /// Gradients this row stands for (a batched bucket has several).
  unsigned tensors = 1;
};

/// Every row of `module`: a gradient's, a batched PowerSGD bucket's, or a
/// compression scheme's bucket's, once per reduction of it, with what it
/// sends per step (the warm-up branch before PowerSGD's start iteration is
/// not the steady state and is skipped). Rows carry their print order.
void collectReportRows(ModuleOp module, SmallVectorImpl<ReportRow> &rows);

} // namespace mlir::ddp

#endif // DDP_DIALECT_DDP_TRANSFORMS_COMPRESSIONTRACE_H
