//===- KernelTest.cpp - the CPU kernels against a float64 reference -------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The f16/bf16 conversions against a slow reference written from the IEEE
// definition, and every CPU kernel against float64 arithmetic on the same
// (already rounded) inputs, with error bounds derived from the precision the
// kernel computes and stores in. Outputs are poisoned with NaN first, so an
// element a kernel forgets to write fails the comparison.
//
//===----------------------------------------------------------------------===//

#include "HostArithmetic.h"
#include "Numeric.h"
#include "TestSupport.h"
#include "cpu/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <tuple>
#include <vector>

using namespace ddprt;
using namespace ddprt::test;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

bool isHalfNaN(uint16_t bits) {
  return (bits & 0x7c00) == 0x7c00 && (bits & 0x03ff) != 0;
}
bool isBFloat16NaN(uint16_t bits) {
  return (bits & 0x7f80) == 0x7f80 && (bits & 0x007f) != 0;
}

/// Counts the elements where `actual` and `expected` differ by more than
/// `bound` (both NaN counts as equal) and describes the first few.
void expectWithin(const std::vector<double> &actual,
                  const std::vector<double> &expected,
                  const std::vector<double> &bound, const std::string &what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int failures = 0;
  std::ostringstream first;
  for (size_t i = 0; i < actual.size(); ++i) {
    bool bothNaN = std::isnan(actual[i]) && std::isnan(expected[i]);
    bool equal = actual[i] == expected[i]; // also equal infinities
    if (bothNaN || equal || std::fabs(actual[i] - expected[i]) <= bound[i])
      continue;
    if (failures++ < 5)
      first << "\n  [" << i << "] got " << actual[i] << ", expected "
            << expected[i] << " +- " << bound[i];
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << actual.size()
                         << " elements off" << first.str();
}

/// The relative Frobenius error of `actual` against `expected`.
double relativeError(const std::vector<double> &actual,
                     const std::vector<double> &expected) {
  double difference = 0.0, norm = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    difference += (actual[i] - expected[i]) * (actual[i] - expected[i]);
    norm += expected[i] * expected[i];
  }
  return std::sqrt(difference) / std::max(std::sqrt(norm), 1e-300);
}

/// The normwise tolerance for a result of `k`-term sums in `dtype`.
double normwiseTolerance(ddprt_dtype dtype, int64_t k) {
  switch (dtype) {
  case DDPRT_F64:
    return 1e-12;
  case DDPRT_F32:
    return 1e-5 * std::sqrt(double(k));
  case DDPRT_F16:
    return 2e-3;
  case DDPRT_BF16:
    return 1.6e-2;
  case DDPRT_I8:
  case DDPRT_I32:
  case DDPRT_I64: // no kernel takes it
    break;
  }
  return 0.0;
}

/// The error bound of one dot product of `k` terms whose absolute values sum
/// to `absSum`, accumulated in the compute type and stored once: the
/// standard gamma_k bound, doubled for slack.
double dotBound(ddprt_dtype dtype, int64_t k, double absSum, double result) {
  return 2.0 * (double(k + 2) * computeRoundoff(dtype) * absSum +
                unitRoundoff(dtype) * std::fabs(result)) +
         smallestSubnormal(dtype);
}

struct Shape {
  int64_t n, m, r;
};

std::vector<Shape> kernelShapes() {
  std::vector<Shape> shapes = {{1, 1, 1},   {1, 9, 3},   {9, 1, 2},
                               {19, 37, 4}, {64, 48, 8}, {5, 3, 8}};
  for (int64_t r = 1; r <= 8; ++r)
    shapes.push_back({37, 19, r});
  return shapes;
}

std::string describe(ddprt_dtype dtype, const Shape &shape, bool residual) {
  std::ostringstream out;
  out << dtypeName(dtype) << " n=" << shape.n << " m=" << shape.m
      << " r=" << shape.r << (residual ? " with residual" : "");
  return out.str();
}

/// M = G + E as the kernels see it (E absent: M = G).
std::vector<double> effectiveMatrix(const TypedArray &g, const TypedArray *e) {
  std::vector<double> m = g.values();
  if (e)
    for (int64_t i = 0; i < g.size(); ++i)
      m[size_t(i)] += e->get(i);
  return m;
}

//===----------------------------------------------------------------------===//
// f16 and bf16 conversions
//===----------------------------------------------------------------------===//

TEST(Conversion, HalfToFloatMatchesReferenceForEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    float value = halfBitsToFloat(uint16_t(bits));
    double expected = referenceHalfValue(uint16_t(bits));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(value)) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(double(value), expected) << std::hex << bits;
    ASSERT_EQ(std::signbit(value), std::signbit(expected)) << std::hex << bits;
  }
}

TEST(Conversion, BFloat16ToFloatMatchesReferenceForEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    float value = bfloat16BitsToFloat(uint16_t(bits));
    double expected = referenceBFloat16Value(uint16_t(bits));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(value)) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(double(value), expected) << std::hex << bits;
    ASSERT_EQ(std::signbit(value), std::signbit(expected)) << std::hex << bits;
  }
}

TEST(Conversion, RoundTripOfEveryNonNaNPatternIsExact) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    uint16_t pattern = uint16_t(bits);
    if (isHalfNaN(pattern))
      EXPECT_TRUE(isHalfNaN(floatToHalfBits(halfBitsToFloat(pattern))))
          << std::hex << bits;
    else
      ASSERT_EQ(floatToHalfBits(halfBitsToFloat(pattern)), pattern)
          << std::hex << bits;
    if (isBFloat16NaN(pattern))
      EXPECT_TRUE(
          isBFloat16NaN(floatToBFloat16Bits(bfloat16BitsToFloat(pattern))))
          << std::hex << bits;
    else
      ASSERT_EQ(floatToBFloat16Bits(bfloat16BitsToFloat(pattern)), pattern)
          << std::hex << bits;
  }
}

