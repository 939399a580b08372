//===- KernelSupport.cuh - what the CUDA kernels share ----------*- CUDA
//-*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Private to the CUDA backend's kernel files: element types on the device,
// four-element accesses, and how tensors are spread over blocks and
// launches. Launches are checked with cudaPeekAtLastError after clearing
// what an earlier call left (beginLaunches): an error belongs to the launch
// that caused it.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_CUDA_KERNELSUPPORT_CUH
#define DDPRT_CUDA_KERNELSUPPORT_CUH

#include "ddprt/ddprt.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace ddprt::cuda::detail {

constexpr int kThreads = 256;
constexpr int kTensorsPerLaunch = 96;
constexpr int kMaxRankPerLaunch = 8;

//===--- Element types ---------------------------------------------------===//

template <typename T> struct Device;
template <> struct Device<float> {
  using Compute = float;
  __device__ static float load(float v) { return v; }
  __device__ static float store(float v) { return v; }
};
template <> struct Device<double> {
  using Compute = double;
  __device__ static double load(double v) { return v; }
  __device__ static double store(double v) { return v; }
};
template <> struct Device<__half> {
  using Compute = float;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <> struct Device<__nv_bfloat16> {
  using Compute = float;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) {
    return __float2bfloat16_rn(v);
  }
};

/// Calls fn(T{}) with the device storage type of `dtype`.
template <typename Fn> cudaError_t dispatch(ddprt_dtype dtype, Fn &&fn) {
  switch (dtype) {
  case DDPRT_F32:
    return fn(float{});
  case DDPRT_F64:
    return fn(double{});
  case DDPRT_F16:
    return fn(__half{});
  case DDPRT_BF16:
    return fn(__nv_bfloat16{});
  case DDPRT_I8:
  case DDPRT_I32:
  case DDPRT_I64: // state only: the C API keeps it from the kernels
    break;
  }
  return cudaErrorInvalidValue;
}

//===--- Four elements at a time -----------------------------------------===//

/// Four consecutive elements in one access (8 bytes for f16/bf16, 16 for
/// f32, two of 16 for f64); `source` must be aligned to 4 elements.
template <typename T> struct Packed4 {
  using Word = std::conditional_t<sizeof(T) == 2, uint2, uint4>;
  static constexpr int kWords = sizeof(T) == 8 ? 2 : 1;
  Word words[kWords];
};

template <typename T>
__device__ void load4(const T *source, typename Device<T>::Compute out[4]) {
  Packed4<T> raw;
  const auto *words =
      reinterpret_cast<const typename Packed4<T>::Word *>(source);
#pragma unroll
  for (int w = 0; w < Packed4<T>::kWords; ++w)
    raw.words[w] = words[w];
  T values[4];
  memcpy(values, &raw, sizeof(values));
#pragma unroll
  for (int k = 0; k < 4; ++k)
    out[k] = Device<T>::load(values[k]);
}

template <typename T> __device__ void store4Raw(T *target, const T values[4]) {
  Packed4<T> raw;
  memcpy(&raw, values, sizeof(raw));
  auto *words = reinterpret_cast<typename Packed4<T>::Word *>(target);
#pragma unroll
  for (int w = 0; w < Packed4<T>::kWords; ++w)
    words[w] = raw.words[w];
}

