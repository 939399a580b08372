//===- State.h - persistent state owned by a context ------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Named, zero-initialized buffers that live as long as their context (the
// error feedback, PowerSGD's Q, step counters): what checkpoints hold.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_STATE_H
#define DDPRT_STATE_H

#include "Context.h"
#include "Error.h"

namespace ddprt {

/// The state `name`, created if it does not exist (device memory, or host
/// memory for I64 step counters); DDPRT_ERROR_MISMATCH if it exists with
/// another dtype or size. The arguments are checked (checkStateGet).
Error getState(ddprt_context &context, const char *name, ddprt_dtype dtype,
               int64_t numel, ddprt_state **state);

/// Frees every state (the backend is still there).
void releaseStates(ddprt_context &context);

} // namespace ddprt

#endif // DDPRT_STATE_H
