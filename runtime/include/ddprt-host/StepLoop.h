//===- StepLoop.h - run a compiled step K times on every rank ---*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The loop that reads .npy inputs, calls the step, writes its results and
// keeps the compression state, behind the options ddp-run and
// ddprt-step-runner share.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_STEPLOOP_H
#define DDPRT_HOST_STEPLOOP_H

#include "HostFunctions.h"
#include "Job.h"
#include "RunOptions.h"
#include "StepSignature.h"

namespace stephost {

/// Runs the steps: creates the states, loads the checkpoint, sets states,
/// runs `options.steps` steps (inputs read, step called, results written,
/// carried results fed back), then dumps the states, saves the checkpoint
/// and prints and writes the summary. Returns the exit status (0); any
/// failure stops every rank.
int runSteps(Job &job, const StepSignature &signature, PackedFunction step,
             const RunOptions &options);

} // namespace stephost

#endif // DDPRT_HOST_STEPLOOP_H
