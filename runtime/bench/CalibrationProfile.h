//===- CalibrationProfile.h - ddprt-calibrate's profile ---------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What ddprt-calibrate measured, as data: the collectives' fits and points,
// the kernels' times, and the verdict on whether they are fit for planning;
// written as the JSON profile ddp-plan reads and printed for people.
// Nothing here measures (Calibrate.cpp does) or needs MPI or a context.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_BENCH_CALIBRATIONPROFILE_H
#define DDPRT_BENCH_CALIBRATIONPROFILE_H

#include "LineFit.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace ddprt::bench {

/// A kernel's matrix shape: n x m at rank r.
struct Shape {
  int64_t n, m, r;
};

/// What the ring sends per byte of payload among `world` ranks: allreduce
/// 2 (W - 1) / W; allgather of B bytes from each rank, W - 1.
double ringFactor(bool allgather, int world);

/// One collective: its fit and the points it was fitted to (bytes,
/// seconds).
struct CollectiveResult {
  std::string name;
  double factor = 0.0;
  Fit fit;
  std::vector<std::pair<double, double>> points;
  double linkGbps() const { return factor * 8.0 / (fit.slope * 1e9); }
};

/// One kernel measurement.
struct KernelResult {
  std::string name;
  Shape shape{};     // n = 0: an elementwise kernel over `elements`
  int64_t count = 1; // matrices of `shape` per call
  int64_t elements = 0;
  double seconds = 0.0;
};

/// `bytes` as people read it: "4 MiB", "16 KiB", "8 bytes".
std::string bytesText(double bytes);

/// Whether a profile is fit for planning (LineFit.h's rule), and what to
/// do if not.
struct Verdict {
  bool usable = true;
  double worstError = 0.0; // the largest relative error of any fit
  std::string collective;  // where it is: "allreduce_f16"
  double bytes = 0.0;      // and at what size
  std::string text;        // what it means and what to do, for people

  std::string where() const {
    return collective.empty() ? "" : collective + " at " + bytesText(bytes);
  }
};

/// Everything ddprt-calibrate writes to a profile.
struct Profile {
  std::string mode, backend;
  int world = 0;
  double linkGbps = 0.0, linkLatencyUs = 0.0; // the simulated link; 0: off
  int64_t workingSet = 0; // bytes each timed kernel call works on
  std::vector<CollectiveResult> collectives;
  std::vector<KernelResult> kernels;
  Verdict verdict;
};

/// The verdict on `profile` (LineFit.h's rule for the fits).
Verdict judge(const Profile &profile);

/// Writes `profile` as the JSON ddp-plan reads (docs/runtime.md, "A machine
/// profile").
void writeProfile(std::FILE *file, const Profile &profile);

/// Sorts kernel results by name so that writeProfile groups them.
void groupKernels(std::vector<KernelResult> &kernels);

/// The profile as a table on stdout.
void printSummary(const Profile &profile);

} // namespace ddprt::bench

#endif // DDPRT_BENCH_CALIBRATIONPROFILE_H
