//===- Job.cpp - this rank's part of a job of compiled steps --------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "Job.h"

#include "Format.h"
#include "Launch.h"
#include "Memory.h"
#include "WriteAll.h"

#if defined(DDPRT_HAVE_MPI)
#include <mpi.h>
#endif

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <iterator>
#include <sched.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace stephost {

namespace {
/// The error report's path, and its file descriptor once something was
/// reported (-1 before; an int: the signal handlers use it). The file
/// exists only once there is an error in it: the launcher takes a report
/// to mean that a rank failed. The marker's path: it exists once this rank
/// is ending the job.
char errorReportPath[4096];
char endingMarkerPath[4096];
volatile int errorReport = -1;

void copyPath(char (&to)[4096], const std::string &path) {
  if (path.size() < sizeof to)
    std::memcpy(to, path.c_str(), path.size() + 1);
}
} // namespace

void openErrorReport() {
  const char *directory = std::getenv(kErrorReportVariable);
  if (errorReportPath[0] || !directory || !*directory)
    return;
  // Files of this process's own: the ranks of a machine never share one.
  std::string pid = std::to_string(::getpid());
  copyPath(errorReportPath, std::string(directory) + "/error." + pid);
  copyPath(endingMarkerPath, std::string(directory) + "/ending." + pid);
}

void reportEnding() {
  if (!endingMarkerPath[0])
    return;
  int fd = ::open(endingMarkerPath, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
                  0600);
  if (fd >= 0)
    ::close(fd);
}