TEST(Conversion, KnownValues) {
  auto half = [](double x) { return floatToHalfBits(float(x)); };
  EXPECT_EQ(half(1.0), 0x3c00);
  EXPECT_EQ(half(-2.0), 0xc000);
  EXPECT_EQ(half(0.0), 0x0000);
  EXPECT_EQ(half(-0.0), 0x8000);
  EXPECT_EQ(half(65504.0), 0x7bff);  // the largest finite
  EXPECT_EQ(half(65519.99), 0x7bff); // below the midpoint to 2^16
  EXPECT_EQ(half(65520.0), 0x7c00);  // the tie rounds to even: inf
  EXPECT_EQ(half(1e6), 0x7c00);      // overflow
  EXPECT_EQ(half(-1e6), 0xfc00);
  EXPECT_EQ(half(kInf), 0x7c00);
  EXPECT_EQ(half(1.0 + std::ldexp(1, -11)), 0x3c00);     // tie: to even
  EXPECT_EQ(half(1.0 + 3 * std::ldexp(1, -11)), 0x3c02); // tie: to even
  EXPECT_EQ(half(1.0 + std::ldexp(1, -11) + std::ldexp(1, -20)), 0x3c01);
  EXPECT_EQ(half(std::ldexp(1, -14)), 0x0400);    // smallest normal
  EXPECT_EQ(half(std::ldexp(1, -24)), 0x0001);    // smallest subnormal
  EXPECT_EQ(half(std::ldexp(1, -25)), 0x0000);    // tie: to even zero
  EXPECT_EQ(half(std::ldexp(3, -26)), 0x0001);    // 0.75 ulp
  EXPECT_EQ(half(std::ldexp(3, -25)), 0x0002);    // 1.5 ulp: tie to even
  EXPECT_EQ(half(std::ldexp(5, -25)), 0x0002);    // 2.5 ulp: tie to even
  EXPECT_EQ(half(std::ldexp(1023, -24)), 0x03ff); // largest subnormal
  EXPECT_EQ(half(std::ldexp(2047, -25)), 0x0400); // rounds up to normal
  EXPECT_EQ(half(-std::ldexp(1, -30)), 0x8000);   // underflow keeps sign
  EXPECT_TRUE(isHalfNaN(half(kNaN)));
  EXPECT_TRUE(isHalfNaN(half(-kNaN)));

  auto bf16 = [](double x) { return floatToBFloat16Bits(float(x)); };
  EXPECT_EQ(bf16(1.0), 0x3f80);
  EXPECT_EQ(bf16(-0.0), 0x8000);
  EXPECT_EQ(bf16(1.0 + std::ldexp(1, -8)), 0x3f80);     // tie: to even
  EXPECT_EQ(bf16(1.0 + 3 * std::ldexp(1, -8)), 0x3f82); // tie: to even
  EXPECT_EQ(bf16(double(std::numeric_limits<float>::max())), 0x7f80);
  EXPECT_EQ(bf16(kInf), 0x7f80);
  EXPECT_EQ(bf16(-kInf), 0xff80);
  EXPECT_EQ(bf16(std::ldexp(1, -133)), 0x0001); // smallest subnormal
  EXPECT_TRUE(isBFloat16NaN(bf16(kNaN)));
  // A signaling NaN whose payload lies only in the low 16 bits must not
  // become infinity.
  EXPECT_TRUE(isBFloat16NaN(floatToBFloat16Bits(floatOf(0x7f800001u))));
  EXPECT_TRUE(isBFloat16NaN(floatToBFloat16Bits(floatOf(0xff800001u))));
}

/// Checks floatToHalfBits and floatToBFloat16Bits on `x` against the
/// reference; returns false (once reported) on a mismatch.
bool conversionMatchesReference(float x) {
  uint16_t half = floatToHalfBits(x), bf16 = floatToBFloat16Bits(x);
  if (std::isnan(x)) {
    EXPECT_TRUE(isHalfNaN(half)) << std::hex << bitsOf(x);
    EXPECT_TRUE(isBFloat16NaN(bf16)) << std::hex << bitsOf(x);
    return isHalfNaN(half) && isBFloat16NaN(bf16);
  }
  uint16_t expectedHalf = referenceHalfBits(double(x));
  uint16_t expectedBFloat16 = referenceBFloat16Bits(double(x));
  EXPECT_EQ(half, expectedHalf)
      << "f16 of " << x << " (0x" << std::hex << bitsOf(x) << ")";
  EXPECT_EQ(bf16, expectedBFloat16)
      << "bf16 of " << x << " (0x" << std::hex << bitsOf(x) << ")";
  return half == expectedHalf && bf16 == expectedBFloat16;
}

TEST(Conversion, FloatToNarrowRoundsToNearestEven) {
  // Around every representable value and every midpoint between two
  // neighbours (the ties), in both formats, with both signs.
  std::vector<float> inputs;
  auto around = [&](float x) {
    inputs.push_back(x);
    inputs.push_back(std::nextafter(x, kInf));
    inputs.push_back(std::nextafter(x, -kInf));
  };
  for (uint32_t bits = 0; bits < 0x7c00; ++bits) {
    double low = referenceHalfValue(uint16_t(bits));
    double high = referenceHalfValue(uint16_t(bits + 1)); // 0x7c00: inf
    if (std::isinf(high))
      high = 65536.0; // the midpoint to "2^16" is the overflow threshold
    around(float(low));
    around(float((low + high) / 2)); // exact in f32: 12 significant bits
  }
  for (uint32_t bits = 0; bits < 0x7f80; ++bits) {
    double low = referenceBFloat16Value(uint16_t(bits));
    double high = bits + 1 == 0x7f80
                      ? std::ldexp(1.0, 128)
                      : referenceBFloat16Value(uint16_t(bits + 1));
    around(float(low));
    double midpoint = (low + high) / 2;
    if (midpoint < double(std::numeric_limits<float>::max()))
      around(float(midpoint));
  }
  // Every 4099th f32 pattern and random ones, including NaNs and infinities.
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099)
    inputs.push_back(floatOf(uint32_t(bits)));
  std::mt19937 rng(1234);
  for (int i = 0; i < 200000; ++i)
    inputs.push_back(floatOf(uint32_t(rng())));
  inputs.push_back(float(kInf));
  inputs.push_back(float(kNaN));

  int failures = 0;
  for (float x : inputs) {
    if (!conversionMatchesReference(x) && ++failures >= 10)
      FAIL() << "stopping after 10 mismatches";
    if (!conversionMatchesReference(-x) && ++failures >= 10)
      FAIL() << "stopping after 10 mismatches";
  }
}

//===----------------------------------------------------------------------===//
// project, backproject, reconstruct
//===----------------------------------------------------------------------===//

TEST(Kernels, ProjectMatchesReference) {
  std::mt19937 rng(1);
  for (ddprt_dtype dtype : kAllDtypes)
    for (const Shape &s : kernelShapes())
      for (bool withResidual : {false, true}) {
        std::string what = describe(dtype, s, withResidual);
        TypedArray g(dtype, s.n * s.m), e(dtype, s.n * s.m),
            q(dtype, s.m * s.r), p(dtype, s.n * s.r);
        g.randomize(rng);
        e.randomize(rng, 0.5);
        q.randomize(rng);
        p.poison();
        TypedArray gBefore = g, eBefore = e, qBefore = q;
        ddprt_matrix em = e.matrix(s.n, s.m);
        cpu::project(g.matrix(s.n, s.m), withResidual ? &em : nullptr,
                     q.matrix(s.m, s.r), p.matrix(s.n, s.r));

        std::vector<double> m = effectiveMatrix(g, withResidual ? &e : nullptr);
        std::vector<double> expected(size_t(s.n * s.r)), bound(expected.size());
        for (int64_t i = 0; i < s.n; ++i)
          for (int64_t k = 0; k < s.r; ++k) {
            double sum = 0.0, absSum = 0.0;
            for (int64_t j = 0; j < s.m; ++j) {
              double term = m[size_t(i * s.m + j)] * q.get(j * s.r + k);
              sum += term;
              absSum += std::fabs(term);
            }
            expected[size_t(i * s.r + k)] = sum;
            bound[size_t(i * s.r + k)] = dotBound(dtype, s.m, absSum, sum);
          }
        expectWithin(p.values(), expected, bound, what);
        EXPECT_LE(relativeError(p.values(), expected),
                  normwiseTolerance(dtype, s.m))
            << what;
        EXPECT_TRUE(g.bitwiseEqual(gBefore) && e.bitwiseEqual(eBefore) &&
                    q.bitwiseEqual(qBefore))
            << what << ": an input changed";
      }
}

