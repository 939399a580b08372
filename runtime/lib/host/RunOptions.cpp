//===- RunOptions.cpp - the command line of the step hosts ----------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "RunOptions.h"

#include "Format.h"
#include "Job.h"
#include "Npy.h"
#include "StepBuffers.h"
#include "StepSignature.h"

#include "ddprt/ddprt.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <sched.h>
#include <sys/stat.h>
#include <thread>

namespace stephost {

bool checkRunOptions(const std::string &tool, const RunOptions &options) {
  bool ok = true;
  if (options.backend != "cpu" && options.backend != "cuda") {
    Line(tool + ": error: ")
        << "--backend must be cpu or cuda, not '" << options.backend << "'\n";
    ok = false;
  }
  if (options.onNonfinite != "skip" && options.onNonfinite != "fail") {
    Line(tool + ": error: ") << "--on-nonfinite must be skip or fail, not '"
                             << options.onNonfinite << "'\n";
    ok = false;
  }
  if (options.threads < 0 || options.threads > kMaxThreads) {
    Line(tool + ": error: ")
        << "--threads-per-rank must be 0 (the node's cores per rank, less "
           "one) to "
        << kMaxThreads << ", not " << options.threads << "\n";
    ok = false;
  }
  // As --timeout: one too long for the clock is no bound.
  if (!(options.stepTimeoutSeconds >= 0)) {
    Line(tool + ": error: ")
        << "--step-timeout must be a number of seconds (0: no bound), not "
        << options.stepTimeoutSeconds << "\n";
    ok = false;
  }
  double gbps = 0.0, latencyUs = 0.0;
  std::string error;
  if (!parseSimulatedLinkOption(options, gbps, latencyUs, error)) {
    Line(tool + ": error: ") << "--simulated-link: " << error << "\n";
    ok = false;
  }
  return ok;
}

int defaultComputeThreads(int worldSize) {
  int cores = 0;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
    cores = CPU_COUNT(&allowed);
  if (cores <= 0)
    cores = int(std::max(1u, std::thread::hardware_concurrency()));
  // The ranks on this node, as the launchers say (OpenMPI, MPICH/PMI);
  // without one, the job's.
  int ranks = worldSize;
  for (const char *variable :
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"})
    if (const char *value = std::getenv(variable)) {
      int local = std::atoi(value);
      if (local > 0) {
        ranks = local;
        break;
      }
    }
  // Each rank keeps a core for its communication thread, which runs the
  // collectives while the step computes (overlap).
  return std::clamp(cores / std::max(1, ranks) - 1, 1, kMaxThreads);
}

#if defined(DDPRT_HAVE_OPENMP)
// libomp's C API, declared here: the compiler's own omp.h may be GCC's
// (for libgomp, whose library the step does not use).
extern "C" void omp_set_num_threads(int threads);
#endif

void setLoopThreads(int threads) {
#if defined(DDPRT_HAVE_OPENMP)
  // Threads idle after a parallel loop sleep at once rather than spin for
  // libomp's 200 ms on the cores the rank's BLAS threads and communication
  // thread run on next (read when libomp starts, on the call below; the
  // environment's KMP_BLOCKTIME or OMP_WAIT_POLICY wins).
  if (!std::getenv("KMP_BLOCKTIME") && !std::getenv("OMP_WAIT_POLICY"))
    ::setenv("KMP_BLOCKTIME", "0", /*overwrite=*/0);
  omp_set_num_threads(std::max(1, threads));
#else
  (void)threads;
#endif
}

bool parseSimulatedLinkOption(const RunOptions &options, double &gbps,
                              double &latencyUs, std::string &error) {
  gbps = latencyUs = 0.0;
  if (options.simulatedLink.empty())
    return true;
  const char *why = nullptr;
  if (ddprt_parse_simulated_link(options.simulatedLink.c_str(), &gbps,
                                 &latencyUs, &why) == DDPRT_OK)
    return true;
  error = why ? why : "not a simulated link";
  gbps = latencyUs = 0.0;
  return false;
}

bool parseCarries(const Job &job, const StepSignature &signature,
                  const RunOptions &options, std::vector<int> &carriedFrom,
                  bool report) {
  bool ok = true;
  carriedFrom.assign(signature.arguments.size(), -1);
  for (const std::string &carry : options.carries) {
    size_t colon = carry.find(':');
    unsigned long argument = ~0ul, result = ~0ul;
    auto number = [](const std::string &text, unsigned long &value) {
      if (text.empty() || text.size() > 9 ||
          text.find_first_not_of("0123456789") != std::string::npos)
        return false;
      value = std::stoul(text);
      return true;
    };
    if (colon == std::string::npos ||
        !number(carry.substr(0, colon), argument) ||
        !number(carry.substr(colon + 1), result) ||
        argument >= signature.arguments.size() ||
        result >= signature.results.size()) {
      if (report)
        job.error() << "--carry=" << carry << " is not ARG:RESULT with ARG < "
                    << signature.arguments.size() << " and RESULT < "
                    << signature.results.size() << "\n";
      ok = false;
      continue;
    }
    if (signature.arguments[argument] != signature.results[result]) {
      if (report)
        job.error() << "--carry=" << carry << ": result " << result << " is "
                    << typeString(signature.results[result]) << " but argument "
                    << argument << " is "
                    << typeString(signature.arguments[argument]) << "\n";
      ok = false;
      continue;
    }
    // One buffer per argument: the compiled step assumes its arguments do
    // not alias (it reduces them in place).
    bool resultTaken = std::find(carriedFrom.begin(), carriedFrom.end(),
                                 int(result)) != carriedFrom.end();
    if (carriedFrom[argument] >= 0 || resultTaken) {
      if (report)
        job.error() << "--carry=" << carry << ": "
                    << (resultTaken ? "result " + std::to_string(result)
                                    : "argument " + std::to_string(argument))
                    << " is already carried\n";
      ok = false;
      continue;
    }
    carriedFrom[argument] = int(result);
  }
  return ok;
}

namespace {

std::vector<std::string> stateNames(const StepSignature &signature) {
  std::vector<std::string> names;
  for (const StateSpec &state : signature.states)
    names.push_back(state.name);
  return names;
}

/// Whether a file can be written at `path` after the last step (a probe
/// file is created next to it and removed); says why not. With
/// `createParents` (.npy files, whose writer creates them) missing
/// directories are created first.
bool checkWritable(const Job &job, const std::string &flag,
                   const std::string &path, bool createParents) {
  std::string error;
  if (createParents && !npy::createDirectories(npy::parentPath(path), error)) {
    job.localError() << flag << ": " << error << "\n";
    return false;
  }
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    job.localError() << flag << ": '" << path << "' is a directory\n";
    return false;
  }
  std::string probe = path + ".probe." + std::to_string(job.rank);
  std::FILE *file = std::fopen(probe.c_str(), "wb");
  if (!file) {
    job.localError() << flag << ": cannot write '" << path
                     << "': " << std::strerror(errno) << "\n";
    return false;
  }
  std::fclose(file);
  std::remove(probe.c_str());
  return true;
}

/// {name} in `pattern` stands for each of `names` (`what`: whose names):
/// each must be one file-name component (ddprt_name_problem), so that no
/// name leads a file out of the directory the pattern gives.
bool checkNamesInPattern(const Job &job, const std::string &flag,
                         const std::string &pattern,
                         const std::vector<std::string> &names,
                         const char *what) {
  if (pattern.find("{name}") == std::string::npos)
    return true;
  bool ok = true;
  for (const std::string &name : names)
    if (const char *problem = ddprt_name_problem(name.data(), name.size())) {
      job.error() << flag << "=" << pattern << ": {name} would be the "
                  << what << " name '" << printableText(name)
                  << "', which cannot be part of a path: " << problem
                  << " (rename it, or leave {name} out of the path)\n";
      ok = false;
    }
  return ok;
}

/// Files written once per rank after the last step: the path must differ
/// between ranks (each rank's state is its own) and be writable, checked
/// before the first step rather than after the last.
bool checkFinalFiles(const Job &job, const StepSignature &signature,
                     const RunOptions &options, bool checkFiles) {
  bool ok = true;
  auto perRank = [&](const std::string &flag, const std::string &pattern) {
    if (pattern.empty() || job.worldSize <= 1 ||
        pattern.find("{rank}") != std::string::npos)
      return true;
    job.error() << flag << "=" << pattern << " names the same file on all "
                << job.worldSize << " ranks, which would overwrite each "
                << "other's state: put {rank} in the path\n";
    return false;
  };
  if (!perRank("--checkpoint-save", options.checkpointSave))
    ok = false;
  else if (checkFiles && !options.checkpointSave.empty() &&
           !checkWritable(job, "--checkpoint-save",
                          job.expand(options.checkpointSave, -1),
                          /*createParents=*/false))
    ok = false;
  if (!perRank("--dump-state", options.dumpState))
    ok = false;
  else if (!options.dumpState.empty() && signature.states.size() > 1 &&
           options.dumpState.find("{name}") == std::string::npos) {
    job.error() << "--dump-state=" << options.dumpState
                << " names one file for all " << signature.states.size()
                << " states: put {name} in the path\n";
    ok = false;
  } else if (!checkNamesInPattern(job, "--dump-state", options.dumpState,
                                  stateNames(signature), "state")) {
    ok = false;
  } else if (checkFiles && !options.dumpState.empty())
    for (const StateSpec &state : signature.states)
      if (!checkWritable(job, "--dump-state",
                         job.expand(options.dumpState, -1, -1, state.name),
                         /*createParents=*/true))
        ok = false;
  return ok;
}

/// An output pattern must give every file it writes its own path: each
/// rank ({rank}), each step (--output: {step}) and each result ({result}
/// or {name}; an .npz holds every result of a step under its name).
/// `written` are the results it writes.
bool checkOutputPattern(const Job &job, const StepSignature &signature,
                        const RunOptions &options, const std::string &flag,
                        const std::string &pattern, bool everyStep,
                        const std::vector<size_t> &written) {
  if (pattern.empty())
    return true;
  auto has = [&](const char *placeholder) {
    return pattern.find(placeholder) != std::string::npos;
  };
  bool archive = RunOptions::isArchive(pattern);
  std::vector<std::string> missing;
  if (job.worldSize > 1 && !has("{rank}"))
    missing.push_back("{rank} (" + std::to_string(job.worldSize) + " ranks)");
  if (everyStep && options.steps > 1 && !has("{step}"))
    missing.push_back("{step} (" + std::to_string(options.steps) + " steps" +
                      (has("{step%") ? "; {step%N} would reuse paths" : "") +
                      ")");
  if (!archive && written.size() > 1 && !has("{result}") && !has("{name}"))
    missing.push_back("{result} or {name} (" + std::to_string(written.size()) +
                      " results)");
  if (!missing.empty()) {
    Line line = job.error();
    line << flag << "=" << pattern
         << " would write several outputs to one file: put ";
    for (size_t i = 0; i < missing.size(); ++i)
      line << (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ")
           << missing[i];
    line << " in the path";
    if (!archive && written.size() > 1)
      line << " (or end it in .npz: one archive per rank and step, keyed by "
              "the results' names)";
    line << "\n";
    return false;
  }
  if (archive && (has("{result}") || has("{name}"))) {
    job.error() << flag << "=" << pattern
                << ": an .npz holds every result of a step under its name; "
                   "take {result} and {name} out of its path\n";
    return false;
  }
  if (archive && written.empty()) {
    job.error() << flag << "=" << pattern << ": @" << signature.entry
                << " has no result to write\n";
    return false;
  }
  if (archive && !npy::archiveSupported()) {
    job.error() << flag << ": this build writes no .npz (libzip was not "
                   "found when it was built; install libzip-dev and "
                   "rebuild)\n";
    return false;
  }
  std::vector<std::string> names;
  for (size_t r : written)
    names.push_back(resultName(signature, r));
  if (!archive && !checkNamesInPattern(job, flag, pattern, names, "result"))
    return false;
  // Names must tell the results apart where they name the files or the
  // arrays.
  if (archive || (has("{name}") && !has("{result}")))
    for (size_t i = 0; i < written.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (resultName(signature, written[i]) ==
            resultName(signature, written[j])) {
          job.error() << flag << "=" << pattern << ": results " << written[j]
                      << " and " << written[i] << " are both named '"
                      << resultName(signature, written[i])
                      << "'; use {result} in a .npy path instead\n";
          return false;
        }
  return true;
}

} // namespace

std::vector<size_t> writtenResults(const StepSignature &signature,
                                   const RunOptions &options) {
  std::vector<size_t> written;
  for (size_t r = 0; r < signature.results.size(); ++r)
    if (options.outputResults.empty() ||
        std::find(options.outputResults.begin(), options.outputResults.end(),
                  r) != options.outputResults.end())
      written.push_back(r);
  return written;
}

bool checkCommandLine(const Job &job, const StepSignature &signature,
                      const RunOptions &options, bool checkFiles) {
  bool ok = checkFinalFiles(job, signature, options, checkFiles);
  // A step written for a grid of N devices averages over N: on another
  // number of ranks its results would be silently wrong.
  if (signature.worldSize > 0 && job.worldSize != signature.worldSize) {
    job.error() << "@" << signature.entry << " was written for "
                << signature.worldSize << " ranks (its shard.grid), but this "
                << "job has " << job.worldSize << (job.worldSize == 1 ? " rank" : " ranks")
                << ": run it on " << signature.worldSize << " (--np="
                << signature.worldSize << ")\n";
    ok = false;
  }
  size_t count = signature.arguments.size();
  bool byName =
      !options.inputArchive.empty() ||
      std::any_of(options.inputs.begin(), options.inputs.end(),
                  [](const std::string &pattern) {
                    return pattern.find("{name}") != std::string::npos;
                  });
  if (!options.inputArchive.empty() && !options.inputs.empty()) {
    job.error() << "give the arguments either in one .npz (--inputs) or as "
                   ".npy files (--input), not both\n";
    ok = false;
  } else if (!options.inputArchive.empty() && !npy::archiveSupported()) {
    job.error() << "--inputs: this build reads no .npz (libzip was not "
                   "found when it was built; install libzip-dev and "
                   "rebuild)\n";
    ok = false;
  } else if (options.inputArchive.empty() && options.inputs.size() != count &&
             !options.usesOnePatternForAll()) {
    Line line = job.error();
    line << "@" << signature.entry << " takes " << count << " argument"
         << (count == 1 ? "" : "s") << " but " << options.inputs.size()
         << " --input given (one per argument, in order, or one pattern "
            "with {name}";
    if (npy::archiveSupported())
      line << ", or --inputs=FILE.npz";
    line << ")";
    for (size_t a = 0; a < count; ++a)
      line << (a ? ", " : ": ") << argumentName(signature, a) << " "
           << typeString(signature.arguments[a]);
    line << "\n";
    ok = false;
  }
  // Arguments found by name must have distinct names.
  if (byName)
    for (size_t a = 0; a < count; ++a)
      for (size_t b = 0; b < a; ++b)
        if (argumentName(signature, a) == argumentName(signature, b)) {
          job.error() << "arguments " << b << " and " << a
                      << " are both named '" << argumentName(signature, a)
                      << "': --inputs and {name} need distinct names (the "
                         "arguments' ddp.name or name locations)\n";
          ok = false;
        }
  // {name} in an --input pattern stands for the arguments it reads: all
  // with one pattern, its own with one per argument.
  if (options.inputArchive.empty()) {
    bool onePattern = options.usesOnePatternForAll();
    for (size_t a = 0; a < count; ++a) {
      const std::string *pattern =
          onePattern ? &options.inputs[0]
                     : a < options.inputs.size() ? &options.inputs[a] : nullptr;
      if (pattern && !checkNamesInPattern(job, "--input", *pattern,
                                          {argumentName(signature, a)},
                                          "argument"))
        ok = false;
    }
  }
  std::vector<int> carriedFrom;
  if (!parseCarries(job, signature, options, carriedFrom, /*report=*/true))
    ok = false;
  bool resultsOk = true;
  for (unsigned r : options.outputResults)
    if (r >= signature.results.size()) {
      job.error() << "--output-results=" << r << " but @" << signature.entry
                  << " has " << signature.results.size() << " results\n";
      resultsOk = false;
    }
  if (!resultsOk)
    return false;
  std::vector<size_t> all(signature.results.size());
  for (size_t r = 0; r < all.size(); ++r)
    all[r] = r;
  ok &= checkOutputPattern(job, signature, options, "--output", options.output,
                           /*everyStep=*/true,
                           writtenResults(signature, options));
  ok &= checkOutputPattern(job, signature, options, "--final-output",
                           options.finalOutput, /*everyStep=*/false, all);
  return ok;
}

bool checkInputsBeforeLaunch(const Job &job, const StepSignature &signature,
                             const RunOptions &options) {
  int64_t step = options.firstStep;
  size_t count = signature.arguments.size();
  // The distinct paths of the ranks (as each expands the pattern).
  auto perRank = [&](const std::string &pattern, const std::string &name) {
    std::vector<std::string> paths;
    for (int rank = 0; rank < job.worldSize; ++rank) {
      std::string path = expandPattern(pattern, rank, step, -1, name);
      if (std::find(paths.begin(), paths.end(), path) == paths.end())
        paths.push_back(path);
    }
    return paths;
  };
  // Anything readable that is not a directory (a pipe may be a file too).
  auto exists = [](const std::string &path) {
    struct stat info;
    return ::stat(path.c_str(), &info) == 0 && !S_ISDIR(info.st_mode);
  };
  bool ok = true;
  if (options.inputArchive.empty()) {
    // checkCommandLine has matched the patterns with the arguments.
    for (size_t a = 0; a < count; ++a) {
      const std::string &pattern = options.usesOnePatternForAll()
                                       ? options.inputs[0]
                                       : options.inputs[a];
      std::vector<std::string> missing;
      for (const std::string &path : perRank(pattern, argumentName(signature, a)))
        if (!exists(path))
          missing.push_back("'" + path + "'");
      if (missing.empty())
        continue;
      job.error() << "step " << step << ": argument " << a << " ('"
                  << argumentName(signature, a) << "'): no file "
                  << listNames(missing, 4) << "\n";
      ok = false;
    }
    return ok;
  }
  // One .npz per rank: which arguments' arrays each lacks.
  struct Finding {
    std::string path, error;
    std::vector<std::string> missing, held;
  };
  std::vector<Finding> findings;
  std::vector<std::string> absent;
  for (const std::string &path : perRank(options.inputArchive, ""))
    if (!exists(path))
      absent.push_back("'" + path + "'");
  if (!absent.empty()) {
    job.error() << "step " << step << ": --inputs: no file "
                << listNames(absent, 4) << "\n";
    return false;
  }
  for (const std::string &path : perRank(options.inputArchive, "")) {
    Finding finding;
    finding.path = path;
    npy::Archive archive;
    if (!archive.open(path, finding.error)) {
      findings.push_back(finding);
      continue;
    }
    finding.held = archive.names();
    for (size_t a = 0; a < count; ++a)
      if (archiveKey(archive, signature, a).empty())
        finding.missing.push_back(argumentName(signature, a));
    findings.push_back(finding);
  }
  bool sameEverywhere =
      findings.size() > 1 &&
      std::all_of(findings.begin(), findings.end(), [&](const Finding &f) {
        return f.error.empty() && f.missing == findings[0].missing;
      });
  bool anyUnnamed = false;
  for (size_t a = 0; a < count; ++a)
    anyUnnamed |= !argumentHasName(signature, a);
  auto say = [&](const Finding &f, const std::string &where) {
    if (!f.error.empty()) {
      job.error() << "step " << step << ": " << f.error << "\n";
      return;
    }
    Line line = job.error();
    line << "step " << step << ": " << where << " no array for "
         << f.missing.size() << " of the " << count << " arguments: "
         << listNames(f.missing) << " ("
         << (sameEverywhere ? "'" + f.path + "'" : std::string("it"))
         << " holds " << f.held.size() << ": "
         << (f.held.empty() ? std::string("none") : listNames(f.held)) << ")";
    if (anyUnnamed)
      line << "; an argument without a name (no ddp.name attribute, no name "
              "location) is looked up as arg<i>, or arr_<i> as np.savez "
              "names positional arrays";
    line << "\n";
  };
  for (size_t i = 0; i < findings.size(); ++i) {
    const Finding &f = findings[i];
    if (f.error.empty() && f.missing.empty())
      continue;
    ok = false;
    if (sameEverywhere) {
      say(f, "the .npz of every rank ('" + f.path + "', ... '" +
                 findings.back().path + "') has");
      break;
    }
    say(f, "'" + f.path + "' has");
  }
  return ok;
}

} // namespace stephost
