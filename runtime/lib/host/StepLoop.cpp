//===- StepLoop.cpp - run a compiled step K times on every rank -----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "StepLoop.h"

#include "Memory.h"
#include "States.h"
#include "StepBuffers.h"
#include "Summary.h"

#include <algorithm>
#include <chrono>

namespace stephost {

namespace {

/// The steps of one run, and what carries from one to the next: the
/// arguments carried over (--carry) and the figures.
class StepLoop {
public:
  StepLoop(Job &job, const StepSignature &signature, PackedFunction step,
           const RunOptions &options, const StateHandles &states);

  /// Step `i` of `options.steps`: reads its inputs, calls it, writes its
  /// results and keeps the carried ones for the next. A failure on any
  /// rank stops every rank.
  void run(unsigned i);
  /// After the last step: frees what is still held.
  void releaseArguments();

  const RunTotals &totals() const { return runTotals; }

private:
  /// Reads the arguments that are not carried; the ranks agree that they
  /// all did, with the same shapes.
  void readArguments(unsigned i, int64_t stepNumber);
  /// Calls the step and returns its figures.
  StepRecord call(int64_t stepNumber);
  /// Whether step `i` prints a progress line (on rank 0).
  bool logs(unsigned i, bool last);
  /// Writes the results --output and --final-output ask for.
  void writeResults(const std::vector<Buffer> &results, int64_t stepNumber,
                    bool last);
  /// Carried results become the next step's arguments; the rest are
  /// freed, each buffer once (a result may be an argument's buffer,
  /// returned without a copy).
  void carryOver(std::vector<Buffer> &results, bool last);