TEST(Kernels, BackprojectMatchesReference) {
  std::mt19937 rng(2);
  for (ddprt_dtype dtype : kAllDtypes)
    for (const Shape &s : kernelShapes())
      for (bool withResidual : {false, true}) {
        std::string what = describe(dtype, s, withResidual);
        TypedArray g(dtype, s.n * s.m), e(dtype, s.n * s.m),
            p(dtype, s.n * s.r), q(dtype, s.m * s.r);
        g.randomize(rng);
        e.randomize(rng, 0.5);
        p.randomize(rng);
        q.poison();
        TypedArray gBefore = g, eBefore = e, pBefore = p;
        ddprt_matrix em = e.matrix(s.n, s.m);
        cpu::backproject(g.matrix(s.n, s.m), withResidual ? &em : nullptr,
                         p.matrix(s.n, s.r), q.matrix(s.m, s.r));

        std::vector<double> m = effectiveMatrix(g, withResidual ? &e : nullptr);
        std::vector<double> expected(size_t(s.m * s.r)), bound(expected.size());
        for (int64_t j = 0; j < s.m; ++j)
          for (int64_t k = 0; k < s.r; ++k) {
            double sum = 0.0, absSum = 0.0;
            for (int64_t i = 0; i < s.n; ++i) {
              double term = m[size_t(i * s.m + j)] * p.get(i * s.r + k);
              sum += term;
              absSum += std::fabs(term);
            }
            expected[size_t(j * s.r + k)] = sum;
            bound[size_t(j * s.r + k)] = dotBound(dtype, s.n, absSum, sum);
          }
        expectWithin(q.values(), expected, bound, what);
        EXPECT_LE(relativeError(q.values(), expected),
                  normwiseTolerance(dtype, s.n))
            << what;
        EXPECT_TRUE(g.bitwiseEqual(gBefore) && e.bitwiseEqual(eBefore) &&
                    p.bitwiseEqual(pBefore))
            << what << ": an input changed";
      }
}

enum class ReconstructMode { Plain, WithResidual, InPlaceWithResidual };

TEST(Kernels, ReconstructMatchesReference) {
  std::mt19937 rng(3);
  for (ddprt_dtype dtype : kAllDtypes)
    for (const Shape &s : kernelShapes())
      for (ReconstructMode mode :
           {ReconstructMode::Plain, ReconstructMode::WithResidual,
            ReconstructMode::InPlaceWithResidual}) {
        bool withResidual = mode != ReconstructMode::Plain;
        bool inPlace = mode == ReconstructMode::InPlaceWithResidual;
        std::string what = describe(dtype, s, withResidual) +
                           (inPlace ? " (output aliases G)" : "");
        TypedArray p(dtype, s.n * s.r), q(dtype, s.m * s.r),
            g(dtype, s.n * s.m), e(dtype, s.n * s.m), out(dtype, s.n * s.m);
        p.randomize(rng);
        q.randomize(rng);
        g.randomize(rng);
        e.randomize(rng, 0.5);
        out.poison();
        const std::vector<double> gValues = g.values(), eValues = e.values();
        TypedArray pBefore = p, qBefore = q;

        ddprt_matrix gm = g.matrix(s.n, s.m), em = e.matrix(s.n, s.m);
        ddprt_matrix outm = inPlace ? gm : out.matrix(s.n, s.m);
        cpu::reconstruct(p.matrix(s.n, s.r), q.matrix(s.m, s.r),
                         withResidual ? &gm : nullptr,
                         withResidual ? &em : nullptr, outm);

        size_t size = size_t(s.n * s.m);
        std::vector<double> expectedOut(size), outBound(size),
            expectedResidual(size), residualBound(size);
        for (int64_t i = 0; i < s.n; ++i)
          for (int64_t j = 0; j < s.m; ++j) {
            double sum = 0.0, absSum = 0.0;
            for (int64_t k = 0; k < s.r; ++k) {
              double term = p.get(i * s.r + k) * q.get(j * s.r + k);
              sum += term;
              absSum += std::fabs(term);
            }
            size_t index = size_t(i * s.m + j);
            expectedOut[index] = sum;
            outBound[index] = dotBound(dtype, s.r, absSum, sum);
            double residual = gValues[index] + eValues[index] - sum;
            expectedResidual[index] = residual;
            residualBound[index] = dotBound(dtype, s.r + 1,
                                            absSum + std::fabs(gValues[index]) +
                                                std::fabs(eValues[index]),
                                            residual);
          }
        TypedArray &result = inPlace ? g : out;
        expectWithin(result.values(), expectedOut, outBound, what + ": M_hat");
        EXPECT_LE(relativeError(result.values(), expectedOut),
                  normwiseTolerance(dtype, s.r))
            << what;
        if (withResidual) {
          expectWithin(e.values(), expectedResidual, residualBound,
                       what + ": residual");
        } else {
          EXPECT_EQ(e.values(), eValues) << what << ": E changed";
        }
        if (!inPlace) {
          EXPECT_EQ(g.values(), gValues) << what << ": G changed";
        }
        EXPECT_TRUE(p.bitwiseEqual(pBefore) && q.bitwiseEqual(qBefore))
            << what << ": P or Q changed";
      }
}

TEST(Kernels, ReconstructInPlaceWithoutResidual) {
  std::mt19937 rng(4);
  for (ddprt_dtype dtype : kAllDtypes) {
    const int64_t n = 7, m = 5, r = 2;
    TypedArray p(dtype, n * r), q(dtype, m * r), g(dtype, n * m),
        separate(dtype, n * m);
    p.randomize(rng);
    q.randomize(rng);
    g.randomize(rng);
    separate.poison();
    cpu::reconstruct(p.matrix(n, r), q.matrix(m, r), nullptr, nullptr,
                     separate.matrix(n, m));
    cpu::reconstruct(p.matrix(n, r), q.matrix(m, r), nullptr, nullptr,
                     g.matrix(n, m));
    EXPECT_TRUE(g.bitwiseEqual(separate)) << dtypeName(dtype);
  }
}

//===----------------------------------------------------------------------===//
// scale and cast
//===----------------------------------------------------------------------===//

