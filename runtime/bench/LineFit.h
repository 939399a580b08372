//===- LineFit.h - time = latency + slope * bytes, fitted -------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// ddprt-calibrate's model of a collective: time = latency + slope * bytes,
// fitted by least squares on the relative error (each point weighted by
// 1 / time^2): sizes span seven orders of magnitude, and an unweighted fit
// would give the latency, which only the small sizes show, no say.
//
// Measured times are noisy (another job on the machine, a VM's neighbours),
// and over a range where the latency dominates the unconstrained fit can be
// unphysical: a slope <= 0 (a bandwidth that is infinite or negative) or a
// latency < 0. A profile must not carry either (ddp-plan refuses it), so
// then the latency is the fastest time measured (a message too small to take
// longer than the latency) and the slope is fitted through it to the other
// points, still weighted; `constrained` says so.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_BENCH_LINEFIT_H
#define DDPRT_BENCH_LINEFIT_H

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace ddprt::bench {

struct Fit {
  double latency = 0.0, slope = 0.0, worstResidual = 0.0;
  /// The size at which the fit is furthest from the measured time.
  double worstX = 0.0;
  /// The unconstrained fit was unphysical (see above).
  bool constrained = false;
};

/// Fits `points` ({bytes, seconds}, at least two sizes, every time > 0).
inline Fit fitLine(const std::vector<std::pair<double, double>> &points) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  double fastest = points.empty() ? 0.0 : points.front().second;
  for (auto [x, y] : points) {
    double w = 1.0 / (y * y);
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
    fastest = std::min(fastest, y);
  }
  Fit fit;
  double det = sw * sxx - sx * sx;
  fit.slope = (sw * sxy - sx * sy) / det;
  fit.latency = (sy - fit.slope * sx) / sw;
  if (!(fit.slope > 0.0 && fit.latency >= 0.0)) {
    // Through (0, fastest), minimising the relative errors of the other
    // points (the fastest one fixed the latency; its own relative error
    // would forbid any slope).
    fit.constrained = true;
    fit.latency = fastest;
    double num = 0, den = 0;
    for (auto [x, y] : points) {
      if (y == fastest)
        continue;
      double w = 1.0 / (y * y);
      num += w * x * (y - fastest);
      den += w * x * x;
    }
    fit.slope = den > 0.0 ? num / den : 0.0;
    // Every time equal to the fastest: no size dependence at all. The
    // largest message's whole time as transfer is the slowest link that
    // fits the data.
    if (!(fit.slope > 0.0)) {
      auto largest = std::max_element(
          points.begin(), points.end(),
          [](const auto &a, const auto &b) { return a.first < b.first; });
      fit.slope = largest->second / largest->first;
    }
  }
  for (auto [x, y] : points) {
    double residual = std::fabs(fit.latency + fit.slope * x - y) / y;
    if (residual > fit.worstResidual) {
      fit.worstResidual = residual;
      fit.worstX = x;
    }
  }
  return fit;
}

/// The largest relative error a fit may have for planning. Off by e, a fit
/// can swap two choices whose times differ by less than (1 + e) / (1 - e);
/// ddp-plan's choices differ by 2x (fp16 halves the bytes) or more.
constexpr double kPlanningError = 1.0 / 3.0;

/// The ratio between two times below which a fit off by `error` may order
/// them wrong (infinite from an error of 1 on).
inline double ambiguousRatio(double error) {
  return error < 1.0 ? (1.0 + error) / (1.0 - error) : HUGE_VAL;
}

/// Whether `fit` describes its points well enough for planning.
inline bool usableForPlanning(const Fit &fit) {
  return !fit.constrained && fit.worstResidual <= kPlanningError;
}

} // namespace ddprt::bench

#endif // DDPRT_BENCH_LINEFIT_H