void reportError(const char *text, size_t length) {
  // open() and write() are async-signal-safe.
  if (errorReport < 0 && errorReportPath[0])
    errorReport =
        ::open(errorReportPath,
               O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (errorReport >= 0)
    (void)writeAll(errorReport, text, length);
}

Line::~Line() {
  if (!live)
    return;
  if (sink) {
    *sink += os.str();
    return;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::string text = os.str();
  if (isErrorText(text))
    reportError(text.data(), text.size());
  (void)writeAll(2, text.data(), text.size());
}

Line Job::error() const {
  if (rankIndependent)
    return rank == 0
               ? Line(tool + ": error: ")
               : Line::into(&deferred, tool + ": rank " + std::to_string(rank) +
                                           ": error: ");
  return Line(tool + ": rank " + std::to_string(rank) + ": error: ");
}

Line Job::localError() const {
  return Line(tool + ": rank " + std::to_string(rank) + ": error: ");
}

Line Job::note() const {
  return Line(tool + ": rank " + std::to_string(rank) + ": ");
}

namespace {
/// Stops the job when compiled code reports a runtime failure: the other
/// ranks may be waiting in a collective.
void onRuntimeError(ddprt_context *context, ddprt_status status,
                    const char *where, void *user) {
  Job *job = static_cast<Job *>(user);
  std::string step = job->currentStep >= 0
                         ? "step " + std::to_string(job->currentStep) + ": "
                         : "";
  if (status == DDPRT_NONFINITE && !job->failOnNonfinite) {
    // Every rank saw the same averaged values and made the same choice;
    // one of them says so. What one rank alone saw (its own state), that
    // rank says.
    if (job->rank == 0 || ddprt_nonfinite_is_this_rank_only(context))
      Line(job->tool + ": rank " + std::to_string(job->rank) + ": warning: ")
          << step << where << ": " << ddprt_last_error(context)
          << " (--on-nonfinite=skip)\n";
    return;
  }
  job->error() << step << where << ": " << ddprt_status_string(status) << ": "
               << ddprt_last_error(context)
               << (status == DDPRT_NONFINITE ? " (--on-nonfinite=fail)" : "")
               << "\n";
  job->stop(1);
}

/// What the crash handler writes (prepared before the step: a signal
/// handler may only write), and the handlers it replaced.
char crashPrefix[256];
size_t crashPrefixLength = 0;
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction replacedHandlers[std::size(kCrashSignals)];
bool crashHandlersInstalled = false;

/// To stderr and the error report.
void say(const char *text, size_t length) {
  reportError(text, length);
  (void)writeAll(2, text, length);
}

void onCrash(int signal) {
  reportEnding();
  const char *name = signal == SIGSEGV   ? "SIGSEGV: it read or wrote memory "
                                           "it does not own"
                     : signal == SIGBUS  ? "SIGBUS: a bad memory access"
                     : signal == SIGFPE  ? "SIGFPE: an arithmetic trap, such "
                                           "as integer division by zero"
                     : signal == SIGILL  ? "SIGILL: an illegal instruction "
                                           "(a trap)"
                     : signal == SIGABRT ? "SIGABRT: it aborted"
                                         : "a fatal signal";
  say(crashPrefix, crashPrefixLength);
  say(name, std::strlen(name));
  const char *hint =
      signal == SIGSEGV || signal == SIGFPE
          ? "); the step's run-time checks (compiled in unless "
            "--runtime-checks=false) report an out-of-bounds index or a "
            "division by zero with its location instead\n"
          : ")\n";
  say(hint, std::strlen(hint));
  std::_Exit(1);
}

/// The handlers run on their own stack, so that a step that overflowed
/// its stack is still reported.
void installCrashHandlers() {
  // The alternate stack once per process; the handlers around each step.
  static bool stackSet = [] {
    static std::vector<char> alternateStack(size_t(SIGSTKSZ) + 65536);
    stack_t stack{};
    stack.ss_sp = alternateStack.data();
    stack.ss_size = alternateStack.size();
    return sigaltstack(&stack, nullptr) == 0;
  }();
  (void)stackSet;
  struct sigaction action {};
  action.sa_handler = onCrash;
  action.sa_flags = SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < std::size(kCrashSignals); ++i)
    sigaction(kCrashSignals[i], &action, &replacedHandlers[i]);
  crashHandlersInstalled = true;
}

void restoreCrashHandlers() {
  if (!crashHandlersInstalled)
    return;
  for (size_t i = 0; i < std::size(kCrashSignals); ++i)
    sigaction(kCrashSignals[i], &replacedHandlers[i], nullptr);
  crashHandlersInstalled = false;
}

/// How long MPI_Abort may take before the rank exits on its own.
constexpr double kAbortSeconds = 5.0;
} // namespace

bool Job::start(const RunOptions &options) {
  ddprt_options runtimeOptions;
  ddprt_default_options(&runtimeOptions);
  runtimeOptions.timeout_seconds = options.timeoutSeconds;
  timeoutSeconds = options.timeoutSeconds;
  stepTimeoutSeconds = options.stepTimeoutSeconds;
  if (!checkRunOptions(tool, options))
    return false;
  if (options.backend == "cuda")
    runtimeOptions.backend = DDPRT_BACKEND_CUDA;
  std::string linkError; // checkRunOptions said it
  (void)parseSimulatedLinkOption(options, runtimeOptions.simulated_link_gbps,
                                 runtimeOptions.simulated_link_latency_us,
                                 linkError);
  backendName = options.backend;
  failOnNonfinite = options.onNonfinite == "fail";
  // MPI_Init and the runtime's start wait for every rank without a timeout
  // of their own. The rank is the launcher's until MPI knows it.
  int known = launcherRank();
  std::string who =
      tool + ": " + (known >= 0 ? "rank " + std::to_string(known) + ": " : "");
  watchdog.arm(timeoutSeconds,
               who + "error: the runtime did not start within " +
                   secondsText(timeoutSeconds) +
                   " s (--timeout): a rank may have died or stopped\n");
  ddprt_status started = ddprt_init(&runtimeOptions, &context);
  if (context && ddprt_rank(context) >= 0) {
    rank = ddprt_rank(context);
    worldSize = ddprt_world_size(context);
  } else {
    // A runtime that failed before it had a communicator (a bad option)
    // has no rank to give: the launcher's, for messages.
    if (launcherRank() >= 0)
      rank = launcherRank();
  }
#if defined(DDPRT_HAVE_MPI)
  // A runtime that failed to start has no communicator to ask; MPI may
  // still be up, and the ranks must agree on the failure through it.
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (started != DDPRT_OK && initialized && !finalized) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
#endif
  if (started != DDPRT_OK) {
    error() << "cannot start the runtime: " << ddprt_status_string(started)
            << ": " << ddprt_last_error(context) << "\n";
    agreeOrStop(false, "to start the runtime");
  }
  agreeOrStop(true, "to start the runtime");
  watchdog.disarm();
  if (ddprt_get_options(context, &runtimeOptions) == DDPRT_OK) {
    simulatedLinkGbps = runtimeOptions.simulated_link_gbps;
    simulatedLinkLatencyUs = runtimeOptions.simulated_link_latency_us;
  }
  if (rank == 0 && simulatedLinkGbps > 0 && !options.quiet)
    Line(tool + ": ") << "simulated link " << simulatedLinkText()
                      << ": each collective is held to latency + bytes / "
                         "bandwidth; every time below includes it\n";
  ddprt_set_current_context(context);
  ddprt_set_error_handler(onRuntimeError, this);
  computeThreads =
      options.threads > 0 ? options.threads : defaultComputeThreads(worldSize);
  if (ddprt_status status = ddprt_set_compute_threads(context, computeThreads))
    error() << "cannot set " << computeThreads
            << " compute threads: " << ddprt_status_string(status) << ": "
            << ddprt_last_error(context) << "\n";
  setLoopThreads(computeThreads);
  sharedMemory = runtimeOptions.backend == DDPRT_BACKEND_CUDA;
  useSharedBuffers(sharedMemory);
  return true;
}

void Job::finish() {
  // Finalizing (here, or MPI_Finalize at exit) waits for every rank.
  watchdog.arm(timeoutSeconds,
               tool + ": rank " + std::to_string(rank) +
                   ": error: finalizing did not complete within " +
                   secondsText(timeoutSeconds) +
                   " s (--timeout): a rank may have died or stopped\n");
  releaseCachedBuffers();
  ddprt_set_current_context(nullptr);
  ddprt_set_error_handler(nullptr, nullptr);
  if (context)
    ddprt_finalize(context);
  context = nullptr;
#if defined(DDPRT_HAVE_MPI)
  // MPI_Finalize here rather than at exit, while the watchdog bounds it.
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Finalize();
#endif
  watchdog.disarm();
}

void Job::stop(int status) {
  std::fflush(stdout);
  std::fflush(stderr);
  reportEnding();
#if defined(DDPRT_HAVE_MPI)
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized && worldSize > 1) {
    // MPI_Abort asks mpirun to end every rank; if mpirun or this rank's
    // daemon cannot be reached (a host cut off from the others), this rank
    // must still end rather than wait there.
    watchdog.arm(kAbortSeconds, tool + ": rank " + std::to_string(rank) +
                                    ": error: MPI_Abort did not end this rank "
                                    "within " +
                                    secondsText(kAbortSeconds) +
                                    " s (mpirun may be unreachable); "
                                    "exiting\n");
    MPI_Abort(MPI_COMM_WORLD, status);
  }
#endif
  std::_Exit(status);
}

