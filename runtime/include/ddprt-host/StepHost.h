//===- StepHost.h - run a compiled step function on every rank --*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The host side of a step function compiled from the ddp dialect
// (ddp-lower-to-llvm), shared by ddp-run (which JIT-compiles the step) and
// ddprt-step-runner (which loads one that `ddp-run --emit-step` compiled
// ahead of time). Plain C++17 over the runtime's C ABI; no LLVM, no MLIR.
// The library `ddprt-host`, one header per concern:
//
//   StepSignature.h  the step's signature and step.json
//   HostFunctions.h  the functions compiled code calls (runtime, memory)
//   MemRef.h         the memref descriptors compiled code takes and returns
//   RunOptions.h     the command line both tools share
//   Job.h            the runtime job: ranks agreeing on failures, timeouts
//   Launch.h         --np: the ranks started under mpirun
//   StepLoop.h       the loop that runs the step K times
//   Npy.h            .npy and .npz files
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_STEPHOST_H
#define DDPRT_HOST_STEPHOST_H

#include "HostFunctions.h"
#include "Job.h"
#include "Launch.h"
#include "MemRef.h"
#include "RunOptions.h"
#include "StepLoop.h"
#include "StepSignature.h"

#endif // DDPRT_HOST_STEPHOST_H
