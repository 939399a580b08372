//===- Kernels.cpp - the compression kernels on the CPU -------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// PowerSGD's matrices are skinny (r <= 8 in practice), so every kernel is
// bound by reading the n x m gradient: each one streams G (and E) once, row
// by row, keeping the small factor in the cache, transposed to r rows of m
// in the compute type so the inner loops run over contiguous memory.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "../HostArithmetic.h"
#include "../Numeric.h"
#include "../Philox.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ddprt::cpu {

namespace {
template <typename T> T *typed(const ddprt_buffer &buffer) {
  return static_cast<T *>(buffer.data);
}
template <typename T> T *typed(const ddprt_matrix &matrix) {
  return static_cast<T *>(matrix.data);
}

/// The factor Q (m x r, row-major) transposed to r rows of m in the compute
/// type: every inner loop below then runs over contiguous j and vectorizes.
template <typename T>
std::vector<typename Element<T>::Compute> loadTransposed(const T *q, int64_t m,
                                                         int64_t r) {
  std::vector<typename Element<T>::Compute> qt(m * r);
  for (int64_t j = 0; j < m; ++j)
    for (int64_t k = 0; k < r; ++k)
      qt[k * m + j] = Element<T>::load(q[j * r + k]);
  return qt;
}

/// Loads one row of M = G (+ E) in the compute type.
template <typename T, bool HasResidual>
void loadRow(const T *g, const T *e, int64_t m,
             typename Element<T>::Compute *row) {
  for (int64_t j = 0; j < m; ++j) {
    typename Element<T>::Compute v = Element<T>::load(g[j]);
    if constexpr (HasResidual)
      v += Element<T>::load(e[j]);
    row[j] = v;
  }
}

/// sum_j a[j] * b[j] with kLanes independent partial sums, so that the loop
/// vectorizes without reassociating a single sum.
template <typename C> C dot(const C *a, const C *b, int64_t n) {
  constexpr int kLanes = 16;
  C lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l)
      lanes[l] += a[j + l] * b[j + l];
  C sum = C(0);
  for (int l = 0; l < kLanes; ++l)
    sum += lanes[l];
  for (; j < n; ++j)
    sum += a[j] * b[j];
  return sum;
}

template <typename T, bool HasResidual>
void projectRows(const T *g, const T *e, const T *q, T *p, int64_t n, int64_t m,
                 int64_t r) {
  using C = typename Element<T>::Compute;
  std::vector<C> qt = loadTransposed(q, m, r);
  std::vector<C> row(m);
  for (int64_t i = 0; i < n; ++i) {
    loadRow<T, HasResidual>(g + i * m, HasResidual ? e + i * m : nullptr, m,
                            row.data());
    for (int64_t k = 0; k < r; ++k)
      p[i * r + k] = Element<T>::store(dot(row.data(), qt.data() + k * m, m));
  }
}

template <typename T, bool HasResidual>
void backprojectRows(const T *g, const T *e, const T *p, T *q, int64_t n,
                     int64_t m, int64_t r) {
  using C = typename Element<T>::Compute;
  // Q^T accumulated as r rows of m: each row of M adds p[i][k] * M[i] to
  // row k (an axpy over contiguous j).
  std::vector<C> qt(m * r, C(0));
  std::vector<C> row(m);
  for (int64_t i = 0; i < n; ++i) {
    loadRow<T, HasResidual>(g + i * m, HasResidual ? e + i * m : nullptr, m,
                            row.data());
    for (int64_t k = 0; k < r; ++k) {
      C pik = Element<T>::load(p[i * r + k]);
      C *out = qt.data() + k * m;
      for (int64_t j = 0; j < m; ++j)
        out[j] += pik * row[j];
    }
  }
  for (int64_t j = 0; j < m; ++j)
    for (int64_t k = 0; k < r; ++k)
      q[j * r + k] = Element<T>::store(qt[k * m + j]);
}

