//===- Supervise.h - run mpirun and supervise its job -----------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The launcher's side of --np (Launch.h says what it guarantees).
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_SUPERVISE_H
#define DDPRT_HOST_SUPERVISE_H

#include <string>
#include <vector>

namespace stephost {

/// Runs `command` (mpirun and its arguments; mpirun is looked up on PATH)
/// and supervises its job until it ends: passes its output through,
/// repeats the errors the ranks reported that did not come through, stops
/// mpirun kLauncherGraceSeconds (+ `timeoutSeconds`) after a rank failed or
/// after this process was asked to stop, and ends what the job left behind
/// on this machine. Returns mpirun's exit status (128 + its signal), or 1
/// if mpirun cannot run or had to be stopped.
int superviseMpirun(const std::string &tool,
                    const std::vector<std::string> &command,
                    double timeoutSeconds);

} // namespace stephost

#endif // DDPRT_HOST_SUPERVISE_H
