//===- Launch.h - start a tool's ranks under mpirun -------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// `--np=N` for the tools that run on every rank (ddp-run,
// ddprt-step-runner, ddprt-calibrate): the tool runs itself again under
// mpirun with N ranks, as a user would type it, adding what this machine
// needs (--oversubscribe, and --allow-run-as-root as root). Plain C++17 and
// POSIX.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_LAUNCH_H
#define DDPRT_HOST_LAUNCH_H

#include <string>

namespace stephost {

/// Whether this process is a rank of an MPI job (started by mpirun).
bool insideMpiJob();

/// Runs this program (argv without its --np option) on `ranks` ranks under
/// mpirun and returns the job's exit status (128 + the signal if mpirun was
/// killed); 1 after saying why, prefixed by `tool`, if mpirun cannot run.
int launchUnderMpirun(const std::string &tool, int argc, char **argv,
                      unsigned ranks);

/// Reads --np=N (or `--np N`) from argv; 0 if absent. False, with a
/// message in `error`, if N is not a whole number >= 1.
bool parseNp(int argc, char **argv, unsigned &ranks, std::string &error);

} // namespace stephost

#endif // DDPRT_HOST_LAUNCH_H
