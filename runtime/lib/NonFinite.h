//===- NonFinite.h - NaN and Inf in PowerSGD's factors ----------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// ddprt_inspect, and the guard in ddprt_reconstruct that keeps a tensor's
// error feedback clean when its averaged P or Q is not finite (the same on
// every rank, so every rank makes the same choice without a collective).
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_NONFINITE_H
#define DDPRT_NONFINITE_H

#include "Context.h"
#include "Error.h"

namespace ddprt {

/// Per buffer: whether every element is finite and whether some is not
/// zero (either array may be null).
Error inspect(ddprt_context &context, const ddprt_buffer *buffers, int count,
              int32_t *allFinite, int32_t *anyNonzero);

/// M_hat = P Q^T and, with residuals, E = G + E - M_hat, except that a
/// tensor whose P or Q is not finite keeps its E (its output is P Q^T);
/// DDPRT_NONFINITE naming those tensors if there were any.
Error reconstruct(ddprt_context &context, const ddprt_matrix *ps,
                  const ddprt_matrix *qs, const ddprt_matrix *matrices,
                  ddprt_matrix *residuals, ddprt_matrix *reconstructions,
                  int count);

} // namespace ddprt

#endif // DDPRT_NONFINITE_H
