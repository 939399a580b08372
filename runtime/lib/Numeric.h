//===- Numeric.h - element types of the runtime -----------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// f16 and bf16 as 16-bit storage with exact, round-to-nearest-even
// conversions to and from f32, and the traits the kernels dispatch on.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_NUMERIC_H
#define DDPRT_NUMERIC_H

#include "HostDevice.h"
#include "ddprt/ddprt.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ddprt {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

DDPRT_HOST_DEVICE inline uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

DDPRT_HOST_DEVICE inline float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// f32 -> f16, round to nearest even; overflow gives infinity, NaN stays NaN.
inline uint16_t floatToHalfBits(float value) {
  const uint32_t infinity = 255u << 23;
  const uint32_t halfOverflow = (127u + 16u) << 23;
  const uint32_t denormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t bits = bitsOf(value);
  uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  uint16_t result;
  if (bits >= halfOverflow) {
    result = bits > infinity ? 0x7e00 : 0x7c00;
  } else if (bits < (113u << 23)) {
    // Subnormal or zero: let the FPU round by adding a magic number.
    float shifted = floatOf(bits) + floatOf(denormMagic);
    result = uint16_t(bitsOf(shifted) - denormMagic);
  } else {
    uint32_t mantissaOdd = (bits >> 13) & 1u;
    bits += ((uint32_t)(15 - 127) << 23) + 0xfffu;
    bits += mantissaOdd;
    result = uint16_t(bits >> 13);
  }
  return uint16_t(result | (sign >> 16));
}

/// f16 -> f32, exact.
inline float halfBitsToFloat(uint16_t half) {
  const uint32_t shiftedExponent = 0x7c00u << 13;
  uint32_t bits = (uint32_t(half) & 0x7fffu) << 13;
  uint32_t exponent = shiftedExponent & bits;
  bits += (127u - 15u) << 23;
  if (exponent == shiftedExponent) {
    bits += (128u - 16u) << 23; // infinity or NaN
  } else if (exponent == 0) {
    bits += 1u << 23; // zero or subnormal: renormalize
    bits = bitsOf(floatOf(bits) - floatOf(113u << 23));
  }
  return floatOf(bits | ((uint32_t(half) & 0x8000u) << 16));
}

/// f32 -> bf16, round to nearest even; NaN stays a quiet NaN.
inline uint16_t floatToBFloat16Bits(float value) {
  uint32_t bits = bitsOf(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

inline float bfloat16BitsToFloat(uint16_t bits) {
  return floatOf(uint32_t(bits) << 16);
}

/// f64 -> f32 rounded to odd: truncate, and set the last bit if inexact.
/// Rounding that to f16 or bf16 (to nearest even) then rounds once, as if
/// from f64 directly: f32 keeps more than two extra bits.
/// Shared by the CPU and CUDA casts.
DDPRT_HOST_DEVICE inline float roundToOddFloat(double value) {
  float nearest = float(value);
  if (double(nearest) == value || value != value)
    return nearest;
  uint32_t bits = bitsOf(nearest);
  if ((bits & 0x7fffffffu) >= 0x7f800000u)
    return nearest; // overflow: the narrow type overflows too
  // Step back toward zero if rounding went away from it.
  if (::fabs(double(nearest)) > ::fabs(value))
    bits -= 1;
  return floatOf(bits | 1u);
}

/// How the kernels read, compute in and write each storage type: f16,
/// bf16 and f32 compute in f32, f64 in f64.
template <typename T> struct Element;

template <> struct Element<float> {
  using Compute = float;
  static float load(float v) { return v; }
  static float store(float v) { return v; }
};
template <> struct Element<double> {
  using Compute = double;
  static double load(double v) { return v; }
  static double store(double v) { return v; }
};
template <> struct Element<Half> {
  using Compute = float;
  static float load(Half v) { return halfBitsToFloat(v.bits); }
  static Half store(float v) { return Half{floatToHalfBits(v)}; }
};
template <> struct Element<BFloat16> {
  using Compute = float;
  static float load(BFloat16 v) { return bfloat16BitsToFloat(v.bits); }
  static BFloat16 store(float v) { return BFloat16{floatToBFloat16Bits(v)}; }
};

/// Calls `fn(T{})` with the storage type of `dtype`; false if unknown.
template <typename Fn> bool dispatchDtype(ddprt_dtype dtype, Fn &&fn) {
  switch (dtype) {
  case DDPRT_F32:
    fn(float{});
    return true;
  case DDPRT_F64:
    fn(double{});
    return true;
  case DDPRT_F16:
    fn(Half{});
    return true;
  case DDPRT_BF16:
    fn(BFloat16{});
    return true;
  case DDPRT_I8:
  case DDPRT_I32:
  case DDPRT_I64: // state only: the C API keeps it from the kernels
    break;
  }
  return false;
}

} // namespace ddprt

#endif // DDPRT_NUMERIC_H