void Job::maxOverRanksBounded(double *values, int count,
                              const std::string &what) {
#if defined(DDPRT_HAVE_MPI)
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized || worldSize <= 1)
    return;
  // MPI allows one thread in it at a time: the runtime's communication
  // thread calls it only while collectives are queued, and this drains
  // them (their failures are the runtime's to report, at their waits).
  if (context)
    (void)ddprt_synchronize(context);
  // Nonblocking and polled, as the runtime's collectives are: a blocking
  // MPI_Allreduce would wait forever for a rank that stopped.
  MPI_Request request;
  if (MPI_Iallreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_MAX,
                     MPI_COMM_WORLD, &request) != MPI_SUCCESS) {
    error() << "cannot agree with the other ranks " << what
            << ": MPI_Iallreduce failed\n";
    stop(1);
  }
  auto start = std::chrono::steady_clock::now();
  while (true) {
    int done = 0;
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      error() << "cannot agree with the other ranks " << what
              << ": MPI_Test failed\n";
      stop(1);
    }
    if (done)
      return;
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (timeoutSeconds > 0 && waited > timeoutSeconds) {
      error() << "the other ranks did not answer within "
              << secondsText(timeoutSeconds) << " s (--timeout) " << what
              << ": a rank may have died or stopped\n";
      stop(1);
    }
    // The others may be busy (compiling, reading): do not take their CPU.
    if (waited < 0.001)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
#else
  (void)values, (void)count, (void)what;
#endif
}

bool Job::everyRankSucceeded(bool succeeded, const std::string &what) {
  // MAX of "failed" is MIN of "succeeded".
  double failed = succeeded ? 0.0 : 1.0;
  maxOverRanksBounded(&failed, 1, "after trying " + what);
  return failed == 0.0;
}

double Job::maxOverRanks(double value) {
  maxOverRanksBounded(&value, 1, "while timing the steps");
  return value;
}

void Job::agreeOrStop(bool succeeded, const std::string &what) {
  if (rankIndependent) {
    // One MAX over (this rank failed, rank 0 failed): whether to stop, and
    // whether rank 0 already said why for everyone.
    double failed[2] = {succeeded ? 0.0 : 1.0,
                        rank == 0 && !succeeded ? 1.0 : 0.0};
    maxOverRanksBounded(failed, 2, "after trying " + what);
    if (failed[0] == 0.0) {
      deferred.clear();
      return;
    }
    if (!succeeded && failed[1] == 0.0 && !deferred.empty())
      Line("") << deferred;
    if (succeeded)
      note() << "stopping: another rank failed " << what << "\n";
    std::fflush(stdout);
    finish();
    std::exit(1);
  }
  if (everyRankSucceeded(succeeded, what))
    return;
  if (succeeded)
    note() << "stopping: another rank failed " << what << "\n";
  std::fflush(stdout);
  finish();
  std::exit(1);
}