  Job &job;
  const StepSignature &signature;
  const PackedFunction step;
  const RunOptions &options;
  std::vector<int> carriedFrom;
  std::vector<bool> writeResult;
  InputReader inputs;
  std::vector<Buffer> arguments;
  /// The storage of the returned descriptors.
  std::vector<int64_t> resultStorage;
  /// PowerSGD's step counter (with its start-iter), if the step has one.
  ddprt_state *counterState = nullptr;
  const StateSpec *counterStateInfo = nullptr;
  RunTotals runTotals;
  std::chrono::steady_clock::time_point lastLine;
};

StepLoop::StepLoop(Job &job, const StepSignature &signature,
                   PackedFunction step, const RunOptions &options,
                   const StateHandles &states)
    : job(job), signature(signature), step(step), options(options),
      writeResult(signature.results.size(), options.outputResults.empty()),
      inputs(job, signature, options), arguments(signature.arguments.size()),
      resultStorage(std::max<size_t>(resultWordCount(signature.results), 1)),
      lastLine(std::chrono::steady_clock::now()) {
  parseCarries(job, signature, options, carriedFrom, /*report=*/false);
  for (unsigned r : options.outputResults)
    writeResult[r] = true;
  runTotals.keepSeries = !options.summaryJson.empty();
  for (const StateSpec &state : signature.states)
    if (state.startIter >= 0 && state.type.dtype == "<i8" &&
        state.type.shape.empty() && !counterState) {
      counterState = states.at(state.name);
      counterStateInfo = &state;
    }
}

void StepLoop::run(unsigned i) {
  int64_t stepNumber = int64_t(options.firstStep) + i;
  job.currentStep = stepNumber;
  readArguments(i, stepNumber);
  StepRecord record = call(stepNumber);
  runTotals.add(record);
  bool last = i + 1 == options.steps;
  if (job.rank == 0 && !options.quiet && logs(i, last))
    printProgress(record);
  std::vector<Buffer> results =
      resultsFromWords(signature.results, resultStorage);
  writeResults(results, stepNumber, last);
  carryOver(results, last);
}

void StepLoop::readArguments(unsigned i, int64_t stepNumber) {
  bool readOk = true;
  job.bound("reading the inputs of step " + std::to_string(stepNumber));
  for (size_t a = 0; a < arguments.size(); ++a) {
    if (arguments[a].allocated)
      continue; // carried from the step before
    std::string error;
    Buffer buffer;
    if (!inputs.read(a, stepNumber, buffer, error)) {
      job.error() << "step " << stepNumber << ": " << error << "\n";
      readOk = false;
      continue;
    }
    arguments[a] = buffer;
  }
  job.endBound();
  inputs.endStep(/*report=*/i == 0 && readOk);
  // Dynamic sizes come from the files, which may differ between ranks
  // even where the element counts agree (2x3 and 3x2): the agreement
  // compares every argument's shape (the dtypes are the function's).
  std::vector<int64_t> shapes;
  for (const Buffer &buffer : arguments) {
    shapes.push_back(int64_t(buffer.sizes.size()));
    shapes.insert(shapes.end(), buffer.sizes.begin(), buffer.sizes.end());
  }
  std::string readWhat =
      "to read the inputs of step " + std::to_string(stepNumber);
  if (!job.agreeOrStopSame(readOk, readWhat, shapes)) {
    {
      Line line = job.error();
      line << "step " << stepNumber
           << ": the ranks read inputs of different shapes; this rank's:";
      for (size_t a = 0; a < arguments.size(); ++a)
        line << (a ? ", " : " ") << "argument " << a << " "
             << shapeString(arguments[a].sizes);
      line << "\n";
    } // Printed here, before the job stops.
    job.agreeOrStop(false, readWhat);
  }
}

StepRecord StepLoop::call(int64_t stepNumber) {
  ddprt_context *context = job.context;
  // Packed calling convention: a pointer to each descriptor word, then
  // one to the storage of the returned descriptors.
  std::vector<int64_t> words = descriptorWords(arguments);
  std::vector<void *> packedArgs;
  for (int64_t &word : words)
    packedArgs.push_back(&word);
  if (!signature.results.empty())
    packedArgs.push_back(resultStorage.data());

  // PowerSGD's step counter says, before the step, whether it is warm-up
  // and when compression starts (the insertion pass put start-iter on it).
  int64_t compressionStarts = -1;
  if (counterState) {
    ddprt_buffer counter = ddprt_state_buffer(counterState);
    int64_t done = *static_cast<const int64_t *>(counter.data);
    compressionStarts = stepNumber + (counterStateInfo->startIter - done);
  }
  ddprt_counters before = DDPRT_COUNTERS_INITIALIZER,
                 after = DDPRT_COUNTERS_INITIALIZER;
  ddprt_get_counters(context, &before);
  auto start = std::chrono::steady_clock::now();
  job.beginStep(stepNumber);
  step(packedArgs.data());
  // The device's work of the step (a step without runtime calls has none
  // that a compiled ddprt_check waited for).
  ddprt_check(context, ddprt_synchronize(context), "the end of the step");
  job.endStep();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ddprt_get_counters(context, &after);
  seconds = job.maxOverRanks(seconds);
  StepRecord record = recordStep(stepNumber, seconds, before, after);
  record.compressionStarts = compressionStarts;
  return record;
}

bool StepLoop::logs(unsigned i, bool last) {
  auto now = std::chrono::steady_clock::now();
  bool logThis = options.logEvery
                     ? (i % options.logEvery == 0 || last)
                     : (i == 0 || last ||
                        std::chrono::duration<double>(now - lastLine).count() >=
                            kLogSeconds);
  if (logThis)
    lastLine = now;
  return logThis;
}

void StepLoop::writeResults(const std::vector<Buffer> &results,
                            int64_t stepNumber, bool last) {
  bool writeOk = true;
  // One pattern: an .npz of the results it writes, or a .npy each.
  auto write = [&](const std::string &pattern, const std::vector<bool> &which) {
    std::string error;
    if (RunOptions::isArchive(pattern)) {
      std::vector<npy::Array> arrays;
      std::vector<std::pair<std::string, const npy::Array *>> named;
      arrays.reserve(results.size());
      for (size_t r = 0; r < results.size(); ++r)
        if (which[r]) {
          arrays.push_back(toArray(results[r]));
          named.emplace_back(resultName(signature, r), &arrays.back());
        }
      if (!npy::writeArchive(job.expand(pattern, stepNumber), named, error)) {
        job.error() << "step " << stepNumber << ": " << error << "\n";
        writeOk = false;
      }
      return;
    }
    for (size_t r = 0; r < results.size(); ++r)
      if (which[r] &&
          !writeOutput(job.expand(pattern, stepNumber, int64_t(r),
                                  resultName(signature, r)),
                       results[r], error)) {
        job.error() << "step " << stepNumber << ": " << error << "\n";
        writeOk = false;
      }
  };
  if (!options.output.empty())
    write(options.output, writeResult);
  if (last && !options.finalOutput.empty())
    write(options.finalOutput, std::vector<bool>(results.size(), true));
  job.agreeOrStop(writeOk,
                  "to write the results of step " + std::to_string(stepNumber));
}

void StepLoop::carryOver(std::vector<Buffer> &results, bool last) {
  std::vector<Buffer> next(arguments.size());
  std::vector<void *> kept, freed;
  auto contains = [](const std::vector<void *> &list, void *pointer) {
    return std::find(list.begin(), list.end(), pointer) != list.end();
  };
  for (size_t a = 0; a < arguments.size(); ++a)
    if (!last && carriedFrom[a] >= 0) {
      next[a] = results[size_t(carriedFrom[a])];
      kept.push_back(next[a].allocated);
    }
  auto release = [&](Buffer &buffer) {
    if (buffer.allocated && !contains(kept, buffer.allocated) &&
        !contains(freed, buffer.allocated)) {
      freed.push_back(buffer.allocated);
      releaseBuffer(buffer.allocated);
    }
    buffer.allocated = buffer.aligned = nullptr;
  };
  for (Buffer &buffer : arguments)
    release(buffer);
  for (Buffer &buffer : results)
    release(buffer);
  arguments = std::move(next);
}

void StepLoop::releaseArguments() {
  for (Buffer &buffer : arguments)
    buffer.release();
}

} // namespace

int runSteps(Job &job, const StepSignature &signature, PackedFunction step,
             const RunOptions &options) {
  StateHandles states = createStates(job, signature);
  loadCheckpoint(job, states, options);
  setStates(job, signature, states, options);

  StepLoop loop(job, signature, step, options, states);
  for (unsigned i = 0; i < options.steps; ++i)
    loop.run(i);
  loop.releaseArguments();

  // After the last step: state out, checkpoint, figures.
  bool finishOk = dumpStates(job, signature, states, options);
  finishOk &= saveCheckpoint(job, options);
  ddprt_counters total = DDPRT_COUNTERS_INITIALIZER;
  ddprt_get_counters(job.context, &total);
  printSummary(job, signature, options, loop.totals(), total);
  finishOk &= writeSummaryJson(job, signature, options, loop.totals(), total);
  job.agreeOrStop(finishOk, "to write its results");
  job.finish();
  return 0;
}

} // namespace stephost
