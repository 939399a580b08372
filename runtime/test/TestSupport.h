//===- TestSupport.h - typed buffers and reference rounding for tests -----===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What the runtime's tests share: a tensor of any ddprt dtype read and
// written as doubles, and a slow, obviously correct reference for rounding a
// double to each storage type (written from the IEEE 754 definition, not
// from the library's bit tricks, so that it can check them).
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_TEST_TESTSUPPORT_H
#define DDPRT_TEST_TESTSUPPORT_H

#include "ddprt/ddprt.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace ddprt::test {

/// The dtypes allreduces and kernels take.
constexpr ddprt_dtype kAllDtypes[] = {DDPRT_F32, DDPRT_F64, DDPRT_F16,
                                      DDPRT_BF16};
/// Every dtype of ddprt.h's list (state and allgathers take them all).
constexpr ddprt_dtype kEveryDtype[] = {
#define DDPRT_TEST_DTYPE(NAME, value, bytes, kind, compute) DDPRT_##NAME,
    DDPRT_FOR_EACH_DTYPE(DDPRT_TEST_DTYPE)
#undef DDPRT_TEST_DTYPE
};

inline const char *dtypeName(ddprt_dtype dtype) {
  switch (dtype) {
  case DDPRT_F32:
    return "f32";
  case DDPRT_F64:
    return "f64";
  case DDPRT_F16:
    return "f16";
  case DDPRT_BF16:
    return "bf16";
  case DDPRT_I64:
    return "i64";
  case DDPRT_I8:
    return "i8";
  case DDPRT_I32:
    return "i32";
  }
  return "unknown";
}

/// A binary floating-point format: `precision` significand bits (with the
/// implicit one), smallest and largest normal exponents.
struct Format {
  int precision, minExponent, maxExponent;
};

inline Format formatOf(ddprt_dtype dtype) {
  switch (dtype) {
  case DDPRT_F32:
    return {24, -126, 127};
  case DDPRT_F64:
    return {53, -1022, 1023};
  case DDPRT_F16:
    return {11, -14, 15};
  case DDPRT_BF16:
    return {8, -126, 127};
  case DDPRT_I8:
  case DDPRT_I32:
  case DDPRT_I64: // not a float format
    break;
  }
  return {0, 0, 0};
}

/// Unit roundoff of the storage type: half an ulp of 1.
inline double unitRoundoff(ddprt_dtype dtype) {
  return std::ldexp(1.0, -formatOf(dtype).precision);
}
/// Unit roundoff of the type the kernels compute in (f32, or f64 for f64).
inline double computeRoundoff(ddprt_dtype dtype) {
  return dtype == DDPRT_F64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
}
/// The smallest positive subnormal of the storage type.
inline double smallestSubnormal(ddprt_dtype dtype) {
  Format f = formatOf(dtype);
  return std::ldexp(1.0, f.minExponent - (f.precision - 1));
}

/// `x` rounded to the nearest value of `format`, ties to even; values that
/// round past the largest finite one become infinity. Exact: the quotient
/// by a power of two is exact and nearbyint rounds ties to even.
inline double roundToFormat(double x, Format format) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0)
    return x;
  double magnitude = std::fabs(x);
  int exponent;
  std::frexp(magnitude, &exponent); // magnitude in [2^(e-1), 2^e)
  int unbiased = std::max(exponent - 1, format.minExponent);
  double ulp = std::ldexp(1.0, unbiased - (format.precision - 1));
  double rounded = std::nearbyint(magnitude / ulp) * ulp;
  if (rounded >= std::ldexp(1.0, format.maxExponent + 1))
    rounded = std::numeric_limits<double>::infinity();
  return std::copysign(rounded, x);
}

inline double roundTo(ddprt_dtype dtype, double x) {
  return roundToFormat(x, formatOf(dtype));
}

/// The bits of an already representable value `x` in a 16-bit format with
/// `mantissaBits` stored bits and exponent bias `bias`.
inline uint16_t encode16(double x, int mantissaBits, int bias) {
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  int exponentBits = 15 - mantissaBits;
  uint16_t infinity = uint16_t(((1u << exponentBits) - 1) << mantissaBits);
  if (std::isnan(x))
    return uint16_t(sign | infinity | (1u << (mantissaBits - 1)));
  if (std::isinf(x))
    return uint16_t(sign | infinity);
  double magnitude = std::fabs(x);
  int minExponent = 1 - bias;
  if (magnitude < std::ldexp(1.0, minExponent)) // zero or subnormal
    return uint16_t(
        sign |
        uint16_t(magnitude / std::ldexp(1.0, minExponent - mantissaBits)));
  int exponent;
  std::frexp(magnitude, &exponent);
  int unbiased = exponent - 1;
  uint32_t mantissa =
      uint32_t(magnitude / std::ldexp(1.0, unbiased - mantissaBits)) -
      (1u << mantissaBits);
  return uint16_t(sign | ((unbiased + bias) << mantissaBits) | mantissa);
}

