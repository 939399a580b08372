//===- Summary.cpp - what the steps did, printed and as JSON --------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The summary JSON is written with nlohmann-json, one step of the series
// per line (jsonText), as the tests and people read it.
//
//===----------------------------------------------------------------------===//

#include "Summary.h"

#include "Format.h"
#include "JsonText.h"
#include "Npy.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace stephost {

namespace {

uint64_t sum(const uint64_t (&values)[DDPRT_ROLE_COUNT]) {
  uint64_t total = 0;
  for (uint64_t v : values)
    total += v;
  return total;
}

/// {"gradient": N, "uncompressed": N, ...}: one value per role.
OrderedJson roles(const uint64_t (&values)[DDPRT_ROLE_COUNT]) {
  static const char *const names[] = {
#define DDPRT_ROLE_NAME(NAME, value, name) #name,
      DDPRT_FOR_EACH_ROLE(DDPRT_ROLE_NAME)
#undef DDPRT_ROLE_NAME
  };
  OrderedJson json = OrderedJson::object();
  for (int r = 0; r < DDPRT_ROLE_COUNT; ++r)
    json[names[r]] = values[r];
  return json;
}

struct StepTimes {
  double median = 0.0, mean = 0.0;
};

StepTimes stepTimes(const std::vector<double> &stepSeconds) {
  StepTimes times;
  std::vector<double> sorted = stepSeconds;
  std::sort(sorted.begin(), sorted.end());
  times.median = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
  for (double s : stepSeconds)
    times.mean += s;
  times.mean = stepSeconds.empty() ? 0.0 : times.mean / stepSeconds.size();
  return times;
}

} // namespace

StepRecord recordStep(int64_t step, double seconds,
                      const ddprt_counters &before,
                      const ddprt_counters &after) {
  auto delta = [&](const uint64_t(&a)[DDPRT_ROLE_COUNT],
                   const uint64_t(&b)[DDPRT_ROLE_COUNT],
                   int role) { return a[role] - b[role]; };
  StepRecord record;
  record.step = step;
  record.seconds = seconds;
  record.elements = sum(after.elements_sent) - sum(before.elements_sent);
  record.bytes = sum(after.bytes_sent) - sum(before.bytes_sent);
  record.uncompressed =
      after.elements_before_compression - before.elements_before_compression;
  record.warmup =
      delta(after.collectives, before.collectives, DDPRT_ROLE_WARMUP) > 0;
  record.compressed =
      delta(after.collectives, before.collectives, DDPRT_ROLE_COMPRESSED) > 0;
  for (int r = 0; r < DDPRT_ROLE_COUNT; ++r)
    record.elementsByRole[r] =
        delta(after.elements_sent, before.elements_sent, r);
  return record;
}

void RunTotals::add(const StepRecord &record) {
  stepSeconds.push_back(record.seconds);
  lastStepElements = record.elements;
  lastStepBytes = record.bytes;
  totalElements += record.elements;
  warmupSteps += record.warmup;
  compressedSteps += record.compressed && !record.warmup;
  if (keepSeries)
    series.push_back(record);
}