/// Random values plus the edge cases of rounding to the narrow types: ties,
/// overflow thresholds, subnormals.
std::vector<double> castInputs(std::mt19937 &rng) {
  std::vector<double> values = {0.0,
                                -0.0,
                                1.0,
                                -3.5,
                                1.0 + std::ldexp(1, -11),
                                1.0 + 3 * std::ldexp(1, -11),
                                -(1.0 + std::ldexp(1, -8)),
                                1.0 + 3 * std::ldexp(1, -8),
                                65504.0,
                                65520.0,
                                70000.0,
                                std::ldexp(1, -24),
                                std::ldexp(3, -24),
                                std::ldexp(1, -25),
                                std::ldexp(3, -26),
                                1e-30,
                                -1e-40,
                                3e38,
                                1e300};
  std::normal_distribution<double> normal(0.0, 10.0);
  for (int i = 0; i < 500; ++i)
    values.push_back(normal(rng));
  return values;
}

TEST(Kernels, ScaleByPowersOfTwoRoundsOnce) {
  std::mt19937 rng(5);
  std::vector<double> inputs = castInputs(rng);
  for (ddprt_dtype dtype : kAllDtypes)
    for (double factor : {1.0, 0.25, 4.0}) {
      TypedArray buffer(dtype, int64_t(inputs.size()));
      buffer.assign(inputs);
      std::vector<double> before = buffer.values(), expected(before.size());
      for (size_t i = 0; i < before.size(); ++i)
        expected[i] = roundTo(dtype, before[i] * factor); // product exact
      scaleHost(factor, buffer.buffer());
      std::vector<double> zero(before.size(), 0.0);
      expectWithin(buffer.values(), expected, zero,
                   std::string(dtypeName(dtype)) + " * " +
                       std::to_string(factor));
    }
}

TEST(Kernels, ScaleByAThird) {
  std::mt19937 rng(6);
  for (ddprt_dtype dtype : kAllDtypes) {
    TypedArray buffer(dtype, 1000);
    buffer.randomize(rng);
    std::vector<double> before = buffer.values(), expected(before.size()),
                        bound(before.size());
    for (size_t i = 0; i < before.size(); ++i) {
      expected[i] = before[i] / 3.0;
      bound[i] = (unitRoundoff(dtype) + 3 * computeRoundoff(dtype)) *
                     std::fabs(expected[i]) +
                 smallestSubnormal(dtype);
    }
    scaleHost(1.0 / 3.0, buffer.buffer());
    expectWithin(buffer.values(), expected, bound, dtypeName(dtype));
  }
}

/// 19 values (more than one 8-wide vector, plus a tail) with infinities and
/// NaN among finite ones.
std::vector<double> nonFiniteInputs() {
  std::vector<double> values(19);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = double(i) - 9.0;
  values[1] = kInf;
  values[6] = -kInf;
  values[7] = kNaN;
  values[17] = kNaN;
  values[18] = kInf;
  return values;
}

TEST(Kernels, ScaleKeepsInfinityAndNaN) {
  std::vector<double> inputs = nonFiniteInputs(), expected(inputs.size()),
                      zero(inputs.size(), 0.0);
  for (size_t i = 0; i < inputs.size(); ++i)
    expected[i] = inputs[i] * 0.25;
  for (ddprt_dtype dtype : kAllDtypes) {
    TypedArray buffer(dtype, int64_t(inputs.size()));
    buffer.assign(inputs);
    scaleHost(0.25, buffer.buffer());
    expectWithin(buffer.values(), expected, zero, dtypeName(dtype));
  }
}

TEST(Kernels, AccumulateRoundsEachSumOnce) {
  std::mt19937 rng(17);
  // Pairs whose sums are ties or overflow in the narrow types, then random.
  std::vector<double>
      a = {1.0, 1.0, 65504.0, 65504.0, -1.0, std::ldexp(1, -24), 3.0, 0.5},
      b = {std::ldexp(1, -11),  std::ldexp(1, -8),  16.0, 8.0,
           -std::ldexp(3, -11), std::ldexp(1, -25), -3.0, std::ldexp(3, -9)};
  std::normal_distribution<double> normal(0.0, 4.0);
  while (a.size() < 1003) {
    a.push_back(normal(rng));
    b.push_back(normal(rng));
  }
  for (ddprt_dtype dtype : kAllDtypes) {
    TypedArray data(dtype, int64_t(a.size())), addend(dtype, int64_t(b.size()));
    data.assign(a);
    addend.assign(b);
    std::vector<double> expected(a.size()), zero(a.size(), 0.0);
    for (size_t i = 0; i < a.size(); ++i) // the exact sum, rounded once
      expected[i] =
          roundTo(dtype, data.get(int64_t(i)) + addend.get(int64_t(i)));
    TypedArray addendBefore = addend;
    accumulateHost(data.buffer(), addend.data());
    expectWithin(data.values(), expected, zero, dtypeName(dtype));
    EXPECT_TRUE(addend.bitwiseEqual(addendBefore)) << dtypeName(dtype);
  }
}

TEST(Kernels, CastAllDtypePairs) {
  std::mt19937 rng(7);
  std::vector<double> inputs = castInputs(rng);
  for (ddprt_dtype from : kAllDtypes)
    for (ddprt_dtype to : kAllDtypes)
      for (double factor : {1.0, 0.25, 4.0}) {
        std::string what = std::string(dtypeName(from)) + " -> " +
                           dtypeName(to) + " * " + std::to_string(factor);
        TypedArray input(from, int64_t(inputs.size())),
            output(to, int64_t(inputs.size()));
        input.assign(inputs);
        output.poison();
        TypedArray inputBefore = input;
        cpu::cast(factor, input.buffer(), output.buffer());

        // The product is exact in double, so the correct result is one
        // rounding of it, for every pair (f64 -> f16/bf16 included).
        std::vector<double> expected(inputs.size()), bound(inputs.size(), 0.0);
        for (size_t i = 0; i < inputs.size(); ++i)
          expected[i] = roundTo(to, input.get(int64_t(i)) * factor);
        expectWithin(output.values(), expected, bound, what);
        EXPECT_TRUE(input.bitwiseEqual(inputBefore)) << what;
      }
}

TEST(Kernels, CastKeepsInfinityAndNaN) {
  std::vector<double> inputs = nonFiniteInputs(), expected(inputs.size()),
                      zero(inputs.size(), 0.0);
  for (size_t i = 0; i < inputs.size(); ++i)
    expected[i] = inputs[i] * 0.25;
  for (ddprt_dtype from : kAllDtypes)
    for (ddprt_dtype to : kAllDtypes) {
      TypedArray input(from, int64_t(inputs.size())),
          output(to, int64_t(inputs.size()));
      input.assign(inputs);
      output.fill(7.0);
      cpu::cast(0.25, input.buffer(), output.buffer());
      expectWithin(output.values(), expected, zero,
                   std::string(dtypeName(from)) + " -> " + dtypeName(to));
    }
}