template <typename T>
__device__ void store4(T *target, const typename Device<T>::Compute in[4]) {
  T values[4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    values[k] = Device<T>::store(in[k]);
  store4Raw(target, values);
}

//===--- Work distribution -----------------------------------------------===//

/// The tensors of one launch; block b works on the tensor t with
/// firstBlock[t] <= b < firstBlock[t + 1]. Passed by value as a kernel
/// parameter (a few KB; CUDA 12.1+ allows 32 KB).
template <typename Tensor> struct Launch {
  Tensor tensors[kTensorsPerLaunch];
  int64_t firstBlock[kTensorsPerLaunch + 1];
  int count;
};

/// CUDA 12.1+ (Volta and newer) takes up to 32764 bytes of kernel
/// parameters; the kernels add at most two 8-byte scalars to a Launch.
constexpr size_t kMaxLaunchBytes = 32764 - 2 * sizeof(int64_t);

template <typename Tensor>
__device__ int findTensor(const Launch<Tensor> &launch, int64_t block) {
  int lo = 0, hi = launch.count - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (launch.firstBlock[mid] <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/// The grid for `blocks` logical blocks; kernels loop over the blocks they
/// stand for when there are more than 2^20.
inline unsigned gridFor(int64_t blocks) {
  return unsigned(std::min<int64_t>(std::max<int64_t>(blocks, 1), 1 << 20));
}

/// The error of the launch just made. The caller cleared the thread's last
/// error first (beginLaunches), so an earlier call's result, such as the
/// cudaErrorNotReady a stream query leaves, is not taken for this launch's.
inline cudaError_t launchError() { return cudaPeekAtLastError(); }

/// Forgets the last error an earlier, unrelated call left behind. A sticky
/// error (a kernel fault) stays: the context reports it on every call.
inline void beginLaunches() { (void)cudaGetLastError(); }

/// Splits `tensors` into launches of at most kTensorsPerLaunch and runs
/// `kernel` on each; `blocksOf(tensor)` says how many blocks a tensor needs.
template <typename Tensor, typename BlocksOf, typename Kernel>
cudaError_t launchAll(const std::vector<Tensor> &tensors, BlocksOf blocksOf,
                      Kernel kernel) {
  static_assert(sizeof(Launch<Tensor>) <= kMaxLaunchBytes,
                "a Launch must fit in the kernel parameters");
  beginLaunches();
  for (size_t begin = 0; begin < tensors.size(); begin += kTensorsPerLaunch) {
    Launch<Tensor> launch{};
    launch.count =
        int(std::min<size_t>(kTensorsPerLaunch, tensors.size() - begin));
    int64_t blocks = 0;
    for (int t = 0; t < launch.count; ++t) {
      launch.tensors[t] = tensors[begin + t];
      launch.firstBlock[t] = blocks;
      blocks += std::max<int64_t>(1, blocksOf(launch.tensors[t]));
    }
    launch.firstBlock[launch.count] = blocks;
    kernel(launch, blocks);
    if (cudaError_t error = launchError())
      return error;
  }
  return cudaSuccess;
}

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Whether `pointer` can be read 4 elements of `code` at a time.
inline bool alignedFor(int code, const void *pointer) {
  return reinterpret_cast<uintptr_t>(pointer) %
             (4 * ddprt_dtype_size(ddprt_dtype(code))) ==
         0;
}

/// Whether every row of `g` (and of its residual) starts aligned to 4
/// elements, so the kernels may read them 4 at a time.
inline bool rowsAligned(const ddprt_matrix &g, const ddprt_matrix *residual) {
  return g.cols % 4 == 0 && alignedFor(g.dtype, g.data) &&
         (!residual || alignedFor(g.dtype, residual->data));
}

/// Dispatches a rank chunk R in {1, 2, 4, 8} for a kernel template.
template <typename Fn> cudaError_t withRank(int64_t cols, Fn &&fn) {
  if (cols <= 1)
    return fn(std::integral_constant<int, 1>{});
  if (cols <= 2)
    return fn(std::integral_constant<int, 2>{});
  if (cols <= 4)
    return fn(std::integral_constant<int, 4>{});
  return fn(std::integral_constant<int, 8>{});
}

/// The sum of `value` over the warp, in lane 0 (a fixed order).
template <typename C> __device__ C warpSum(C value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_down_sync(0xffffffffu, value, offset);
  return value;
}

/// The 4 x R block of a factor with exactly R columns from row j: 4R
/// contiguous elements, read in 16-byte (or, for 4 f16/bf16, 8-byte) words.
/// `rows` must be aligned to the word (j a multiple of 4, the factor
/// aligned to 16 bytes).
template <typename T, int R>
__device__ void loadFactorBlock(const T *rows,
                                typename Device<T>::Compute out[4][R]) {
  constexpr int kBytes = 4 * R * int(sizeof(T));
  using Word = std::conditional_t<kBytes % 16 == 0, uint4, uint2>;
  constexpr int kWords = kBytes / int(sizeof(Word));
  Word raw[kWords];
#pragma unroll
  for (int w = 0; w < kWords; ++w)
    raw[w] = __ldg(reinterpret_cast<const Word *>(rows) + w);
  T values[4 * R];
  memcpy(values, raw, sizeof(values));
#pragma unroll
  for (int c = 0; c < 4; ++c)
#pragma unroll
    for (int k = 0; k < R; ++k)
      out[c][k] = Device<T>::load(values[c * R + k]);
}

} // namespace ddprt::cuda::detail

#endif // DDPRT_CUDA_KERNELSUPPORT_CUH
