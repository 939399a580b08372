//===- RunOptions.h - the command line of the step hosts --------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The options ddp-run and ddprt-step-runner share (ddp-run's options of the
// same names), and their checks against a step's signature.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_RUNOPTIONS_H
#define DDPRT_HOST_RUNOPTIONS_H

#include <string>
#include <vector>

namespace stephost {

class Job;
struct StepSignature;

struct RunOptions {
  unsigned steps = 1;
  unsigned firstStep = 0;
  std::string backend = "cpu";
  /// --input: one pattern per argument, in order, or a single pattern with
  /// {name} for every argument.
  std::vector<std::string> inputs;
  /// --inputs: an .npz pattern whose arrays are named after the arguments.
  std::string inputArchive;
  std::vector<std::string> carries;
  std::string output;
  std::vector<unsigned> outputResults;
  std::string finalOutput;
  std::string checkpointLoad, checkpointSave;
  std::vector<std::string> setStates;
  std::string dumpState;
  std::string summaryJson;
  double timeoutSeconds = 60.0;
  /// --step-timeout: the longest one step may run on a rank, collectives
  /// and the step's own loops together (0: no bound).
  double stepTimeoutSeconds = 0.0;
  /// --simulated-link=<gbps>,<latency_us> ("": none; DDPRT_SIMULATED_LINK
  /// overrides it in the runtime).
  std::string simulatedLink;
  /// What a DDPRT_NONFINITE from the step does: "skip" (warn on rank 0 and
  /// go on; the runtime kept that tensor's state) or "fail" (stop the job).
  std::string onNonfinite = "skip";
  /// --threads-per-rank: the threads of the step's own compute that the runtime
  /// runs (ddprt_set_compute_threads: the matmuls' BLAS) on each rank; 0:
  /// this node's cores divided by the ranks on it, less one (the rank's
  /// communication thread).
  int threads = 0;
  bool quiet = false;
  /// --log-every: rank 0 prints every N-th step (and the last); 0: the
  /// first and the last step and one every few seconds between.
  unsigned logEvery = 0;

  /// Whether an output pattern names an .npz: every result of a step in
  /// one archive, keyed by the results' names.
  static bool isArchive(const std::string &pattern) {
    return pattern.size() >= 4 &&
           pattern.compare(pattern.size() - 4, 4, ".npz") == 0;
  }

  /// Whether a single --input pattern with {name} gives every argument.
  bool usesOnePatternForAll() const {
    return inputs.size() == 1 && inputs[0].find("{name}") != std::string::npos;
  }
};

/// Seconds between two progress lines with --log-every=0.
inline constexpr double kLogSeconds = 5.0;
/// The most --threads-per-rank a rank takes.
inline constexpr int kMaxThreads = 4096;

/// --threads-per-rank=0: the cores this process may run on divided by the
/// ranks of the job on this node (the launcher's local size, else
/// `worldSize`), less one for the rank's communication thread; at least 1.
int defaultComputeThreads(int worldSize);

/// The threads of the step's parallel loops (libomp's, on the calling
/// thread, which runs the step): `threads`. Nothing without libomp.
void setLoopThreads(int threads);

/// Checks the options that need no signature (--backend, --on-nonfinite,
/// --simulated-link); prints what is wrong.
bool checkRunOptions(const std::string &tool, const RunOptions &options);
/// --simulated-link's bandwidth (Gb/s) and latency (microseconds); 0, 0
/// when not given. False, saying why in `error`, if malformed.
bool parseSimulatedLinkOption(const RunOptions &options, double &gbps,
                              double &latencyUs, std::string &error);

/// Checks the command line (--input/--inputs, --carry, --output-results,
/// the files written at the end) against the signature; prints what is
/// wrong. Call on every rank, then agreeOrStop; or before launching the
/// ranks, with `job.rank` 0 and `job.worldSize` the ranks to launch.
/// `checkFiles` also checks that the files written after the last step can
/// be written (on this rank).
bool checkCommandLine(const Job &job, const StepSignature &signature,
                      const RunOptions &options, bool checkFiles = true);

/// Before launching `job.worldSize` ranks: the first step's inputs of every
/// rank exist, and each .npz holds an array for every argument. What is
/// missing is said once (the same names missing from every rank's archive
/// in one line), instead of by every rank after the launch.
bool checkInputsBeforeLaunch(const Job &job, const StepSignature &signature,
                             const RunOptions &options);

/// The results --output writes (--output-results, or all), in order.
std::vector<size_t> writtenResults(const StepSignature &signature,
                                   const RunOptions &options);

/// Parses --carry into carriedFrom[argument] = result (-1 where the
/// argument is read, not carried); with `report`, says what is wrong.
bool parseCarries(const Job &job, const StepSignature &signature,
                  const RunOptions &options, std::vector<int> &carriedFrom,
                  bool report);

} // namespace stephost

#endif // DDPRT_HOST_RUNOPTIONS_H
