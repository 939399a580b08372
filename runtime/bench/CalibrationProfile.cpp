//===- CalibrationProfile.cpp - ddprt-calibrate's machine profile ---------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "CalibrationProfile.h"

#include "JsonText.h"

#include <algorithm>
#include <cmath>
#include <ctime>

namespace ddprt::bench {

double ringFactor(bool allgather, int world) {
  return allgather ? double(world - 1) : 2.0 * (world - 1) / world;
}

namespace {
std::string utcNow() {
  std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}
} // namespace

std::string bytesText(double bytes) {
  char text[32];
  if (bytes >= 1 << 20)
    std::snprintf(text, sizeof text, "%g MiB", bytes / (1 << 20));
  else if (bytes >= 1 << 10)
    std::snprintf(text, sizeof text, "%g KiB", bytes / (1 << 10));
  else
    std::snprintf(text, sizeof text, "%g bytes", bytes);
  return text;
}

Verdict judge(const Profile &profile) {
  Verdict verdict;
  if (profile.mode == "hand") {
    verdict.text = "written by hand: as good as the link figures given. It "
                   "has no kernel times; give ddp-plan those of the target "
                   "machine too (kernels=, from ddprt-calibrate "
                   "--kernels-only there).";
    return verdict;
  }
  if (profile.collectives.empty()) {
    verdict.text = "kernel times only (--kernels-only): usable as ddp-plan's "
                   "kernels= beside a profile of the link.";
    return verdict;
  }
  bool constrained = false;
  for (const CollectiveResult &c : profile.collectives) {
    constrained |= c.fit.constrained;
    verdict.usable &= usableForPlanning(c.fit);
    if (c.fit.worstResidual > verdict.worstError) {
      verdict.worstError = c.fit.worstResidual;
      verdict.collective = c.name;
      verdict.bytes = c.fit.worstX;
    }
  }
  char text[640];
  double ratio = ambiguousRatio(verdict.worstError);
  if (verdict.usable) {
    std::string worst =
        verdict.collective.empty() ? "" : " (worst: " + verdict.where() + ")";
    std::snprintf(text, sizeof text,
                  "usable for planning: every fit is within %.0f%% of the "
                  "measured times%s, so ddp-plan orders choices whose "
                  "exchanges differ by more than %.2fx correctly (fp16 "
                  "halves the bytes, PowerSGD saves more).",
                  100.0 * verdict.worstError, worst.c_str(), ratio);
    verdict.text = text;
    return verdict;
  }
  std::string margin =
      std::isfinite(ratio)
          ? "differ by less than " + std::to_string(int(std::ceil(ratio))) + "x"
          : "are close or far apart";
  std::snprintf(
      text, sizeof text,
      "not reliable for planning: %s's fit is off by %.0f%% at %s%s, so "
      "ddp-plan may order choices wrong when their times %s. The times do "
      "not follow latency + bytes / bandwidth (shared-memory MPI switches "
      "protocols with the message size; a busy machine adds noise). What to "
      "do: calibrate on the machines and network the job will use, when they "
      "are idle (more repetitions: --reps=15), or write the link's figures by "
      "hand (--hand).",
      verdict.collective.c_str(), 100.0 * verdict.worstError,
      bytesText(verdict.bytes).c_str(),
      constrained ? ", and a fit had to be constrained" : "", margin.c_str());
  verdict.text = text;
  return verdict;
}

void writeProfile(std::FILE *file, const Profile &profile) {
  using stephost::OrderedJson;
  using stephost::significant;
  OrderedJson json = {{"version", 1}, {"mode", profile.mode}};
  json["backend"] = nullptr;
  if (!profile.backend.empty())
    json["backend"] = profile.backend;
  json["world_size"] = profile.world;
  json["simulated_link"] = nullptr;
  if (profile.linkGbps > 0)
    json["simulated_link"] = {
        {"gbps", significant(profile.linkGbps, 9)},
        {"latency_us", significant(profile.linkLatencyUs, 9)}};
  json["kernel_working_set_bytes"] = profile.workingSet;
  json["date"] = utcNow();
  OrderedJson &collectives = json["collectives"] = OrderedJson::object();
  for (const CollectiveResult &c : profile.collectives) {
    OrderedJson points = OrderedJson::array();
    for (const auto &[bytes, seconds] : c.points)
      points.push_back({int64_t(bytes), significant(seconds, 9)});
    collectives[c.name] = {
        {"latency_us", significant(c.fit.latency * 1e6, 9)},
        {"gbps", significant(c.linkGbps(), 9)},
        {"ring_factor", significant(c.factor, 9)},
        {"max_relative_residual", significant(c.fit.worstResidual, 4)},
        {"constrained_fit", c.fit.constrained},
        {"points", std::move(points)}};
  }
  // One line per measurement, grouped by kernel (groupKernels).
  OrderedJson &kernels = json["kernels"] = OrderedJson::object();
  for (const KernelResult &k : profile.kernels) {
    OrderedJson entry = OrderedJson::object();
    if (k.shape.n) {
      entry["n"] = k.shape.n;
      entry["m"] = k.shape.m;
      entry["r"] = k.shape.r;
      entry["count"] = k.count;
    }
    entry["elements"] = k.elements;
    entry["seconds"] = significant(k.seconds, 6);
    entry["elements_per_second"] = significant(k.elements / k.seconds, 6);
    OrderedJson &list = kernels[k.name];
    if (list.is_null())
      list = OrderedJson::array();
    list.push_back(std::move(entry));
  }
  const Verdict &v = profile.verdict;
  json["verdict"] = {{"usable", v.usable},
                     {"worst_relative_error", significant(v.worstError, 4)},
                     {"where", v.where()},
                     {"text", v.text}};
  std::fputs(stephost::jsonText(json, /*objectDepth=*/2).c_str(), file);
}

void groupKernels(std::vector<KernelResult> &kernels) {
  std::stable_sort(kernels.begin(), kernels.end(),
                   [](const KernelResult &a, const KernelResult &b) {
                     return a.name < b.name;
                   });
}

void printSummary(const Profile &profile) {
  std::printf("ddprt-calibrate: %s backend, %d ranks, %s\n",
              profile.backend.empty() ? "no" : profile.backend.c_str(),
              profile.world, profile.mode.c_str());
  if (profile.linkGbps > 0)
    std::printf("simulated link %g Gb/s, %g us: the collectives below measure "
                "it, not the machine's network\n",
                profile.linkGbps, profile.linkLatencyUs);
  for (const CollectiveResult &c : profile.collectives) {
    std::printf("  %-14s latency %9.2f us  link %9.3f Gb/s  (ring factor %.3g",
                c.name.c_str(), c.fit.latency * 1e6, c.linkGbps(), c.factor);
    if (!c.points.empty())
      std::printf(", fit's worst residual %.1f%%", 100.0 * c.fit.worstResidual);
    if (c.fit.constrained)
      std::printf("; noisy: times did not fit latency + bytes / bandwidth, "
                  "latency is the fastest call");
    std::printf(")\n");
  }
  if (!profile.kernels.empty())
    std::printf("kernels: each call on a %lld MiB working set (as many "
                "matrices as fit, in one call)\n",
                (long long)(profile.workingSet >> 20));
  for (const KernelResult &k : profile.kernels) {
    std::string shape = k.shape.n ? std::to_string(k.count) + " x " +
                                        std::to_string(k.shape.n) + "x" +
                                        std::to_string(k.shape.m) + "x" +
                                        std::to_string(k.shape.r)
                                  : std::to_string(k.elements);
    std::printf("  %-14s %-20s %10.3f us  %8.3g elements/s\n", k.name.c_str(),
                shape.c_str(), k.seconds * 1e6, k.elements / k.seconds);
  }
}

} // namespace ddprt::bench
