//===- LineFitTest.cpp - ddprt-calibrate's latency/bandwidth fit ----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The fit recovers a line from exact points, and from noisy ones whose
// unconstrained fit is unphysical (a slope <= 0 or a latency < 0, which
// ddp-plan refuses in a profile: a loaded machine made the training demo's
// calibration fail that way) it gives a latency >= 0 and a slope > 0.
//
//===----------------------------------------------------------------------===//

#include "../bench/LineFit.h"

#include <gtest/gtest.h>

using ddprt::bench::fitLine;

namespace {

TEST(LineFitTest, RecoversAnExactLine) {
  // 20 us + bytes at 1 GB/s, over sizes 4 KiB .. 64 MiB.
  std::vector<std::pair<double, double>> points;
  for (double bytes = 4096; bytes <= 64.0 * 1024 * 1024; bytes *= 4)
    points.push_back({bytes, 20e-6 + bytes / 1e9});
  auto fit = fitLine(points);
  EXPECT_FALSE(fit.constrained);
  EXPECT_NEAR(fit.latency, 20e-6, 1e-12);
  EXPECT_NEAR(fit.slope, 1e-9, 1e-18);
  EXPECT_LT(fit.worstResidual, 1e-9);
}

TEST(LineFitTest, TimesThatFallWithSizeGiveAPositiveSlope) {
  // Latency-bound and noisy: the largest message was measured fastest.
  std::vector<std::pair<double, double>> points = {
      {256, 30e-6}, {1024, 26e-6}, {4096, 24e-6}, {16384, 22e-6}};
  auto fit = fitLine(points);
  EXPECT_TRUE(fit.constrained);
  EXPECT_DOUBLE_EQ(fit.latency, 22e-6);
  EXPECT_GT(fit.slope, 0.0);
  EXPECT_TRUE(std::isfinite(fit.slope));
}

TEST(LineFitTest, ANegativeLatencyIsRefitted) {
  // Steep growth from a tiny first time: the unconstrained intercept is
  // below zero.
  std::vector<std::pair<double, double>> points = {
      {1024, 1e-6}, {4096, 40e-6}, {16384, 160e-6}, {65536, 640e-6}};
  auto unconstrainedSlope = (640e-6 - 1e-6) / (65536 - 1024);
  auto fit = fitLine(points);
  EXPECT_TRUE(fit.constrained);
  EXPECT_GE(fit.latency, 0.0);
  EXPECT_DOUBLE_EQ(fit.latency, 1e-6);
  EXPECT_GT(fit.slope, 0.5 * unconstrainedSlope);
  EXPECT_LT(fit.slope, 2.0 * unconstrainedSlope);
}

TEST(LineFitTest, EqualTimesUseTheLargestMessage) {
  std::vector<std::pair<double, double>> points = {
      {1000, 5e-6}, {2000, 5e-6}, {4000, 5e-6}};
  auto fit = fitLine(points);
  EXPECT_TRUE(fit.constrained);
  EXPECT_DOUBLE_EQ(fit.latency, 5e-6);
  EXPECT_DOUBLE_EQ(fit.slope, 5e-6 / 4000);
}

// The verdict ddprt-calibrate gives: a fit within a third of every point
// orders ddp-plan's choices (2x apart or more) right; one further off, or a
// constrained one, is not fit for planning, and the size it is off at is
// the one named.
TEST(LineFitTest, PlanningVerdict) {
  std::vector<std::pair<double, double>> exact, close, far;
  for (double bytes = 4096; bytes <= 16.0 * 1024 * 1024; bytes *= 4) {
    double time = 20e-6 + bytes / 1e9;
    exact.push_back({bytes, time});
    close.push_back({bytes, time * (bytes == 65536 ? 1.2 : 1.0)});
    far.push_back({bytes, time * (bytes == 65536 ? 3.0 : 1.0)});
  }
  EXPECT_TRUE(ddprt::bench::usableForPlanning(fitLine(exact)));
  auto nearFit = fitLine(close);
  EXPECT_TRUE(ddprt::bench::usableForPlanning(nearFit));
  auto farFit = fitLine(far);
  EXPECT_FALSE(ddprt::bench::usableForPlanning(farFit));
  EXPECT_GT(farFit.worstResidual, ddprt::bench::kPlanningError);
  EXPECT_EQ(farFit.worstX, 65536);
  // Off by e, two times closer than (1 + e) / (1 - e) may swap.
  EXPECT_DOUBLE_EQ(ddprt::bench::ambiguousRatio(1.0 / 3.0), 2.0);
  EXPECT_TRUE(std::isinf(ddprt::bench::ambiguousRatio(1.5)));
  // A constrained fit is never usable, however small its residuals.
  ddprt::bench::Fit constrained;
  constrained.constrained = true;
  EXPECT_FALSE(ddprt::bench::usableForPlanning(constrained));
}

} // namespace
