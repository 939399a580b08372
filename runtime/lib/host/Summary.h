//===- Summary.h - what the steps did, printed and as JSON ------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The figures of a run of steps: each step's progress line, the summary
// rank 0 prints after the last step, and the summary JSON (--summary-json)
// with the per-step series.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_SUMMARY_H
#define DDPRT_HOST_SUMMARY_H

#include "Job.h"
#include "RunOptions.h"
#include "StepSignature.h"

#include "ddprt/ddprt.h"

#include <cstdint>
#include <vector>

namespace stephost {

/// What one step did, for the progress line and the summary's series.
struct StepRecord {
  int64_t step = 0;
  /// The slowest rank's time.
  double seconds = 0.0;
  /// What this rank sent, in all and by role.
  uint64_t elements = 0, bytes = 0;
  uint64_t elementsByRole[DDPRT_ROLE_COUNT] = {};
  /// A warm-up step (a plain mean before a scheme's start iteration); else
  /// one where a scheme sent compressed collectives (PowerSGD's factors,
  /// top-k, quantization, a hook's), or neither (plain, or fp16/bf16 only).
  bool warmup = false, compressed = false;
  /// Elements before compression, as the counters count them.
  uint64_t uncompressed = 0;
  /// Where the step is warm-up: the step at which compression starts (-1 if
  /// unknown).
  int64_t compressionStarts = -1;

  /// "warmup", "compressed" or "none".
  const char *phase() const {
    return warmup ? "warmup" : compressed ? "compressed" : "none";
  }
};

/// What the steps did, summed over the run.
struct RunTotals {
  std::vector<double> stepSeconds;
  uint64_t lastStepElements = 0, lastStepBytes = 0, totalElements = 0;
  unsigned warmupSteps = 0, compressedSteps = 0;
  /// Every step, kept only for --summary-json (a long run must not pay for
  /// it).
  std::vector<StepRecord> series;
  bool keepSeries = false;

  /// Counts a step in.
  void add(const StepRecord &record);
};

/// The step's figures from the runtime's counters before and after it;
/// `seconds` is the slowest rank's time.
StepRecord recordStep(int64_t step, double seconds,
                      const ddprt_counters &before,
                      const ddprt_counters &after);

/// "step 3: warm-up, compression starts at step 5; 1.234 ms, sent ...".
void printProgress(const StepRecord &record);

/// What rank 0 prints after the last step.
void printSummary(const Job &job, const StepSignature &signature,
                  const RunOptions &options, const RunTotals &totals,
                  const ddprt_counters &counters);

/// --summary-json (rank 0's, or every rank's with {rank}); says why and
/// returns false if it cannot be written.
bool writeSummaryJson(const Job &job, const StepSignature &signature,
                      const RunOptions &options, const RunTotals &totals,
                      const ddprt_counters &counters);

} // namespace stephost

#endif // DDPRT_HOST_SUMMARY_H