// f32 -> bf16 runs 8 at a time where the CPU has AVX2: bit for bit the
// portable conversion (round to nearest even on the bits, a quiet NaN),
// on a sweep of every 4099th bit pattern and the edges: ties either way,
// subnormals, the largest finite values (which round to infinity), NaNs
// with payloads. An odd count leaves a tail to the portable loop too.
TEST(Kernels, CastToBFloat16IsThePortableConversionBitForBit) {
  std::vector<uint32_t> patterns = {
      0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u,
      0x3f808000u, 0x3f818000u, 0x3f808001u, 0xbf818000u, 0x7f7fffffu,
      0xff7f8000u, 0x7f800000u, 0xff800000u, 0x7f800001u, 0xffc00001u,
      0x7fbfffffu, 0x3f800000u, 0x4049ffffu};
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 4099)
    patterns.push_back(uint32_t(bits));
  if (patterns.size() % 8 == 0)
    patterns.push_back(0x3f80c000u);
  std::vector<float> input(patterns.size());
  for (size_t i = 0; i < patterns.size(); ++i)
    input[i] = floatOf(patterns[i]);
  for (double factor : {1.0, 0.25, 3.0}) {
    std::vector<uint16_t> output(input.size(), 0x1234);
    ddprt_buffer from{input.data(), DDPRT_F32, int64_t(input.size())};
    ddprt_buffer to{output.data(), DDPRT_BF16, int64_t(output.size())};
    cpu::cast(factor, from, to);
    size_t differing = 0;
    for (size_t i = 0; i < input.size(); ++i) {
      uint16_t expected = floatToBFloat16Bits(input[i] * float(factor));
      if (output[i] != expected && ++differing <= 5)
        ADD_FAILURE() << std::hex << "f32 0x" << patterns[i] << " * " << factor
                      << ": bf16 0x" << output[i] << ", expected 0x"
                      << expected;
    }
    EXPECT_EQ(differing, 0u) << "factor " << factor;
  }
}

// The header promises "converted to the wider type, multiplied there,
// converted to the output type (round to nearest even)": from f64 that is
// one rounding from f64 to f16/bf16. The kernel goes f64 -> f32 -> narrow,
// and the first rounding can create a tie the second breaks the wrong way.
TEST(Kernels, CastF64ToNarrowRoundsOnce) {
  // Just above the f16 midpoint between 1 and 1 + 2^-10, by less than half
  // an f32 ulp: f32 rounds it onto the midpoint, which then rounds to even.
  double aboveHalfTie = 1.0 + std::ldexp(1, -11) + std::ldexp(1, -40);
  double aboveBFloat16Tie = 1.0 + std::ldexp(1, -8) + std::ldexp(1, -40);
  for (double factor : {1.0, 0.25, 4.0}) {
    TypedArray input(DDPRT_F64, 2), half(DDPRT_F16, 2), bf16(DDPRT_BF16, 2);
    input.assign({aboveHalfTie, -aboveBFloat16Tie});
    cpu::cast(factor, input.buffer(), half.buffer());
    cpu::cast(factor, input.buffer(), bf16.buffer());
    EXPECT_EQ(half.get(0), roundTo(DDPRT_F16, aboveHalfTie * factor))
        << "f64 -> f16 * " << factor;
    EXPECT_EQ(bf16.get(1), roundTo(DDPRT_BF16, -aboveBFloat16Tie * factor))
        << "f64 -> bf16 * " << factor;
  }
}

//===----------------------------------------------------------------------===//
// orthogonalize
//===----------------------------------------------------------------------===//

/// Column k of an n x r row-major matrix.
std::vector<double> column(const std::vector<double> &a, int64_t n, int64_t r,
                           int64_t k) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out[size_t(i)] = a[size_t(i * r + k)];
  return out;
}

double dot(const std::vector<double> &x, const std::vector<double> &y) {
  double sum = 0.0;
  for (size_t i = 0; i < x.size(); ++i)
    sum += x[i] * y[i];
  return sum;
}

double norm(const std::vector<double> &x) { return std::sqrt(dot(x, x)); }

/// How far from orthonormal the output of orthogonalize may be: its f64
/// result rounded once to the storage type.
double orthonormalTolerance(ddprt_dtype dtype) {
  switch (dtype) {
  case DDPRT_F64:
    return 1e-12;
  case DDPRT_F32:
    return 1e-6;
  case DDPRT_F16:
    return 4e-3;
  case DDPRT_BF16:
    return 3e-2;
  case DDPRT_I8:
  case DDPRT_I32:
  case DDPRT_I64: // no kernel takes it
    break;
  }
  return 0.0;
}

/// Expects columns `columns` of `q` (n x r) to be orthonormal.
void expectOrthonormal(const std::vector<double> &q, int64_t n, int64_t r,
                       const std::vector<int64_t> &columns, ddprt_dtype dtype,
                       const std::string &what, double slack = 0.0) {
  for (int64_t a : columns)
    for (int64_t b : columns) {
      double product = dot(column(q, n, r, a), column(q, n, r, b));
      EXPECT_NEAR(product, a == b ? 1.0 : 0.0,
                  orthonormalTolerance(dtype) + slack)
          << what << ": column " << a << " . column " << b;
    }
}

TEST(Orthogonalize, ColumnsBecomeOrthonormalAndKeepTheirSpan) {
  std::mt19937 rng(8);
  const Shape shapes[] = {{37, 8, 0}, {19, 1, 0}, {64, 5, 0},
                          {8, 8, 0},  {2, 2, 0},  {1, 1, 0}};
  for (ddprt_dtype dtype : kAllDtypes)
    for (const Shape &s : shapes) {
      int64_t n = s.n, r = s.m; // here: n x r
      std::string what = std::string(dtypeName(dtype)) + " " +
                         std::to_string(n) + "x" + std::to_string(r);
      TypedArray p(dtype, n * r);
      p.randomize(rng, 3.0);
      std::vector<double> input = p.values();
      cpu::orthogonalize(p.matrix(n, r), 0.0);
      std::vector<double> q = p.values();

      std::vector<int64_t> all;
      for (int64_t k = 0; k < r; ++k)
        all.push_back(k);
      expectOrthonormal(q, n, r, all, dtype, what);
      // Gram-Schmidt: input column j lies in the span of output columns
      // 0..j, with a positive component along column j.
      for (int64_t j = 0; j < r; ++j) {
        std::vector<double> a = column(input, n, r, j), rest = a;
        for (int64_t k = 0; k <= j; ++k) {
          std::vector<double> qk = column(q, n, r, k);
          double coefficient = dot(qk, a);
          if (k == j) {
            EXPECT_GT(coefficient, 0.0) << what << ": column " << j;
          }
          for (int64_t i = 0; i < n; ++i)
            rest[size_t(i)] -= coefficient * qk[size_t(i)];
        }
        EXPECT_LE(norm(rest), 10 * orthonormalTolerance(dtype) * norm(a))
            << what << ": column " << j << " left the span";
      }
    }
}