void printProgress(const StepRecord &record) {
  std::string line = "step " + std::to_string(record.step) + ": ";
  if (record.warmup) {
    line += "warm-up";
    if (record.compressionStarts > record.step)
      line += ", compression starts at step " +
              std::to_string(record.compressionStarts);
    line += "; ";
  }
  line += fixed(record.seconds * 1e3, 3) + " ms, sent " +
          withThousands(record.elements) + " elements (" +
          withThousands(record.bytes) + " bytes)";
  if (record.elements && record.uncompressed &&
      record.uncompressed != record.elements)
    line += ", " + fixed(double(record.uncompressed) / record.elements, 2) +
            "x fewer than uncompressed";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

/// The size of the step's float arguments' elements, when they share one
/// (4: f32 gradients); 0 otherwise. What one element before compression
/// weighs, for a bytes ratio beside the elements ratio.
static size_t gradientElementBytes(const StepSignature &signature) {
  size_t size = 0;
  for (const TensorSpec &argument : signature.arguments) {
    const std::string &dtype = argument.dtype;
    if (dtype != "<f2" && dtype != "<f4" && dtype != "<f8")
      continue;
    size_t bytes = elementBytes(dtype);
    if (size && size != bytes)
      return 0;
    size = bytes;
  }
  return size;
}

/// Uncompressed bytes over bytes sent (the elements before compression in
/// the gradients' type), or 0 if the gradients' type is not one.
static double bytesRatio(const StepSignature &signature,
                         const ddprt_counters &total) {
  size_t elementSize = gradientElementBytes(signature);
  uint64_t sent = 0;
  for (uint64_t bytes : total.bytes_sent)
    sent += bytes;
  if (!elementSize || !sent)
    return 0.0;
  return double(total.elements_before_compression) * elementSize / sent;
}

void printSummary(const Job &job, const StepSignature &signature,
                  const RunOptions &options, const RunTotals &totals,
                  const ddprt_counters &total) {
  if (job.rank != 0)
    return;
  double ratio = total.elements_after_compression
                     ? double(total.elements_before_compression) /
                           total.elements_after_compression
                     : 1.0;
  // fp16, quantization and a hook send as many elements in fewer bytes.
  double bytes = bytesRatio(signature, total);
  std::string bytesText =
      bytes > 0 ? " and " + fixed(bytes, 2) + "x fewer bytes" : std::string();
  std::string link = job.simulatedLinkGbps > 0
                         ? " (simulated link " + job.simulatedLinkText() + ")"
                         : "";
  std::printf(
      "%s: %u steps of @%s on %d rank%s (%s)%s: %s ms per step "
      "(median), last step sent %s elements (%s bytes) per rank; over the "
      "run %sx fewer elements%s than uncompressed\n",
      job.tool.c_str(), options.steps, signature.entry.c_str(), job.worldSize,
      job.worldSize == 1 ? "" : "s", job.backendName.c_str(), link.c_str(),
      fixed(stepTimes(totals.stepSeconds).median * 1e3, 3).c_str(),
      withThousands(totals.lastStepElements).c_str(),
      withThousands(totals.lastStepBytes).c_str(), fixed(ratio, 2).c_str(),
      bytesText.c_str());
  if (totals.warmupSteps)
    std::printf("%s: %u of %u steps sent compressed collectives, %u warm-up "
                "(a plain mean before the start iteration)\n",
                job.tool.c_str(), totals.compressedSteps, options.steps,
                totals.warmupSteps);
  else if (totals.compressedSteps)
    std::printf("%s: %u of %u steps sent compressed collectives\n",
                job.tool.c_str(), totals.compressedSteps, options.steps);
  if (total.nonfinite_skips)
    std::printf("%s: %llu times values were not finite (NaN or Inf) on rank "
                "0 (a PowerSGD tensor's averaged factors: its error feedback "
                "skipped the step; a bucket's average; a state, reset to "
                "zeros), each said above\n",
                job.tool.c_str(), (unsigned long long)total.nonfinite_skips);
  std::fflush(stdout);
}

bool writeSummaryJson(const Job &job, const StepSignature &signature,
                      const RunOptions &options, const RunTotals &totals,
                      const ddprt_counters &total) {
  if (options.summaryJson.empty() ||
      (job.rank != 0 &&
       options.summaryJson.find("{rank}") == std::string::npos))
    return true;
  std::string path = job.expand(options.summaryJson, -1), error;
  StepTimes times = stepTimes(totals.stepSeconds);
  // Mean milliseconds per step inside the runtime's calls, by phase.
  double perStep = options.steps ? 1e3 / options.steps : 0.0;
  OrderedJson json = {{"rank", job.rank},
                      {"world_size", job.worldSize},
                      {"backend", job.backendName},
                      {"steps", options.steps}};
  // Every figure obtained over a simulated link says so.
  json["simulated_link"] = nullptr;
  if (job.simulatedLinkGbps > 0)
    json["simulated_link"] = {{"gbps", job.simulatedLinkGbps},
                              {"latency_us", job.simulatedLinkLatencyUs}};
  OrderedJson &arguments = json["arguments"] = OrderedJson::array();
  for (size_t a = 0; a < signature.arguments.size(); ++a)
    arguments.push_back(argumentName(signature, a));
  json["ms_per_step"] = roundTo(times.median * 1e3, 6);
  json["ms_per_step_mean"] = roundTo(times.mean * 1e3, 6);
  json["elements_sent_per_step"] = totals.lastStepElements;
  json["bytes_sent_per_step"] = totals.lastStepBytes;
  json["elements_sent_total"] = totals.totalElements;
  json["elements_before_compression"] = total.elements_before_compression;
  json["elements_after_compression"] = total.elements_after_compression;
  json["bytes_ratio"] = roundTo(bytesRatio(signature, total), 6);
  json["collectives"] = roles(total.collectives);
  json["elements_sent"] = roles(total.elements_sent);
  json["bytes_sent"] = roles(total.bytes_sent);
  json["nonfinite_skips"] = total.nonfinite_skips;
  json["warmup_steps"] = totals.warmupSteps;
  json["compressed_steps"] = totals.compressedSteps;
  auto perStepMs = [&](ddprt_phase phase) {
    return roundTo(total.seconds[phase] * perStep, 6);
  };
  json["ms_in_runtime_per_step"] = {
      {"communication", perStepMs(DDPRT_PHASE_COMMUNICATION)},
      {"compression", perStepMs(DDPRT_PHASE_COMPRESSION)},
      {"decompression", perStepMs(DDPRT_PHASE_DECOMPRESSION)},
      {"cast", perStepMs(DDPRT_PHASE_CAST)}};
  // One object per step: its number, time (the slowest rank's), what
  // this rank sent (in all and by role) and its phase.
  OrderedJson &series = json["series"] = OrderedJson::array();
  for (const StepRecord &record : totals.series)
    series.push_back({{"step", record.step},
                      {"ms", roundTo(record.seconds * 1e3, 6)},
                      {"elements_sent", record.elements},
                      {"bytes_sent", record.bytes},
                      {"phase", record.phase()},
                      {"elements_by_role", roles(record.elementsByRole)}});
  // If the directory cannot be made, opening the file says why.
  (void)npy::createDirectories(npy::parentPath(path), error);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (file)
    file << jsonText(json);
  file.close();
  if (!file) {
    job.error() << "cannot write '" << path << "': " << std::strerror(errno)
                << "\n";
    return false;
  }
  return true;
}

} // namespace stephost
