//===- Contractions.h - the matmuls the runtime's BLAS computes -*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDP_DIALECT_DDP_TRANSFORMS_CONTRACTIONS_H
#define DDP_DIALECT_DDP_TRANSFORMS_CONTRACTIONS_H

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"

#include <optional>

namespace mlir::ddp {

/// The loops of a contraction C += A B that ddprt_gemm computes.
struct BlasContraction {
  std::optional<unsigned> batch;
  unsigned m, n, k;
};

/// Whether `op` (on tensors or buffers) is a contraction
/// ddp-matmuls-to-runtime hands to BLAS once bufferized: two inputs and one
/// output of f32, a product-sum body, one M, N and K loop and at most one
/// batch loop, and a body that is exactly `out + a * b`. The fusion passes
/// keep such ops whole; ddp-reassociate-sums leaves their sums alone.
std::optional<BlasContraction> matchBlasContraction(linalg::LinalgOp op);
/// Whether `op` is a linalg op matchBlasContraction matches.
bool isBlasContraction(Operation *op);

} // namespace mlir::ddp

#endif // DDP_DIALECT_DDP_TRANSFORMS_CONTRACTIONS_H