TEST(Orthogonalize, ZeroColumnStaysZero) {
  std::mt19937 rng(9);
  for (ddprt_dtype dtype : kAllDtypes)
    for (double epsilon : {0.0, 1e-8}) {
      const int64_t n = 10, r = 3;
      TypedArray p(dtype, n * r);
      p.randomize(rng);
      for (int64_t i = 0; i < n; ++i)
        p.set(i * r + 1, 0.0);
      cpu::orthogonalize(p.matrix(n, r), epsilon);
      std::vector<double> q = p.values();
      std::string what =
          std::string(dtypeName(dtype)) + " epsilon=" + std::to_string(epsilon);
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(q[size_t(i * r + 1)], 0.0) << what << " row " << i;
      // epsilon leaves columns of norm |v| / (|v| + epsilon).
      expectOrthonormal(q, n, r, {0, 2}, dtype, what, 4 * epsilon);
    }
}

TEST(Orthogonalize, ColumnDependentOnEarlierOnesBecomesZero) {
  // Column 1 is 3 x column 0 and column 0 has norm 1 exactly: the projection
  // leaves exact zeros, which must come out as zeros, not as NaN.
  for (ddprt_dtype dtype : kAllDtypes) {
    const int64_t n = 4, r = 3;
    TypedArray p(dtype, n * r);
    p.assign({0.5, 1.5, 1.0, 0.5, 1.5, -1.0, 0.5, 1.5, 2.0, 0.5, 1.5, 0.0});
    cpu::orthogonalize(p.matrix(n, r), 0.0);
    std::vector<double> q = p.values();
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(q[size_t(i * r)], 0.5) << dtypeName(dtype);
      EXPECT_EQ(q[size_t(i * r + 1)], 0.0) << dtypeName(dtype);
    }
    expectOrthonormal(q, n, r, {0, 2}, dtype, dtypeName(dtype));
  }
}

TEST(Orthogonalize, EpsilonFollowsPyTorchGramSchmidt) {
  // As PyTorch's hook: each column becomes v / (|v| + epsilon) and later
  // columns lose their projection on that (not quite unit) column. A
  // duplicate of column 0 therefore keeps a * (1 - s^2), s = |a|/(|a|+eps),
  // a residual of norm ~2 epsilon, which then becomes r / (|r| + epsilon).
  std::mt19937 rng(10);
  const int64_t n = 12, r = 2;
  const double epsilon = 1e-6;
  TypedArray p(DDPRT_F64, n * r);
  p.randomize(rng);
  for (int64_t i = 0; i < n; ++i)
    p.set(i * r + 1, p.get(i * r));
  std::vector<double> a = column(p.values(), n, r, 0);
  cpu::orthogonalize(p.matrix(n, r), epsilon);
  std::vector<double> q = p.values();
  double s = norm(a) / (norm(a) + epsilon);
  double residual = norm(a) * (1.0 - s * s);
  double expectedNorm = residual / (residual + epsilon);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(q[size_t(i * r)], a[size_t(i)] / (norm(a) + epsilon), 1e-15);
    EXPECT_NEAR(q[size_t(i * r + 1)], a[size_t(i)] / norm(a) * expectedNorm,
                1e-8);
  }
}

TEST(Orthogonalize, EpsilonShrinksColumns) {
  for (ddprt_dtype dtype : kAllDtypes) {
    // Two orthogonal columns of norms 2 and 0.5: each becomes
    // v / (|v| + epsilon).
    const int64_t n = 4, r = 2;
    TypedArray p(dtype, n * r);
    p.assign({1.0, 0.25, 1.0, -0.25, 1.0, 0.25, 1.0, -0.25});
    const double epsilon = 0.5;
    cpu::orthogonalize(p.matrix(n, r), epsilon);
    std::vector<double> q = p.values();
    double tolerance = 4 * unitRoundoff(dtype);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(q[size_t(i * r)], 1.0 / 2.5, tolerance) << dtypeName(dtype);
      EXPECT_NEAR(q[size_t(i * r + 1)], (i % 2 ? -0.25 : 0.25) / 1.0, tolerance)
          << dtypeName(dtype);
    }
  }
}

TEST(Orthogonalize, NaNInputGivesNaNColumnsWithoutCrashing) {
  for (ddprt_dtype dtype : kAllDtypes) {
    const int64_t n = 6, r = 3;
    TypedArray p(dtype, n * r);
    std::mt19937 rng(11);
    p.randomize(rng);
    p.set(2 * r + 1, kNaN);
    cpu::orthogonalize(p.matrix(n, r), 0.0);
    std::vector<double> q = p.values();
    EXPECT_NEAR(norm(column(q, n, r, 0)), 1.0, orthonormalTolerance(dtype))
        << dtypeName(dtype) << ": the column before the NaN";
    for (int64_t k : {1, 2})
      for (int64_t i = 0; i < n; ++i)
        EXPECT_TRUE(std::isnan(q[size_t(i * r + k)]))
            << dtypeName(dtype) << " row " << i << " column " << k;
  }
}

TEST(Orthogonalize, InfinityGivesNaNWithoutCrashing) {
  for (ddprt_dtype dtype : kAllDtypes) {
    const int64_t n = 6, r = 3;
    TypedArray p(dtype, n * r);
    std::mt19937 rng(12);
    p.randomize(rng);
    p.set(2 * r + 1, kInf);
    cpu::orthogonalize(p.matrix(n, r), 0.0);
    std::vector<double> q = p.values();
    EXPECT_NEAR(norm(column(q, n, r, 0)), 1.0, orthonormalTolerance(dtype))
        << dtypeName(dtype) << ": the column before the infinity";
    for (int64_t k : {1, 2})
      for (int64_t i = 0; i < n; ++i)
        EXPECT_TRUE(std::isnan(q[size_t(i * r + k)]))
            << dtypeName(dtype) << " row " << i << " column " << k;
  }
}

// Kernels.h: "Non-finite input gives NaN columns." The first column holding
// an infinity has norm inf and is multiplied by 1/inf = 0: only the
// infinite entries become NaN (inf * 0), its finite entries become 0, a
// column that is neither NaN nor unit. (Later columns are all NaN.)
TEST(Orthogonalize, FirstColumnWithInfinityIsAllNaN) {
  const int64_t n = 6, r = 2;
  TypedArray p(DDPRT_F32, n * r);
  std::mt19937 rng(13);
  p.randomize(rng);
  p.set(2 * r + 0, kInf);
  cpu::orthogonalize(p.matrix(n, r), 0.0);
  for (int64_t k : {0, 1})
    for (int64_t i = 0; i < n; ++i)
      EXPECT_TRUE(std::isnan(p.get(i * r + k)))
          << "row " << i << " column " << k << " is " << p.get(i * r + k);
}

