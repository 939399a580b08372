//===- SimulatedLink.h - a modelled network link for measuring --*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A test mode of the CPU backend, off by default, for showing on one machine
// what a network would do: loopback MPI between ranks of one machine is
// memory copies, far faster than any network. With a link of bandwidth
// `gbps` (10^9 bits per second) and latency `latencyUs` (microseconds), each
// collective is held, after it completed, until
//     latency + bytes / bandwidth
// has passed since it began (the real time it took counts: when it took
// longer than that, it is not held at all). `bytes` is what this rank sends
// in it:
//  - an allreduce of B bytes on W ranks: 2 (W - 1) / W * B, what the ring
//    (reduce-scatter then allgather) sends; small buffers, which go through
//    MPI's own allreduce, are modelled the same way (at W = 2, the case the
//    benchmarks measure, MPI's recursive doubling also sends B);
//  - an allgather to which each rank contributes B bytes (all its tensors
//    together; W B gathered): (W - 1) B, what the ring sends, each rank's
//    block passed on by W - 1 ranks (nccl-tests' bus bandwidth counts the
//    same: (W - 1) / W of the gathered bytes);
//  - a broadcast of B bytes: B;
//  - the shape check before each bucket (ddprt_options.check_shapes) is an
//    allreduce of 64 bytes, and pays the latency like any collective.
// A bucket reduces each large buffer, and the small ones of each dtype
// together, in one collective each: each pays the latency. The holding is
// done by whoever runs the collective: for a started allreduce the
// communication thread (Communicator.h), so that its link time overlaps the
// caller's compute as a real network's would; for a blocking one the
// caller. A job of one rank sends nothing and is never held.
//
// It is set by ddprt_options.simulated_link_gbps/_latency_us, overridden by
// the environment variable DDPRT_SIMULATED_LINK=<gbps>,<latency_us> (for
// example 10,20), and by ddp-run's --simulated-link=<gbps>,<latency_us>; the
// CUDA backend refuses it (NCCL's collectives run on the device).
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_SIMULATEDLINK_H
#define DDPRT_SIMULATEDLINK_H

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace ddprt {

struct SimulatedLink {
  /// 0: no simulated link.
  double gbps = 0.0;
  double latencyUs = 0.0;

  bool on() const { return gbps > 0.0; }
  /// latency + bytes / bandwidth, in seconds.
  double seconds(double bytes) const {
    return latencyUs * 1e-6 + bytes * 8.0 / (gbps * 1e9);
  }
  /// The same as a duration, saturated at a year (checkSimulatedLink's
  /// ranges keep any real collective far below it).
  std::chrono::nanoseconds duration(double bytes) const {
    double nanoseconds = std::ceil(seconds(bytes) * 1e9);
    constexpr double kYear = 365.0 * 24 * 3600 * 1e9;
    return std::chrono::nanoseconds(
        int64_t(nanoseconds < kYear ? nanoseconds : kYear));
  }
};

/// The environment variable that sets the simulated link.
inline constexpr const char *kSimulatedLinkVariable = "DDPRT_SIMULATED_LINK";

/// The ranges a link may have: from 1 Mb/s to 1 Pb/s, and a latency of at
/// most 1000 s (past them a "link" is a typo, and its times overflow).
inline constexpr double kMinLinkGbps = 1e-3, kMaxLinkGbps = 1e6;
inline constexpr double kMaxLinkLatencyUs = 1e9;

/// Checks a link's bandwidth and latency (gbps 0: off, then latency must be
/// 0 too); on failure says why in `error`.
inline bool checkSimulatedLink(double gbps, double latencyUs,
                               std::string &error) {
  if (!std::isfinite(gbps) || gbps < 0.0 ||
      (gbps != 0.0 && (gbps < kMinLinkGbps || gbps > kMaxLinkGbps))) {
    error = "the bandwidth must be a number of Gb/s from 0.001 to 1e6 (or 0: "
            "off)";
    return false;
  }
  if (!std::isfinite(latencyUs) || latencyUs < 0.0 ||
      latencyUs > kMaxLinkLatencyUs) {
    error = "the latency must be a number of microseconds from 0 to 1e9";
    return false;
  }
  if (gbps == 0.0 && latencyUs != 0.0) {
    error = "a latency was given for a link with no bandwidth (0 Gb/s "
            "turns the link off)";
    return false;
  }
  return true;
}

/// Parses "<gbps>,<latency_us>" (for example "10,20"): a bandwidth > 0 in
/// Gb/s and a latency >= 0 in microseconds. On failure says why in
/// `error`.
inline bool parseSimulatedLink(const std::string &text, SimulatedLink &link,
                               std::string &error) {
  size_t comma = text.find(',');
  auto number = [](const std::string &part, double &value) {
    if (part.empty() || std::isspace(static_cast<unsigned char>(part[0])))
      return false;
    char *end = nullptr;
    value = std::strtod(part.c_str(), &end);
    return end == part.c_str() + part.size();
  };
  double gbps = 0.0, latencyUs = 0.0;
  if (comma == std::string::npos || !number(text.substr(0, comma), gbps) ||
      !number(text.substr(comma + 1), latencyUs)) {
    error = "'" + text +
            "' is not <gbps>,<latency_us> (for example 10,20: 10 Gb/s, 20 "
            "microseconds)";
    return false;
  }
  if (!std::isfinite(gbps) || gbps <= 0.0) {
    error = "'" + text + "': the bandwidth must be a number of Gb/s from "
                         "0.001 to 1e6";
    return false;
  }
  if (!checkSimulatedLink(gbps, latencyUs, error)) {
    error = "'" + text + "': " + error;
    return false;
  }
  link.gbps = gbps;
  link.latencyUs = latencyUs;
  return true;
}

} // namespace ddprt

#endif // DDPRT_SIMULATEDLINK_H
