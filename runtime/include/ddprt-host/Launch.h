//===- Launch.h - start a tool's ranks under mpirun -------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// `--np=N` for the tools that run on every rank (ddp-run,
// ddprt-step-runner, ddprt-calibrate): the tool runs itself again under
// mpirun with N ranks, as a user would type it, adding what this machine
// needs (--oversubscribe, and --allow-run-as-root as root), and supervises
// the job as torchrun supervises its workers: mpirun's output passes
// through the launcher; every rank started on this machine also writes
// each error it prints to a file the launcher reads, so an error whose
// output mpirun lost while it tore the job down is still said; once a rank
// has failed, mpirun gets a few seconds (the timeout more if the ranks may
// still agree on the failure) to end before the launcher stops it; and
// nothing the job started on this machine outlives the launcher. Plain C++17,
// POSIX and Linux's child subreaper.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_LAUNCH_H
#define DDPRT_HOST_LAUNCH_H

#include <string>
#include <string_view>

namespace stephost {

/// Whether this process is a rank of an MPI job (started by mpirun).
bool insideMpiJob();

/// This process's rank as the launcher (mpirun, a PMI launcher) gave it,
/// before MPI is up; -1 outside a job.
int launcherRank();

/// The environment variable through which the launcher gives the ranks
/// it starts the directory of their error reports (see Job.h).
inline constexpr const char *kErrorReportVariable = "DDPRT_HOST_ERROR_DIR";

/// Whether a line the hosts print is an error ("TOOL: [rank R: ]error: ..."):
/// what the ranks put in their error reports, and what the launcher looks
/// for in the output to tell which of them came through.
inline bool isErrorText(std::string_view text) {
  return text.find("error: ") != std::string_view::npos;
}

/// How long mpirun has to end after a rank reported an error, beyond the
/// job's timeout (the ranks may still agree on the failure, each agreement
/// bounded by it), before the launcher stops it.
inline constexpr double kLauncherGraceSeconds = 10.0;
/// How long mpirun has to end after a rank said it is ending the job
/// (reportEnding in Job.h: MPI_Abort, a watchdog's or a crash's exit), and
/// after the launcher was asked to stop.
inline constexpr double kLauncherEndingSeconds = 5.0;

/// What the tool's command line says about launching: `--np=N` (or
/// `--np N`) and `--hostfile=FILE` (or `--hostfile FILE`), and the ranks'
/// `--timeout`, which the tool parses itself.
struct LaunchOptions {
  /// The ranks to start, over every host (0: none; this process is a rank).
  unsigned ranks = 0;
  /// mpirun's hostfile: the hosts to start the ranks on ("": this machine).
  std::string hostfile;
  /// The ranks' --timeout: once one has reported an error, mpirun is
  /// stopped if it has not ended within that plus kLauncherGraceSeconds
  /// (0: the ranks wait forever, and so does the launcher), or within
  /// kLauncherEndingSeconds once one said it is ending the job.
  double timeoutSeconds = 0.0;
};

/// Reads --np and --hostfile from argv into `options`. False, with a
/// message in `error`, if N is not a whole number from 1 to 4096, or a
/// hostfile is given without --np or cannot be read.
bool parseLaunchOptions(int argc, char **argv, LaunchOptions &options,
                        std::string &error);

/// Runs this program (argv without --np and --hostfile) on
/// `options.ranks` ranks under mpirun (on the hosts of `options.hostfile`)
/// and returns the job's exit status (128 + the signal if mpirun was
/// killed); 1 after saying why, prefixed by `tool`, if mpirun cannot run
/// or had to be stopped.
int launchUnderMpirun(const std::string &tool, int argc, char **argv,
                      const LaunchOptions &options);

} // namespace stephost

#endif // DDPRT_HOST_LAUNCH_H