// For f64 input the kernel sums squares without scaling: a column with
// entries above ~1e154 overflows to a norm of inf and comes out all zeros,
// one with entries below ~1e-162 underflows to a norm of 0 and is zeroed as
// if it were zero. Both are finite, non-zero columns whose unit vector is
// representable.
TEST(Orthogonalize, F64HugeOrTinyColumnKeepsItsDirection) {
  for (double magnitude : {1e200, 1e-200}) {
    TypedArray p(DDPRT_F64, 4);
    p.fill(magnitude);
    cpu::orthogonalize(p.matrix(4, 1), 0.0);
    for (int64_t i = 0; i < 4; ++i)
      EXPECT_NEAR(p.get(i), 0.5, 1e-15) << "entries of " << magnitude;
  }
}

//===----------------------------------------------------------------------===//
// PowerSGD identities on one rank
//===----------------------------------------------------------------------===//

double identityTolerance(ddprt_dtype dtype) {
  return dtype == DDPRT_F64 ? 1e-10 : 2e-5;
}

/// M = U V^T, n x m of rank `rank`.
TypedArray lowRankMatrix(ddprt_dtype dtype, int64_t n, int64_t m, int64_t rank,
                         std::mt19937 &rng) {
  std::normal_distribution<double> normal;
  std::vector<double> u(size_t(n * rank)), v(size_t(m * rank));
  for (double &x : u)
    x = normal(rng);
  for (double &x : v)
    x = normal(rng);
  TypedArray matrix(dtype, n * m);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double sum = 0.0;
      for (int64_t k = 0; k < rank; ++k)
        sum += u[size_t(i * rank + k)] * v[size_t(j * rank + k)];
      matrix.set(i * m + j, sum);
    }
  return matrix;
}

/// One PowerSGD round on one rank: P = orth(M Q), Q = M^T P, M_hat = P Q^T.
std::vector<double> powerSgdRound(TypedArray &matrix, int64_t n, int64_t m,
                                  int64_t r, double epsilon,
                                  std::mt19937 &rng) {
  ddprt_dtype dtype = matrix.dtype();
  TypedArray q(dtype, m * r), p(dtype, n * r), out(dtype, n * m);
  q.randomize(rng);
  p.poison();
  out.poison();
  cpu::project(matrix.matrix(n, m), nullptr, q.matrix(m, r), p.matrix(n, r));
  cpu::orthogonalize(p.matrix(n, r), epsilon);
  q.poison();
  cpu::backproject(matrix.matrix(n, m), nullptr, p.matrix(n, r),
                   q.matrix(m, r));
  cpu::reconstruct(p.matrix(n, r), q.matrix(m, r), nullptr, nullptr,
                   out.matrix(n, m));
  return out.values();
}

TEST(PowerSgd, LowRankMatrixIsReconstructed) {
  std::mt19937 rng(14);
  for (ddprt_dtype dtype : {DDPRT_F64, DDPRT_F32})
    for (int64_t r : {1, 2, 4}) {
      const int64_t n = 37, m = 19;
      TypedArray matrix = lowRankMatrix(dtype, n, m, r, rng);
      std::vector<double> reconstruction =
          powerSgdRound(matrix, n, m, r, 0.0, rng);
      EXPECT_LE(relativeError(reconstruction, matrix.values()),
                identityTolerance(dtype))
          << dtypeName(dtype) << " rank " << r;
    }
}

TEST(PowerSgd, ZeroMatrixGivesZerosNotNaN) {
  // P = 0 has only zero columns, which stay zero: M_hat = 0, no NaN.
  std::mt19937 rng(15);
  for (ddprt_dtype dtype : kAllDtypes) {
    const int64_t n = 9, m = 4, r = 2;
    TypedArray matrix(dtype, n * m);
    matrix.fill(0.0);
    std::vector<double> reconstruction =
        powerSgdRound(matrix, n, m, r, 0.0, rng);
    EXPECT_EQ(reconstruction, std::vector<double>(size_t(n * m), 0.0))
        << dtypeName(dtype);
  }
}

TEST(PowerSgd, ErrorFeedbackLosesNothing) {
  // With E_0 = 0 and E_{t+1} = G_t + E_t - M_hat_t, the outputs plus the
  // final error are the sum of the inputs.
  std::mt19937 rng(16);
  for (ddprt_dtype dtype : {DDPRT_F64, DDPRT_F32, DDPRT_F16}) {
    const int64_t n = 37, m = 19, r = 2, steps = 6;
    TypedArray e(dtype, n * m);
    e.fill(0.0);
    std::vector<double> inputs(size_t(n * m), 0.0), outputs(inputs.size(), 0.0),
        bound(inputs.size(), 0.0);
    for (int step = 0; step < steps; ++step) {
      TypedArray g(dtype, n * m), q(dtype, m * r), p(dtype, n * r),
          out(dtype, n * m);
      g.randomize(rng);
      q.randomize(rng);
      std::vector<double> gValues = g.values(), eValues = e.values();
      ddprt_matrix gm = g.matrix(n, m), em = e.matrix(n, m);
      cpu::project(gm, &em, q.matrix(m, r), p.matrix(n, r));
      cpu::orthogonalize(p.matrix(n, r), 0.0);
      cpu::backproject(gm, &em, p.matrix(n, r), q.matrix(m, r));
      cpu::reconstruct(p.matrix(n, r), q.matrix(m, r), &gm, &em,
                       out.matrix(n, m));
      for (int64_t i = 0; i < n * m; ++i) {
        inputs[size_t(i)] += gValues[size_t(i)];
        outputs[size_t(i)] += out.get(i);
        // Each step rounds M_hat and E' once each in the storage type and
        // forms them in the compute type.
        double magnitude = std::fabs(gValues[size_t(i)]) +
                           std::fabs(eValues[size_t(i)]) +
                           2 * std::fabs(out.get(i)) + std::fabs(e.get(i));
        bound[size_t(i)] +=
            2 * (unitRoundoff(dtype) + double(r + 3) * computeRoundoff(dtype)) *
            magnitude;
      }
    }
    std::vector<double> total(inputs.size());
    for (int64_t i = 0; i < n * m; ++i)
      total[size_t(i)] = outputs[size_t(i)] + e.get(i);
    expectWithin(total, inputs, bound, dtypeName(dtype));
  }
}

//===----------------------------------------------------------------------===//
// randomNormal
//===----------------------------------------------------------------------===//

TypedArray draw(ddprt_dtype dtype, int64_t numel, uint64_t seed,
                uint64_t stream, uint64_t step) {
  TypedArray out(dtype, numel);
  out.poison();
  cpu::randomNormal(out.buffer(), seed, stream, step);
  return out;
}

