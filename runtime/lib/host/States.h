//===- States.h - the compression state around the steps --------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The step's states in the runtime, before the first step (created, loaded
// from a checkpoint, set from .npy files) and after the last (dumped to
// .npy files, saved to a checkpoint).
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_STATES_H
#define DDPRT_HOST_STATES_H

#include "Job.h"
#include "RunOptions.h"
#include "StepSignature.h"

#include <map>
#include <string>

namespace stephost {

/// The runtime's handle of each state, by name.
using StateHandles = std::map<std::string, ddprt_state *>;

/// Creates every state, so that a checkpoint can be loaded into them.
/// These three stop every rank when one fails.
StateHandles createStates(Job &job, const StepSignature &signature);
/// --checkpoint-load.
void loadCheckpoint(Job &job, const StateHandles &states,
                    const RunOptions &options);
/// --set-state.
void setStates(Job &job, const StepSignature &signature,
               const StateHandles &states, const RunOptions &options);

/// --dump-state. These two say what failed and return false.
bool dumpStates(const Job &job, const StepSignature &signature,
                const StateHandles &states, const RunOptions &options);
/// --checkpoint-save.
bool saveCheckpoint(const Job &job, const RunOptions &options);

} // namespace stephost

#endif // DDPRT_HOST_STATES_H
