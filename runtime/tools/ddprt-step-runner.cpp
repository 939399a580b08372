//===- ddprt-step-runner.cpp - run an ahead-of-time compiled step ---------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Runs a step function that `ddp-run --emit-step=DIR` compiled ahead of
// time (DIR/libstep.so and DIR/step.json) on every rank of a job, with the
// same options and the same semantics as ddp-run, but without LLVM or
// MLIR: for machines that have the runtime and a C++ compiler only (the GPU
// machines).
//
//   ddp-run step.mlir --emit-step=out/step          # where MLIR is
//   ddprt-step-runner out/step --backend=cuda --steps=10
//       --input=grads/r{rank}.s{step}.w.npy ...
//       --output=out/r{rank}.s{step}.o{result}.npy      # (one line)
//
// Under mpirun it runs on every rank, when the runtime is built with MPI.
// Any bad input stops every rank with a message and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "StepHost.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace stephost;

namespace {

/// --sync-every-call.
bool synchronizeEveryCall = false;

const char *kTool = "ddprt-step-runner";

const char *kUsage =
    "usage: ddprt-step-runner DIR [options]\n"
    "\n"
    "Runs the step that `ddp-run --emit-step=DIR` compiled (DIR/step.json,\n"
    "DIR/libstep.so) on every rank (under mpirun when the runtime has MPI).\n"
    "\n"
    "  --steps=K              how many steps to run (1)\n"
    "  --first-step=S         number of the first step in file names (0)\n"
    "  --input=PATTERN        one .npy per argument, in order, or one with\n"
    "                         {name} for all ({rank}, {step}, {step%N},\n"
    "                         {name}: the argument's name in step.json)\n"
    "  --inputs=FILE.npz      every argument from one .npz, the array named\n"
    "                         after the argument ({rank}, {step}, {step%N})\n"
    "  --carry=ARG:RESULT     argument ARG of a step is result RESULT of the\n"
    "                         step before (its --input is read only first)\n"
    "  --output=PATTERN       write results of every step: a .npy each\n"
    "                         ({rank}, {step}, {result}, {name}: the result's\n"
    "                         name in step.json), or one .npz per rank and\n"
    "                         step keyed by name; every file its own path\n"
    "  --output-results=I,J   which results --output writes (default: all)\n"
    "  --final-output=PATTERN write every result of the last step (as\n"
    "                         --output)\n"
    "  --checkpoint-load=P    restore the compression state first ({rank})\n"
    "  --checkpoint-save=P    save the compression state at the end ({rank})\n"
    "  --set-state=NAME=PATH  overwrite a state from .npy first ({rank})\n"
    "  --dump-state=PATTERN   write every state at the end ({rank}, {name})\n"
    "  --summary-json=PATH    time and counters as JSON (rank 0, or every\n"
    "                         rank with {rank})\n"
    "  --backend=cpu|cuda     runtime backend (cpu)\n"
    "  --timeout=SECONDS      fail a collective after this long (60; 0: "
    "never)\n"
    "  --step-timeout=SECONDS stop the job when one step runs longer than\n"
    "                         this on a rank (0: no bound, the default)\n"
    "  --threads-per-rank=N   threads of each rank's matmuls (BLAS; 0, the\n"
    "                         default: this node's cores / its ranks - 1)\n"
    "  --runtime-checks is ddp-run --emit-step's: the checks are compiled in\n"
    "  --simulated-link=GBPS,LATENCY_US  hold each collective as a network\n"
    "                         link would (a measuring tool; CPU backend)\n"
    "  --on-nonfinite=skip|fail  NaN or Inf in a PowerSGD tensor's averaged\n"
    "                         P or Q: skip its error feedback for the step\n"
    "                         with a warning (skip), or stop the job (fail)\n"
    "  --np=N                 start N ranks under mpirun (unless already\n"
    "                         inside an MPI job); what every rank would\n"
    "                         refuse is said once, before the launch\n"
    "  --hostfile=FILE        with --np: start the ranks on the hosts of\n"
    "                         this mpirun hostfile ('HOST slots=N' lines)\n"
    "  --quiet                print only the summary\n"
    "  --sync-every-call      measuring: wait for the device after every\n"
    "                         runtime call (steps did before host barriers)\n"
    "  --version              the version\n"
    "  --log-every=N          print every N-th step (0: the first, the last\n"
    "                         and a line every 5 seconds; the default)\n";

bool usageError(const std::string &message) {
  std::fprintf(stderr, "%s: error: %s (see --help)\n", kTool, message.c_str());
  return false;
}

bool parseUnsigned(const std::string &text, unsigned &value) {
  if (text.empty() || text.size() > 9 ||
      text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  value = unsigned(std::stoul(text));
  return true;
}

void splitCommas(const std::string &text, std::vector<std::string> &out) {
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos)
      return;
    start = comma + 1;
  }
}