TEST(RandomNormal, IsAPureFunctionOfSeedStreamStep) {
  TypedArray a = draw(DDPRT_F32, 1001, 42, 3, 7);
  EXPECT_TRUE(a.bitwiseEqual(draw(DDPRT_F32, 1001, 42, 3, 7)));
  std::vector<double> values = a.values();
  for (auto [seed, stream, step] :
       {std::tuple<uint64_t, uint64_t, uint64_t>{43, 3, 7},
        {42, 4, 7},
        {42, 3, 8},
        {42, 3 + (1ull << 32), 7},
        {42, 3, 7 + (1ull << 32)},
        {42 + (1ull << 32), 3, 7}}) {
    std::vector<double> other =
        draw(DDPRT_F32, 1001, seed, stream, step).values();
    int same = 0;
    for (size_t i = 0; i < values.size(); ++i)
      same += values[i] == other[i];
    EXPECT_LT(same, 5) << "seed " << seed << " stream " << stream << " step "
                       << step;
  }
}

TEST(RandomNormal, ShorterDrawIsAPrefix) {
  for (ddprt_dtype dtype : kAllDtypes) {
    std::vector<double> longer = draw(dtype, 103, 5, 6, 7).values();
    for (int64_t k : {1, 2, 3, 4, 5, 8, 50}) {
      std::vector<double> shorter = draw(dtype, k, 5, 6, 7).values();
      EXPECT_TRUE(std::equal(shorter.begin(), shorter.end(), longer.begin()))
          << dtypeName(dtype) << " k=" << k;
    }
  }
}

TEST(RandomNormal, EveryDtypeFillsEveryElementWithTheSameDraws) {
  for (int64_t numel : {1, 2, 3, 4, 5, 7, 8, 1001}) {
    std::vector<double> exact = draw(DDPRT_F64, numel, 9, 1, 2).values();
    for (ddprt_dtype dtype : kAllDtypes) {
      std::vector<double> values = draw(dtype, numel, 9, 1, 2).values();
      for (int64_t i = 0; i < numel; ++i) {
        ASSERT_TRUE(std::isfinite(values[size_t(i)]))
            << dtypeName(dtype) << " numel " << numel << " element " << i;
        // Computed in the compute type, then stored.
        double computed = dtype == DDPRT_F64 ? exact[size_t(i)]
                                             : double(float(exact[size_t(i)]));
        EXPECT_EQ(values[size_t(i)], roundTo(dtype, computed))
            << dtypeName(dtype) << " element " << i;
      }
    }
  }
}

TEST(RandomNormal, IsStandardNormal) {
  const int64_t count = 100000;
  std::vector<double> values = draw(DDPRT_F64, count, 2024, 0, 0).values();
  double sum = 0.0, squares = 0.0;
  int64_t withinOne = 0;
  for (double x : values) {
    sum += x;
    squares += x * x;
    withinOne += std::fabs(x) < 1.0;
  }
  double mean = sum / count, variance = squares / count - mean * mean;
  EXPECT_LT(std::fabs(mean), 0.02);
  EXPECT_LT(std::fabs(variance - 1.0), 0.03);
  EXPECT_NEAR(double(withinOne) / count, 0.6827, 0.01);
}

//===----------------------------------------------------------------------===//
// Top-k selection
//===----------------------------------------------------------------------===//

/// cpu::topK of `input` with k values and indices of `indexType`.
std::pair<std::vector<double>, std::vector<int64_t>>
topK(const TypedArray &input, int64_t k, ddprt_dtype indexType = DDPRT_I32) {
  TypedArray values(input.dtype(), k);
  std::vector<int64_t> wide(size_t(k), -1);
  std::vector<int32_t> narrow(size_t(k), -1);
  ddprt_buffer indices{indexType == DDPRT_I32
                           ? static_cast<void *>(narrow.data())
                           : static_cast<void *>(wide.data()),
                       indexType, k};
  TypedArray copy = input;
  cpu::topK(copy.buffer(), values.buffer(), indices);
  if (indexType == DDPRT_I32)
    wide.assign(narrow.begin(), narrow.end());
  return {values.values(), wide};
}

TEST(TopK, SelectsTheLargestMagnitudesLargestFirst) {
  for (ddprt_dtype dtype : kAllDtypes) {
    TypedArray x(dtype, 8);
    x.assign({0.5, -3.0, 1.0, 2.0, -0.25, 4.0, -1.5, 0.0});
    auto [values, indices] = topK(x, 3);
    EXPECT_EQ(indices, (std::vector<int64_t>{5, 1, 3})) << dtypeName(dtype);
    EXPECT_EQ(values, (std::vector<double>{4.0, -3.0, 2.0}))
        << dtypeName(dtype);
    auto [all, order] = topK(x, 8, DDPRT_I64);
    EXPECT_EQ(order, (std::vector<int64_t>{5, 1, 3, 6, 2, 0, 4, 7}))
        << dtypeName(dtype);
  }
}

TEST(TopK, EqualMagnitudesGoInIndexOrderAndSignedZerosAreEqual) {
  TypedArray x(DDPRT_F32, 7);
  x.assign({1.0, -2.0, 2.0, -1.0, -0.0, 2.0, 0.0});
  EXPECT_EQ(topK(x, 4).second, (std::vector<int64_t>{1, 2, 5, 0}));
  // -0 and +0 tie: index order.
  TypedArray zeros(DDPRT_F32, 4);
  zeros.assign({0.0, -0.0, 0.0, -0.0});
  EXPECT_EQ(topK(zeros, 4).second, (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(TopK, NaNAndInfinityAreSelectedFirst) {
  TypedArray x(DDPRT_F32, 5);
  x.assign({1.0, INFINITY, 3.0, NAN, -INFINITY});
  auto [values, indices] = topK(x, 3);
  EXPECT_EQ(indices, (std::vector<int64_t>{3, 1, 4}));
  EXPECT_TRUE(std::isnan(values[0]));
  EXPECT_EQ(values[1], INFINITY);
  EXPECT_EQ(values[2], -INFINITY);
}

TEST(TopK, MatchesASortOfEveryElementOnRandomData) {
  std::mt19937 rng(7);
  for (ddprt_dtype dtype : kAllDtypes) {
    for (int64_t n : {1, 2, 3, 100, 4099, 70001}) {
      TypedArray x(dtype, n);
      x.randomize(rng);
      // Every fifth element from a few values: ties in every type (bf16
      // has few values anyway), which the order settles.
      for (int64_t i = 0; i < n; i += 5)
        x.set(i, double(int64_t(rng() % 7) - 3) * 0.5);
      std::vector<int64_t> expected(static_cast<size_t>(n));
      std::iota(expected.begin(), expected.end(), 0);
      std::stable_sort(expected.begin(), expected.end(),
                       [&](int64_t a, int64_t b) {
                         return std::fabs(x.get(a)) > std::fabs(x.get(b));
                       });
      for (int64_t k : {int64_t(1), (n + 9) / 10, n / 2 + 1, n}) {
        auto [values, indices] = topK(x, k);
        ASSERT_EQ(indices,
                  std::vector<int64_t>(expected.begin(), expected.begin() + k))
            << dtypeName(dtype) << " n " << n << " k " << k;
        for (int64_t j = 0; j < k; ++j)
          EXPECT_EQ(values[size_t(j)], x.get(indices[size_t(j)]));
      }
    }
  }
}

} // namespace
