//===- Checkpoint.h - every state of a rank in one file ---------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDPRT_CHECKPOINT_H
#define DDPRT_CHECKPOINT_H

#include "Context.h"
#include "Error.h"

namespace ddprt {

/// Writes every state of this rank to `path`, through a temporary file
/// renamed into place (a crash never leaves a half-written checkpoint).
Error saveCheckpoint(ddprt_context &context, const char *path);
/// Restores every state from `path`: the checksum, the rank, the world size
/// and every state's name, dtype and size are checked before any state
/// changes.
Error loadCheckpoint(ddprt_context &context, const char *path);

} // namespace ddprt

#endif // DDPRT_CHECKPOINT_H