/// ddp-run's options of the same names: --name=value or --name value.
bool parseCommandLine(int argc, char **argv, RunOptions &options,
                      std::string &directory, bool &help) {
  const char *valued[] = {"steps",
                          "first-step",
                          "input",
                          "inputs",
                          "carry",
                          "output",
                          "output-results",
                          "final-output",
                          "checkpoint-load",
                          "checkpoint-save",
                          "set-state",
                          "dump-state",
                          "summary-json",
                          "backend",
                          "timeout",
                          "step-timeout",
                          "threads-per-rank",
                          "on-nonfinite",
                          "log-every",
                          "simulated-link",
                          "np",
                          "hostfile"};
  std::set<std::string> seen;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "-h") {
      help = true;
      return true;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      if (!directory.empty())
        return usageError("one step directory, not '" + directory + "' and '" +
                          arg + "'");
      directory = arg;
      continue;
    }
    std::string name = arg.substr(arg[1] == '-' ? 2 : 1), value;
    size_t equals = name.find('=');
    bool hasValue = equals != std::string::npos;
    if (hasValue) {
      value = name.substr(equals + 1);
      name = name.substr(0, equals);
    }
    if (name == "quiet" && !hasValue) {
      options.quiet = true;
      continue;
    }
    if (name == "sync-every-call" && !hasValue) {
      synchronizeEveryCall = true;
      continue;
    }
    bool known = false;
    for (const char *v : valued)
      known = known || name == v;
    if (!known)
      return usageError("unknown option '" + arg + "'");
    if (!hasValue) {
      if (i + 1 >= argc)
        return usageError("--" + name + " needs a value");
      value = argv[++i];
    }
    // As ddp-run: an option that takes one value takes it once.
    bool repeatable = name == "input" || name == "carry" ||
                      name == "output-results" || name == "set-state";
    if (!repeatable && !seen.insert(name).second)
      return usageError("--" + name + " given more than once");
    if (name == "steps" || name == "first-step" || name == "log-every") {
      unsigned &target = name == "steps"        ? options.steps
                         : name == "first-step" ? options.firstStep
                                                : options.logEvery;
      if (!parseUnsigned(value, target))
        return usageError("--" + name + "=" + value +
                          " is not a non-negative integer");
    } else if (name == "input") {
      options.inputs.push_back(value);
    } else if (name == "inputs") {
      options.inputArchive = value;
    } else if (name == "carry") {
      splitCommas(value, options.carries);
    } else if (name == "output") {
      options.output = value;
    } else if (name == "output-results") {
      std::vector<std::string> items;
      splitCommas(value, items);
      for (const std::string &item : items) {
        unsigned r;
        if (!parseUnsigned(item, r))
          return usageError("--output-results=" + value +
                            " is not a list of result numbers");
        options.outputResults.push_back(r);
      }
    } else if (name == "final-output") {
      options.finalOutput = value;
    } else if (name == "checkpoint-load") {
      options.checkpointLoad = value;
    } else if (name == "checkpoint-save") {
      options.checkpointSave = value;
    } else if (name == "set-state") {
      options.setStates.push_back(value);
    } else if (name == "dump-state") {
      options.dumpState = value;
    } else if (name == "summary-json") {
      options.summaryJson = value;
    } else if (name == "backend") {
      options.backend = value;
    } else if (name == "on-nonfinite") {
      options.onNonfinite = value;
    } else if (name == "simulated-link") {
      options.simulatedLink = value;
    } else if (name == "np" || name == "hostfile") {
      // Read by parseLaunchOptions in main.
    } else if (name == "threads-per-rank") {
      char *end = nullptr;
      long threads = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || end != value.c_str() + value.size() ||
          threads < 0 || threads > kMaxThreads)
        return usageError("--threads-per-rank=" + value + " is not a thread count "
                          "(0: this node's cores / its ranks - 1)");
      options.threads = int(threads);
    } else if (name == "step-timeout") {
      char *end = nullptr;
      options.stepTimeoutSeconds = std::strtod(value.c_str(), &end);
      if (value.empty() || end != value.c_str() + value.size() ||
          !(options.stepTimeoutSeconds >= 0))
        return usageError("--step-timeout=" + value +
                          " is not a number of seconds");
    } else if (name == "timeout") {
      char *end = nullptr;
      options.timeoutSeconds = std::strtod(value.c_str(), &end);
      if (value.empty() || end != value.c_str() + value.size() ||
          !(options.timeoutSeconds >= 0))
        return usageError("--timeout=" + value + " is not a number of seconds");
    }
  }
  if (directory.empty())
    return usageError("no step directory given (what ddp-run --emit-step "
                      "wrote)");
  return true;
}