/// The value of 16-bit pattern `bits` (NaN for NaN patterns).
inline double decode16(uint16_t bits, int mantissaBits, int bias) {
  int exponentBits = 15 - mantissaBits;
  uint32_t exponent = (bits >> mantissaBits) & ((1u << exponentBits) - 1);
  uint32_t mantissa = bits & ((1u << mantissaBits) - 1);
  double magnitude;
  if (exponent == (1u << exponentBits) - 1)
    magnitude = mantissa ? std::numeric_limits<double>::quiet_NaN()
                         : std::numeric_limits<double>::infinity();
  else if (exponent == 0)
    magnitude = std::ldexp(double(mantissa), 1 - bias - mantissaBits);
  else
    magnitude = std::ldexp(double(mantissa + (1u << mantissaBits)),
                           int(exponent) - bias - mantissaBits);
  return (bits & 0x8000) ? -magnitude : magnitude;
}

inline uint16_t referenceHalfBits(double x) {
  return encode16(roundTo(DDPRT_F16, x), 10, 15);
}
inline uint16_t referenceBFloat16Bits(double x) {
  return encode16(roundTo(DDPRT_BF16, x), 7, 127);
}
inline double referenceHalfValue(uint16_t bits) {
  return decode16(bits, 10, 15);
}
inline double referenceBFloat16Value(uint16_t bits) {
  return decode16(bits, 7, 127);
}

/// A dense tensor of any dtype, read and written as doubles (writes round
/// to nearest even with the reference above).
class TypedArray {
public:
  TypedArray() = default;
  TypedArray(ddprt_dtype dtype, int64_t numel)
      : dtype_(dtype), numel_(numel),
        bytes_(size_t(numel) * ddprt_dtype_size(dtype) + 1) {}

  ddprt_dtype dtype() const { return dtype_; }
  int64_t size() const { return numel_; }
  void *data() { return bytes_.data(); }
  const void *data() const { return bytes_.data(); }
  size_t byteSize() const { return size_t(numel_) * ddprt_dtype_size(dtype_); }

  double get(int64_t i) const {
    switch (dtype_) {
    case DDPRT_F32:
      return load<float>(i);
    case DDPRT_F64:
      return load<double>(i);
    case DDPRT_F16:
      return referenceHalfValue(load<uint16_t>(i));
    case DDPRT_BF16:
      return referenceBFloat16Value(load<uint16_t>(i));
    case DDPRT_I64:
      return double(load<int64_t>(i));
    case DDPRT_I8:
      return double(load<int8_t>(i));
    case DDPRT_I32:
      return double(load<int32_t>(i));
    }
    return std::numeric_limits<double>::quiet_NaN();
  }

  void set(int64_t i, double value) {
    switch (dtype_) {
    case DDPRT_F32:
      return store<float>(i, float(roundTo(DDPRT_F32, value)));
    case DDPRT_F64:
      return store<double>(i, value);
    case DDPRT_F16:
      return store<uint16_t>(i, referenceHalfBits(value));
    case DDPRT_BF16:
      return store<uint16_t>(i, referenceBFloat16Bits(value));
    case DDPRT_I64:
      return store<int64_t>(i, int64_t(value));
    case DDPRT_I8:
      return store<int8_t>(i, int8_t(value));
    case DDPRT_I32:
      return store<int32_t>(i, int32_t(value));
    }
  }

  std::vector<double> values() const {
    std::vector<double> out(static_cast<size_t>(numel_));
    for (int64_t i = 0; i < numel_; ++i)
      out[size_t(i)] = get(i);
    return out;
  }
  void assign(const std::vector<double> &values) {
    for (int64_t i = 0; i < numel_; ++i)
      set(i, values[size_t(i)]);
  }
  void fill(double value) {
    for (int64_t i = 0; i < numel_; ++i)
      set(i, value);
  }
  /// Fills with NaN, so that an element a kernel forgets to write shows.
  void poison() { fill(std::numeric_limits<double>::quiet_NaN()); }
  template <typename Rng> void randomize(Rng &rng, double stddev = 1.0) {
    std::normal_distribution<double> normal(0.0, stddev);
    for (int64_t i = 0; i < numel_; ++i)
      set(i, normal(rng));
  }

  bool bitwiseEqual(const TypedArray &other) const {
    return dtype_ == other.dtype_ && numel_ == other.numel_ &&
           std::memcmp(bytes_.data(), other.bytes_.data(), byteSize()) == 0;
  }

  ddprt_buffer buffer() { return ddprt_buffer{data(), dtype_, numel_}; }
  ddprt_matrix matrix(int64_t rows, int64_t cols) {
    return ddprt_matrix{data(), dtype_, rows, cols};
  }

private:
  template <typename T> T load(int64_t i) const {
    T value;
    std::memcpy(&value, bytes_.data() + size_t(i) * sizeof(T), sizeof(T));
    return value;
  }
  template <typename T> void store(int64_t i, T value) {
    std::memcpy(bytes_.data() + size_t(i) * sizeof(T), &value, sizeof(T));
  }

  ddprt_dtype dtype_ = DDPRT_F32;
  int64_t numel_ = 0;
  std::vector<unsigned char> bytes_; // one spare byte: never empty
};

} // namespace ddprt::test

#endif // DDPRT_TEST_TESTSUPPORT_H