template <typename T, bool HasResidual>
void reconstructRows(const T *p, const T *q, const T *g, T *e, T *out,
                     int64_t n, int64_t m, int64_t r) {
  using C = typename Element<T>::Compute;
  std::vector<C> qt = loadTransposed(q, m, r);
  std::vector<C> mHat(m);
  for (int64_t i = 0; i < n; ++i) {
    std::fill(mHat.begin(), mHat.end(), C(0));
    for (int64_t k = 0; k < r; ++k) {
      C pik = Element<T>::load(p[i * r + k]);
      const C *qRow = qt.data() + k * m;
      for (int64_t j = 0; j < m; ++j)
        mHat[j] += pik * qRow[j];
    }
    int64_t base = i * m;
    if constexpr (HasResidual)
      for (int64_t j = 0; j < m; ++j) {
        C sum = Element<T>::load(g[base + j]) + Element<T>::load(e[base + j]);
        e[base + j] = Element<T>::store(sum - mHat[j]);
      }
    // After the residual: `out` may alias `g`.
    for (int64_t j = 0; j < m; ++j)
      out[base + j] = Element<T>::store(mHat[j]);
  }
}
} // namespace

#if defined(__x86_64__)
/// f32 <-> f16 with the F16C instructions, 8 at a time; the same rounding
/// (to nearest even) as the portable conversion.
__attribute__((target("avx,f16c"))) void
castFloatToHalfF16C(const float *in, uint16_t *out, int64_t n, float factor) {
  __m256 f = _mm256_set1_ps(factor);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_mul_ps(_mm256_loadu_ps(in + i), f);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i),
                     _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i)
    out[i] = floatToHalfBits(in[i] * factor);
}

__attribute__((target("avx,f16c"))) void
castHalfToFloatF16C(const uint16_t *in, float *out, int64_t n, float factor) {
  __m256 f = _mm256_set1_ps(factor);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + i)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(x, f));
  }
  for (; i < n; ++i)
    out[i] = halfBitsToFloat(in[i]) * factor;
}

/// f32 -> bf16, 8 at a time with AVX2's integer operations: the portable
/// conversion's arithmetic (floatToBFloat16Bits: round to nearest even on
/// the bits, a NaN kept quiet), bit for bit. Not AVX-512 BF16's
/// vcvtneps2bf16, which flushes subnormal inputs and outputs to zero.
__attribute__((target("avx2"))) void castFloatToBFloat16Avx2(const float *in,
                                                             uint16_t *out,
                                                             int64_t n,
                                                             float factor) {
  const __m256 f = _mm256_set1_ps(factor);
  const __m256i magnitude = _mm256_set1_epi32(0x7fffffff);
  const __m256i infinity = _mm256_set1_epi32(0x7f800000);
  const __m256i half = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i quiet = _mm256_set1_epi32(0x00400000);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i bits =
        _mm256_castps_si256(_mm256_mul_ps(_mm256_loadu_ps(in + i), f));
    // |x| > infinity, as signed 32-bit integers (both are non-negative).
    __m256i nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(bits, magnitude), infinity);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
    __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(half, odd));
    __m256i chosen =
        _mm256_blendv_epi8(rounded, _mm256_or_si256(bits, quiet), nan);
    __m256i high = _mm256_srli_epi32(chosen, 16);
    // Each word is at most 0xffff, so the unsigned saturating pack keeps it.
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(high),
                                      _mm256_extracti128_si256(high, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i), packed);
  }
  for (; i < n; ++i)
    out[i] = floatToBFloat16Bits(in[i] * factor);
}

#endif

void cast(double factor, const ddprt_buffer &input,
          const ddprt_buffer &output) {
#if defined(__x86_64__)
  if (hasF16C() && input.dtype == DDPRT_F32 && output.dtype == DDPRT_F16)
    return castFloatToHalfF16C(static_cast<const float *>(input.data),
                               static_cast<uint16_t *>(output.data),
                               input.numel, float(factor));
  if (hasF16C() && input.dtype == DDPRT_F16 && output.dtype == DDPRT_F32)
    return castHalfToFloatF16C(static_cast<const uint16_t *>(input.data),
                               static_cast<float *>(output.data), input.numel,
                               float(factor));
  if (hasAvx2() && input.dtype == DDPRT_F32 && output.dtype == DDPRT_BF16)
    return castFloatToBFloat16Avx2(static_cast<const float *>(input.data),
                                   static_cast<uint16_t *>(output.data),
                                   input.numel, float(factor));
#endif
  bool wide = input.dtype == DDPRT_F64 || output.dtype == DDPRT_F64;
  dispatchDtype(input.dtype, [&](auto inTag) {
    using In = decltype(inTag);
    dispatchDtype(output.dtype, [&](auto outTag) {
      using Out = decltype(outTag);
      const In *in = typed<In>(input);
      Out *out = typed<Out>(output);
      if (wide) {
        // f64 to a narrow type goes through f32 rounded to odd, so that it
        // rounds once.
        constexpr bool narrowOut =
            std::is_same_v<Out, Half> || std::is_same_v<Out, BFloat16>;
        for (int64_t i = 0; i < input.numel; ++i) {
          double product = double(Element<In>::load(in[i])) * factor;
          if constexpr (narrowOut)
            out[i] = Element<Out>::store(roundToOddFloat(product));
          else
            out[i] =
                Element<Out>::store(typename Element<Out>::Compute(product));
        }
      } else {
        float f = float(factor);
        for (int64_t i = 0; i < input.numel; ++i)
          out[i] = Element<Out>::store(typename Element<Out>::Compute(
              float(Element<In>::load(in[i])) * f));
      }
    });
  });
}