bool Job::agreeOrStopSame(bool succeeded, const std::string &what,
                          const std::vector<int64_t> &values) {
  // One MAX over (failed, digest, -digest) gives every rank whether any
  // failed and both the largest and the smallest digest. The digest is the
  // count and a 64-bit FNV-1a hash, in 32-bit halves that doubles hold
  // exactly.
  uint64_t hash = 1469598103934665603ull;
  for (int64_t value : values)
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= uint8_t(uint64_t(value) >> (8 * byte));
      hash *= 1099511628211ull;
    }
  const double digest[3] = {double(values.size()), double(hash >> 32),
                            double(hash & 0xffffffffu)};
  double all[7] = {succeeded ? 0.0 : 1.0};
  for (int i = 0; i < 3; ++i) {
    all[1 + i] = digest[i];
    all[4 + i] = -digest[i];
  }
  maxOverRanksBounded(all, 7, "after trying " + what);
  if (all[0] != 0.0) {
    if (succeeded)
      note() << "stopping: another rank failed " << what << "\n";
    std::fflush(stdout);
    finish();
    std::exit(1);
  }
  for (int i = 0; i < 3; ++i)
    if (all[1 + i] != -all[4 + i])
      return false;
  return true;
}

void Job::beginStep(int64_t step) {
  currentStep = step;
  std::string prefix = tool + ": rank " + std::to_string(rank) +
                       ": error: step " + std::to_string(step) +
                       ": the compiled step crashed on rank " +
                       std::to_string(rank) + " (signal ";
  crashPrefixLength = std::min(prefix.size(), sizeof crashPrefix);
  std::memcpy(crashPrefix, prefix.data(), crashPrefixLength);
  std::fflush(stdout);
  std::fflush(stderr);
  installCrashHandlers();
  if (stepTimeoutSeconds > 0)
    watchdog.arm(stepTimeoutSeconds,
                 tool + ": rank " + std::to_string(rank) + ": error: step " +
                     std::to_string(step) + " did not finish within " +
                     secondsText(stepTimeoutSeconds) +
                     " s (--step-timeout): a loop in the step may never "
                     "end, or a rank stopped\n");
}

void Job::bound(const std::string &what) {
  watchdog.arm(timeoutSeconds, tool + ": rank " + std::to_string(rank) +
                                   ": error: " + what +
                                   " did not finish within " +
                                   secondsText(timeoutSeconds) +
                                   " s (--timeout): is a file a pipe that no "
                                   "one writes?\n");
}

void Job::endBound() { watchdog.disarm(); }

void Job::endStep() {
  restoreCrashHandlers();
  if (stepTimeoutSeconds > 0)
    watchdog.disarm();
}

std::string Job::simulatedLinkText() const {
  std::ostringstream os;
  os << simulatedLinkGbps << " Gb/s, " << simulatedLinkLatencyUs << " \u00b5s";
  return os.str();
}

std::string Job::expand(std::string_view pattern, int64_t step, int64_t result,
                        std::string_view name) const {
  return expandPattern(pattern, rank, step, result, name);
}

std::string expandPattern(std::string_view pattern, int rank, int64_t step,
                          int64_t result, std::string_view name) {
  std::string out;
  while (!pattern.empty()) {
    size_t open = pattern.find('{');
    out += std::string(pattern.substr(0, open));
    if (open == std::string_view::npos)
      break;
    pattern = pattern.substr(open);
    size_t close = pattern.find('}');
    std::string_view key = close == std::string_view::npos
                               ? pattern.substr(1)
                               : pattern.substr(1, close - 1);
    bool known = close != std::string_view::npos;
    std::string replacement;
    if (known && key == "rank")
      replacement = std::to_string(rank);
    else if (known && key == "step" && step >= 0)
      replacement = std::to_string(step);
    else if (known && key.substr(0, 5) == "step%" && step >= 0 &&
             key.size() > 5 &&
             key.find_first_not_of("0123456789", 5) == std::string_view::npos &&
             key.size() < 5 + 18 && std::stoll(std::string(key.substr(5))) > 0)
      replacement =
          std::to_string(step % std::stoll(std::string(key.substr(5))));
    else if (known && key == "result" && result >= 0)
      replacement = std::to_string(result);
    else if (known && key == "name" && !name.empty())
      replacement = std::string(name);
    else {
      out += "{";
      pattern = pattern.substr(1);
      continue;
    }
    out += replacement;
    pattern = pattern.substr(close + 1);
  }
  return out;
}

} // namespace stephost