/// Loads DIR/libstep.so, binds the host functions it calls and finds its
/// packed entry. Returns null after saying why.
PackedFunction loadStep(const Job &job, const std::string &directory,
                        const StepSignature &signature) {
  std::vector<std::string> errors;
  PackedFunction step =
      loadStepLibrary(directory, signature, synchronizeEveryCall, errors);
  for (const std::string &error : errors)
    job.error() << error << "\n";
  return step;
}

} // namespace

/// Before launching the ranks with --np: what would fail the same way on
/// every rank (options, step.json, the command line against its signature,
/// the first step's inputs) is said here, once, and nothing is launched.
static bool checkBeforeLaunch(const std::string &directory,
                              const RunOptions &options,
                              const LaunchOptions &launch) {
  if (!checkRunOptions(kTool, options))
    return false;
  StepSignature signature;
  std::string error;
  if (!readStepJson(directory + "/step.json", signature, error)) {
    Line(std::string(kTool) + ": error: ") << error << "\n";
    return false;
  }
  Job job(kTool);
  job.worldSize = int(launch.ranks);
  job.rankIndependent = true;
  // On several hosts each rank reads its own host's files, and checks
  // them itself.
  return checkCommandLine(job, signature, options, /*checkFiles=*/false) &&
         (!launch.hostfile.empty() ||
          checkInputsBeforeLaunch(job, signature, options));
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--version") {
      // No LLVM here: the step was compiled by ddp-run --emit-step.
      std::printf("%s (ddp-opt %s)\n  built without LLVM or MLIR (it runs "
                  "what ddp-run --emit-step compiled)\n",
                  kTool, DDP_VERSION_STRING);
      return 0;
    }
  RunOptions options;
  std::string directory;
  bool help = false;
  if (!parseCommandLine(argc, argv, options, directory, help))
    return 1;
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  LaunchOptions launch;
  std::string launchError;
  if (!parseLaunchOptions(argc, argv, launch, launchError)) {
    usageError(launchError);
    return 1;
  }
  launch.timeoutSeconds = options.timeoutSeconds;
  if (launch.ranks > 0 && !insideMpiJob())
    return checkBeforeLaunch(directory, options, launch)
               ? launchUnderMpirun(kTool, argc, argv, launch)
               : 1;

  // Start the runtime first: it brings up MPI, and every later failure can
  // then be agreed on by all ranks.
  Job job(kTool);
  if (!job.start(options))
    return 1;

  StepSignature signature;
  std::string error;
  bool ok = readStepJson(directory + "/step.json", signature, error);
  if (!ok)
    job.error() << error << "\n";
  job.agreeOrStop(ok, "to read the step");
  job.agreeOrStop(checkCommandLine(job, signature, options),
                  "to check the command line");
  PackedFunction step = loadStep(job, directory, signature);
  job.agreeOrStop(step != nullptr, "to load the step");
  return runSteps(job, signature, step, options);
}