void project(const ddprt_matrix &matrix, const ddprt_matrix *residual,
             const ddprt_matrix &q, const ddprt_matrix &p) {
  dispatchDtype(matrix.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (residual)
      projectRows<T, true>(typed<T>(matrix), typed<T>(*residual), typed<T>(q),
                           typed<T>(p), matrix.rows, matrix.cols, q.cols);
    else
      projectRows<T, false>(typed<T>(matrix), nullptr, typed<T>(q), typed<T>(p),
                            matrix.rows, matrix.cols, q.cols);
  });
}

void backproject(const ddprt_matrix &matrix, const ddprt_matrix *residual,
                 const ddprt_matrix &p, const ddprt_matrix &q) {
  dispatchDtype(matrix.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (residual)
      backprojectRows<T, true>(typed<T>(matrix), typed<T>(*residual),
                               typed<T>(p), typed<T>(q), matrix.rows,
                               matrix.cols, p.cols);
    else
      backprojectRows<T, false>(typed<T>(matrix), nullptr, typed<T>(p),
                                typed<T>(q), matrix.rows, matrix.cols, p.cols);
  });
}

void orthogonalize(const ddprt_matrix &p, double epsilon) {
  dispatchDtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    T *data = typed<T>(p);
    int64_t n = p.rows, r = p.cols;
    std::vector<double> a(n * r);
    for (int64_t i = 0; i < n * r; ++i)
      a[i] = double(Element<T>::load(data[i]));
    for (int64_t j = 0; j < r; ++j) {
      // The norm, scaled by the largest magnitude so that neither huge nor
      // tiny columns overflow or underflow (as BLAS's nrm2 does).
      double largest = 0.0;
      bool finite = true;
      for (int64_t i = 0; i < n; ++i) {
        double value = a[i * r + j];
        finite = finite && std::isfinite(value);
        largest = std::max(largest, std::fabs(value));
      }
      if (largest == 0.0 && finite) {
        // A zero column stays zero (PyTorch divides by zero here).
        for (int64_t i = 0; i < n; ++i)
          a[i * r + j] = 0.0;
        continue;
      }
      double norm = std::nan("");
      if (finite) {
        double squares = 0.0;
        for (int64_t i = 0; i < n; ++i) {
          double scaled = a[i * r + j] / largest;
          squares += scaled * scaled;
        }
        norm = largest * std::sqrt(squares);
      }
      // Non-finite input: the column becomes NaN, and so does every later
      // column it is projected out of.
      double inverse = 1.0 / (norm + epsilon);
      for (int64_t i = 0; i < n; ++i)
        a[i * r + j] *= inverse;
      for (int64_t k = j + 1; k < r; ++k) {
        double dot = 0.0;
        for (int64_t i = 0; i < n; ++i)
          dot += a[i * r + j] * a[i * r + k];
        for (int64_t i = 0; i < n; ++i)
          a[i * r + k] -= dot * a[i * r + j];
      }
    }
    for (int64_t i = 0; i < n * r; ++i)
      data[i] = Element<T>::store(typename Element<T>::Compute(a[i]));
  });
}

void reconstruct(const ddprt_matrix &p, const ddprt_matrix &q,
                 const ddprt_matrix *matrix, const ddprt_matrix *residual,
                 const ddprt_matrix &reconstruction) {
  dispatchDtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (residual)
      reconstructRows<T, true>(typed<T>(p), typed<T>(q), typed<T>(*matrix),
                               typed<T>(*residual), typed<T>(reconstruction),
                               p.rows, q.rows, p.cols);
    else
      reconstructRows<T, false>(typed<T>(p), typed<T>(q), nullptr, nullptr,
                                typed<T>(reconstruction), p.rows, q.rows,
                                p.cols);
  });
}

