//===- Job.h - this rank's part of a job of compiled steps ------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The runtime context of one rank, and how the ranks agree on failures:
// every rank stops with status 1 when any fails, never a hang (each
// agreement gives up after the timeout, and a watchdog bounds the steps in
// which MPI waits without a timeout of its own).
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_JOB_H
#define DDPRT_HOST_JOB_H

#include "RunOptions.h"

#include "ddprt/ddprt.h"

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace stephost {

/// Opens this process's error report: a file of its own in the directory
/// the launcher named in kErrorReportVariable (Launch.h), where every error
/// line this rank prints is also appended. Without the variable, or where
/// the directory does not exist (a rank on another host), there is none.
/// Job's constructor calls it.
void openErrorReport();
/// Appends `length` bytes of `text` to the error report, if there is one.
/// Async-signal-safe (the watchdog and the crash handler call it).
void reportError(const char *text, size_t length);
/// Tells the launcher that this rank is ending the job now (MPI_Abort, or
/// an exit mpirun will take as the job's failure), with nothing left for
/// the others to agree on: it then gives mpirun kLauncherEndingSeconds to
/// end, instead of the timeout more. Async-signal-safe.
void reportEnding();

/// One line of stderr, written with a single write() when the statement
/// ends, so that the lines of several ranks do not interleave. An error
/// line ("...error: ...") also goes to the error report.
class Line {
public:
  explicit Line(const std::string &prefix) { os << prefix; }
  /// A line appended to `*sink` instead of written.
  static Line into(std::string *sink, const std::string &prefix) {
    Line line(prefix);
    line.sink = sink;
    return line;
  }
  Line(const Line &) = delete;
  Line(Line &&other)
      : os(std::move(other.os)), live(other.live), sink(other.sink) {
    other.live = false;
  }
  ~Line();
  template <typename T> Line &operator<<(const T &value) {
    os << value;
    return *this;
  }

private:
  std::ostringstream os;
  bool live = true;
  std::string *sink = nullptr;
};

/// Ends the process with an error if it has not been disarmed before a
/// deadline: bounds the steps in which MPI may block without a timeout of
/// its own (MPI_Init, the runtime's start, MPI_Finalize), so that a rank
/// that stopped (SIGSTOP, a debugger, a swapped-out node) cannot hang the
/// others there. A thread waits for the deadline; `_exit` needs no lock.
class Watchdog {
public:
  Watchdog();
  ~Watchdog();
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;
  /// After `seconds` (> 0) writes `message` to stderr and exits with
  /// status 1, unless disarm() or a later arm() comes first.
  void arm(double seconds, std::string message);
  void disarm();

private:
  struct State;
  State *state;
};

/// This rank's part of the job: the runtime context, the rank, and how
/// ranks agree on failures (every rank stops with status 1 when any
/// fails, never a hang: the agreement itself gives up after the timeout).
/// Replaces {rank}, {step}, {step%N}, {result} and {name} in `pattern`
/// (a negative step or result, or an empty name, leaves its placeholder).
std::string expandPattern(std::string_view pattern, int rank, int64_t step,
                          int64_t result = -1, std::string_view name = "");

class Job {
public:
  explicit Job(std::string tool) : tool(std::move(tool)) { openErrorReport(); }

  /// Starts the runtime (which brings up MPI under mpirun). A bad
  /// --backend returns false after saying why; a runtime that does not
  /// start stops every rank.
  bool start(const RunOptions &options);
  /// Finalizes the runtime and MPI, within the timeout (MPI_Finalize waits
  /// for every rank).
  void finish();

  /// "TOOL: rank R: error: ..." and "TOOL: rank R: ...". While
  /// `rankIndependent` is set, error() writes "TOOL: error: ..." on rank 0
  /// (a message every rank would print the same, e.g. a parse error); the
  /// other ranks keep theirs in `deferred`, and agreeOrStop prints them
  /// only if rank 0 succeeded (then the failure was not the same on every
  /// rank: a file missing on one node).
  Line error() const;
  /// "TOOL: rank R: error: ...", also while `rankIndependent` is set.
  Line localError() const;
  Line note() const;
  /// Stops every rank if any failed (`what`: "to read the inputs").
  void agreeOrStop(bool succeeded, const std::string &what);
  /// As agreeOrStop, and in the same collective checks that every rank
  /// passes the same `values` (e.g. the shapes it read); returns false,
  /// without stopping, if they differ.
  bool agreeOrStopSame(bool succeeded, const std::string &what,
                       const std::vector<int64_t> &values);
  /// Stops the job now (MPI_Abort when several ranks run). A rank whose
  /// MPI_Abort cannot reach mpirun (a partitioned host) still ends, a few
  /// seconds later, by the watchdog.
  [[noreturn]] void stop(int status);
  /// Around each call of the compiled step: beginStep sets currentStep,
  /// bounds the step's time by --step-timeout (the watchdog stops this rank
  /// with a message, and the job with it) and reports a signal the step
  /// dies of (SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGABRT) as "the compiled
  /// step crashed on rank R (signal S)" with exit status 1, instead of a
  /// bare signal or LLVM's crash banner; endStep undoes both.
  void beginStep(int64_t step);
  void endStep();
  /// Bounds what this rank does until endBound() by --timeout: reading a
  /// file that never ends or never opens (a FIFO no one writes) stops the
  /// rank with "`what` did not finish within T s (--timeout)".
  void bound(const std::string &what);
  void endBound();
  /// The largest `value` over the ranks (bounded by the timeout).
  double maxOverRanks(double value);

  /// "10 Gb/s, 20 µs": the simulated link, for messages.
  std::string simulatedLinkText() const;

  /// expandPattern for this rank.
  std::string expand(std::string_view pattern, int64_t step,
                     int64_t result = -1, std::string_view name = "") const;

  const std::string tool;
  int rank = 0, worldSize = 1;
  /// The rank's compute threads (BLAS and parallel loops), set by start:
  /// --threads-per-rank, or defaultComputeThreads.
  int computeThreads = 1;
  ddprt_context *context = nullptr;
  std::string backendName = "cpu";
  /// On the CUDA backend: buffers that host code and the runtime share are
  /// managed memory.
  bool sharedMemory = false;
  /// --timeout: how long a rank waits for the others in any collective,
  /// the host's own agreements included (0: forever).
  double timeoutSeconds = 60.0;
  /// --step-timeout (0: none).
  double stepTimeoutSeconds = 0.0;
  /// --on-nonfinite=fail.
  bool failOnNonfinite = false;
  /// The simulated link the runtime models (--simulated-link, or
  /// DDPRT_SIMULATED_LINK, which overrides it); 0 Gb/s: none. Every figure
  /// printed or written says so.
  double simulatedLinkGbps = 0.0, simulatedLinkLatencyUs = 0.0;
  /// Whether the failures being checked are the same on every rank (see
  /// error()).
  bool rankIndependent = false;
  /// What ranks other than 0 said while `rankIndependent` was set.
  mutable std::string deferred;
  /// The step being run (for messages from inside it), -1 outside steps.
  int64_t currentStep = -1;

private:
  bool everyRankSucceeded(bool succeeded, const std::string &what);
  /// MPI_MAX over the ranks of `count` doubles in place, given up after the
  /// timeout (then the job stops with an error naming `what`).
  void maxOverRanksBounded(double *values, int count, const std::string &what);

  Watchdog watchdog;
};

} // namespace stephost

#endif // DDPRT_HOST_JOB_H