void randomNormal(const ddprt_buffer &output, uint64_t seed, uint64_t stream,
                  uint64_t step) {
  dispatchDtype(output.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Element<T>::Compute;
    T *data = typed<T>(output);
    PhiloxKey key = philoxKeyFor(seed, stream);
    for (int64_t block = 0; block * 4 < output.numel; ++block) {
      double samples[4];
      normalQuad(key, step, uint64_t(block), samples);
      for (int64_t k = 0; k < 4 && block * 4 + k < output.numel; ++k)
        data[block * 4 + k] = Element<T>::store(C(samples[k]));
    }
  });
}

namespace {
/// The bits of |v| as an unsigned number: the order of magnitudes, with
/// -0 equal to +0 and NaN above every number (ddprt_top_k's order).
uint64_t magnitudeBits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits & 0x7fffffffu;
}
uint64_t magnitudeBits(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits & 0x7fffffffffffffffull;
}
uint64_t magnitudeBits(Half v) { return v.bits & 0x7fffu; }
uint64_t magnitudeBits(BFloat16 v) { return v.bits & 0x7fffu; }
} // namespace

namespace {
/// The magnitude key of the k-th largest element of `x` (radix selection
/// over 16-bit digits of the key, from the top: each pass reads the input
/// once and keeps a 65536-bin histogram, so the cost is a few streaming
/// reads, not a sort of N), and how many elements have a larger key.
template <typename T>
uint64_t kthLargestKey(const T *x, int64_t n, int64_t k, int keyBits,
                       int64_t &greater) {
  std::vector<int64_t> histogram(1 << 16);
  uint64_t prefix = 0; // the digits found so far
  int64_t rank = k;    // the k-th largest among those with that prefix
  greater = 0;
  for (int high = keyBits;;) {
    int low = std::max(high - 16, 0); // this pass's digit: bits [low, high)
    std::fill(histogram.begin(), histogram.end(), 0);
    uint64_t digitMask = (uint64_t(1) << (high - low)) - 1;
    for (int64_t i = 0; i < n; ++i) {
      uint64_t key = magnitudeBits(x[i]);
      if (high >= keyBits || (key >> high) == prefix)
        ++histogram[(key >> low) & digitMask];
    }
    // From the largest digit down, until the k-th largest is in the bin.
    uint64_t digit = digitMask;
    while (histogram[digit] < rank) {
      rank -= histogram[digit];
      greater += histogram[digit];
      --digit;
    }
    prefix = (prefix << (high - low)) | digit;
    if (low == 0)
      return prefix;
    high = low;
  }
}
} // namespace

void topK(const ddprt_buffer &input, const ddprt_buffer &values,
          const ddprt_buffer &indices) {
  dispatchDtype(input.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *x = typed<T>(input);
    int64_t n = input.numel, k = values.numel;
    int keyBits = int(sizeof(T) * 8 - 1); // the sign bit is cleared
    // The threshold: every element above it is selected, and the first
    // (k - greater) equal to it in index order.
    int64_t greater = 0;
    uint64_t threshold = kthLargestKey(x, n, k, keyBits, greater);
    struct Entry {
      uint64_t key;
      int64_t index;
    };
    std::vector<Entry> entries;
    entries.reserve(size_t(k));
    int64_t equal = k - greater;
    for (int64_t i = 0; i < n; ++i) {
      uint64_t key = magnitudeBits(x[i]);
      if (key > threshold || (key == threshold && equal-- > 0))
        entries.push_back({key, i});
    }
    // Largest first, equal magnitudes in index order: a strict total order,
    // so the selection and its order do not depend on the algorithm.
    std::sort(entries.begin(), entries.end(),
              [](const Entry &a, const Entry &b) {
                return a.key != b.key ? a.key > b.key : a.index < b.index;
              });
    T *out = typed<T>(values);
    for (int64_t j = 0; j < k; ++j)
      out[j] = x[entries[j].index];
    if (indices.dtype == DDPRT_I32)
      for (int64_t j = 0; j < k; ++j)
        typed<int32_t>(indices)[j] = int32_t(entries[j].index);
    else
      for (int64_t j = 0; j < k; ++j)
        typed<int64_t>(indices)[j] = entries[j].index;
  });
}

} // namespace ddprt::cpu
