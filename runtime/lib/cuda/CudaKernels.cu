//===- CudaKernels.cu - the compression kernels on NVIDIA GPUs ------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Bytes and bounds (per tensor, n x m gradient, rank r, element size s). All
// but orthogonalize are bound by memory bandwidth; the floor of a PowerSGD
// step is 32 bytes per f32 element (G and E read by project, backproject and
// reconstruct; G and E written by reconstruct).
//  - scale/cast: reads and writes n*m elements once, 4 elements per 16-byte
//    (or narrower) access, 16 elements in flight per thread.
//  - project (G+E)Q: reads G and E once (2nms bytes) per 8 columns of Q;
//    a row is split over 32..256 threads so that short and long rows both
//    fill the GPU; Q comes from the L1 cache, a thread's 4 rows of it in
//    whole 16-byte words where Q has exactly R columns.
//  - backproject (G+E)^T P: the same reads; each warp streams a strip of 32
//    rows x 128 columns, 4 rows' loads in flight, and writes its partial
//    sums (r floats per column per 32 rows: 1/32 of the gradient's bytes at
//    r = 2, 1/8 at r = 8), which a second kernel adds in a fixed order, 8
//    warps per 32 outputs.
//  - reconstruct + residual: reads G and E, writes M_hat and E' (4nms), 4
//    elements per access; M + E is never stored; short rows share a block.
//  - orthogonalize: one block per matrix (n x r is small), modified
//    Gram-Schmidt in f64 with one block reduction per column (the norm and
//    the column's dot products with the later columns together).
// Every reduction has a fixed order, so results are bitwise reproducible.
// Launches are checked with cudaPeekAtLastError after clearing what an
// earlier call left: an error belongs to the launch that caused it.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"

#include "../Numeric.h"
#include "../Philox.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>
#include <vector>

namespace ddprt::cuda {

namespace {

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
unsigned gridFor(int64_t blocks) {
  return unsigned(std::min<int64_t>(std::max<int64_t>(blocks, 1), 1 << 20));
}

/// The error of the launch just made. The caller cleared the thread's last
/// error first (beginLaunches), so an earlier call's result, such as the
/// cudaErrorNotReady a stream query leaves, is not taken for this launch's.
cudaError_t launchError() { return cudaPeekAtLastError(); }

/// Forgets the last error an earlier, unrelated call left behind. A sticky
/// error (a kernel fault) stays: the context reports it on every call.
void beginLaunches() { (void)cudaGetLastError(); }

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

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

//===--- scale, cast -----------------------------------------------------===//

struct Elementwise {
  const void *in;
  void *out;
  int64_t numel;
  bool vector; // both ends aligned to 4 elements
};
constexpr int kCastUnroll = 4;
constexpr int64_t kCastBlockElements = int64_t(kThreads) * 4 * kCastUnroll;

/// convert(product) to Out; from f64 to a narrow type through f32 rounded to
/// odd.
template <typename Out, typename C> __device__ Out convertTo(C product) {
  constexpr bool narrow =
      std::is_same_v<Out, __half> || std::is_same_v<Out, __nv_bfloat16>;
  if constexpr (narrow && std::is_same_v<C, double>)
    return Device<Out>::store(roundToOddFloat(product));
  else
    return Device<Out>::store(typename Device<Out>::Compute(product));
}

/// out = convert(in * factor), the product in the wider type C. A block
/// converts kCastBlockElements: each thread loads kCastUnroll groups of 4
/// (a warp's accesses contiguous) before it converts and stores them.
template <typename In, typename Out, typename C>
__global__ void __launch_bounds__(kThreads)
    castKernel(Launch<Elementwise> launch, int64_t blocks, C factor) {
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    int t = findTensor(launch, block);
    const Elementwise &e = launch.tensors[t];
    const In *in = static_cast<const In *>(e.in);
    Out *out = static_cast<Out *>(e.out);
    int64_t base = (block - launch.firstBlock[t]) * kCastBlockElements;
    if (e.vector && base + kCastBlockElements <= e.numel) {
      typename Device<In>::Compute values[kCastUnroll][4];
#pragma unroll
      for (int u = 0; u < kCastUnroll; ++u)
        load4(in + base + (u * kThreads + threadIdx.x) * 4, values[u]);
#pragma unroll
      for (int u = 0; u < kCastUnroll; ++u) {
        Out results[4];
#pragma unroll
        for (int k = 0; k < 4; ++k)
          results[k] = convertTo<Out>(C(values[u][k]) * factor);
        store4Raw(out + base + (u * kThreads + threadIdx.x) * 4, results);
      }
      continue;
    }
    int64_t end = min(e.numel, base + kCastBlockElements);
    for (int64_t i = base + threadIdx.x; i < end; i += kThreads)
      out[i] = convertTo<Out>(C(Device<In>::load(in[i])) * factor);
  }
}

//===--- project: P = (G + E) Q ------------------------------------------===//

struct Projection {
  const void *g, *e, *factor;
  void *out;
  int64_t n, m, r;
  int64_t column;     // first column of the factor this launch computes
  int threadsPerRow;  // 32, 64, 128 or 256
  bool vector;        // rows start aligned to 4 elements
  bool factorAligned; // the factor starts on a 16-byte boundary
};

/// Threads per row of `m` elements: about 32 elements each, at least a warp,
/// at most the block.
int threadsPerRowFor(int64_t m) {
  int threads = 32;
  while (threads < kThreads && int64_t(threads) * 2 * 32 <= m)
    threads *= 2;
  return threads;
}

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

/// acc[k] += v[c] * Q[j + c][column + k] for the `valid` columns from j;
/// Packed: Q has exactly R columns and is aligned, so its 4 rows come in
/// whole words; otherwise one element at a time.
template <typename T, int R, bool Packed>
__device__ void accumulateRow4(typename Device<T>::Compute acc[R],
                               const typename Device<T>::Compute v[4],
                               const T *q, int64_t j, int64_t r, int64_t column,
                               int cols, int valid) {
  using C = typename Device<T>::Compute;
  if constexpr (Packed) {
    C block[4][R];
    loadFactorBlock<T, R>(q + j * R, block);
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
      for (int k = 0; k < R; ++k)
        acc[k] += v[c] * block[c][k];
  } else {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      if (c >= valid)
        break;
      const T *qRow = q + (j + c) * r + column;
#pragma unroll
      for (int k = 0; k < R; ++k)
        if (k < cols)
          acc[k] += v[c] * Device<T>::load(__ldg(qRow + k));
    }
  }
}

/// One thread's share of row `row` of M = G (+ E) times Q, 4 elements per
/// access.
template <typename T, int R, bool HasResidual, bool Packed>
__device__ void projectRowVector(const Projection &p, int64_t row, int lane,
                                 int cols, typename Device<T>::Compute acc[R]) {
  using C = typename Device<T>::Compute;
  const int tpr = p.threadsPerRow;
  const T *g = static_cast<const T *>(p.g) + row * p.m;
  const T *e = HasResidual ? static_cast<const T *>(p.e) + row * p.m : nullptr;
  const T *q = static_cast<const T *>(p.factor);
  const int64_t groups = p.m / 4;
  int64_t x = lane;
  // Two groups in flight; at R = 8 one (the sums and the factor's block
  // would not fit the registers of two).
  for (; R < 8 && x + tpr < groups; x += 2 * tpr) {
    C g0[4], g1[4];
    load4(g + 4 * x, g0);
    load4(g + 4 * (x + tpr), g1);
    if (HasResidual) {
      C e0[4], e1[4];
      load4(e + 4 * x, e0);
      load4(e + 4 * (x + tpr), e1);
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        g0[c] += e0[c];
        g1[c] += e1[c];
      }
    }
    accumulateRow4<T, R, Packed>(acc, g0, q, 4 * x, p.r, p.column, cols, 4);
    accumulateRow4<T, R, Packed>(acc, g1, q, 4 * (x + tpr), p.r, p.column, cols,
                                 4);
  }
  for (; x < groups; x += tpr) {
    C g0[4];
    load4(g + 4 * x, g0);
    if (HasResidual) {
      C e0[4];
      load4(e + 4 * x, e0);
#pragma unroll
      for (int c = 0; c < 4; ++c)
        g0[c] += e0[c];
    }
    accumulateRow4<T, R, Packed>(acc, g0, q, 4 * x, p.r, p.column, cols, 4);
  }
}

/// A row is split over p.threadsPerRow threads (a block holds
/// kThreads / threadsPerRow rows); each thread keeps R sums; warp shuffles
/// and a fixed-order pass over the row's warps finish them.
template <typename T, int R, bool HasResidual>
__global__ void __launch_bounds__(kThreads, 2)
    projectKernel(Launch<Projection> launch, int64_t blocks) {
  using C = typename Device<T>::Compute;
  __shared__ C warpSums[kThreads / 32][R];
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    int t = findTensor(launch, block);
    const Projection &p = launch.tensors[t];
    const int tpr = p.threadsPerRow;
    const int rowInBlock = threadIdx.x / tpr, lane = threadIdx.x % tpr;
    int64_t row =
        (block - launch.firstBlock[t]) * (kThreads / tpr) + rowInBlock;
    const int cols = int(min(p.r - p.column, int64_t(R)));
    C acc[R];
#pragma unroll
    for (int k = 0; k < R; ++k)
      acc[k] = C(0);
    if (row < p.n) {
      if (p.vector && p.factorAligned && p.column == 0 && p.r == R)
        projectRowVector<T, R, HasResidual, true>(p, row, lane, cols, acc);
      else if (p.vector)
        projectRowVector<T, R, HasResidual, false>(p, row, lane, cols, acc);
      else {
        const T *g = static_cast<const T *>(p.g) + row * p.m;
        const T *e =
            HasResidual ? static_cast<const T *>(p.e) + row * p.m : nullptr;
        const T *q = static_cast<const T *>(p.factor);
        for (int64_t j = lane; j < p.m; j += tpr) {
          C v[4] = {Device<T>::load(g[j]), C(0), C(0), C(0)};
          if (HasResidual)
            v[0] += Device<T>::load(e[j]);
          accumulateRow4<T, R, false>(acc, v, q, j, p.r, p.column, cols, 1);
        }
      }
    }
    // Every thread of the block reaches the reduction (rows past the end
    // add zeros), so the barriers below are uniform.
    const int warp = threadIdx.x / 32;
#pragma unroll
    for (int k = 0; k < R; ++k) {
      C total = warpSum(acc[k]);
      if (threadIdx.x % 32 == 0)
        warpSums[warp][k] = total;
    }
    __syncthreads();
    if (lane < cols && row < p.n) {
      const int firstWarp = rowInBlock * tpr / 32;
      C total = C(0);
      for (int w = 0; w < tpr / 32; ++w)
        total += warpSums[firstWarp + w][lane];
      static_cast<T *>(p.out)[row * p.r + p.column + lane] =
          Device<T>::store(total);
    }
    __syncthreads();
  }
}

//===--- backproject: Q = (G + E)^T P ------------------------------------===//

struct BackProjection {
  const void *g, *e, *factor;
  void *out;
  void *partials; // [chunks][m][R] in the compute type, for this tensor
  int64_t n, m, r, column, chunks, strips;
  bool vector;
};

constexpr int kStripRows = 32;
constexpr int kStripColumns = 32 * 4;
constexpr int kStripBatch = 4; // rows whose loads are in flight together

/// 4 consecutive elements of M = G (+ E) from `index` (the first `valid`).
template <typename T, bool HasResidual, bool Vector>
__device__ void loadM4(const T *g, const T *e, int64_t index, int valid,
                       typename Device<T>::Compute v[4]) {
  using C = typename Device<T>::Compute;
  if constexpr (Vector) {
    load4(g + index, v);
    if (HasResidual) {
      C w[4];
      load4(e + index, w);
#pragma unroll
      for (int c = 0; c < 4; ++c)
        v[c] += w[c];
    }
  } else {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      v[c] = c < valid ? Device<T>::load(g[index + c]) : C(0);
      if (HasResidual && c < valid)
        v[c] += Device<T>::load(e[index + c]);
    }
  }
}

/// acc[c][k] += M[i][j + c] * P[i][column + k] over the strip's rows,
/// kStripBatch rows loaded before they are used.
template <typename T, int R, bool HasResidual, bool Vector>
__device__ void backprojectStrip(const BackProjection &b, int64_t rowBegin,
                                 int rows, int64_t j, int valid, int cols,
                                 typename Device<T>::Compute acc[4][R]) {
  using C = typename Device<T>::Compute;
  const T *g = static_cast<const T *>(b.g);
  const T *e = static_cast<const T *>(b.e);
  const T *p = static_cast<const T *>(b.factor) + rowBegin * b.r + b.column;
  int i = 0;
  for (; i + kStripBatch <= rows; i += kStripBatch) {
    C v[kStripBatch][4], pk[kStripBatch][R];
#pragma unroll
    for (int u = 0; u < kStripBatch; ++u)
      loadM4<T, HasResidual, Vector>(g, e, (rowBegin + i + u) * b.m + j, valid,
                                     v[u]);
#pragma unroll
    for (int u = 0; u < kStripBatch; ++u)
#pragma unroll
      for (int k = 0; k < R; ++k)
        pk[u][k] =
            k < cols ? Device<T>::load(__ldg(p + (i + u) * b.r + k)) : C(0);
#pragma unroll
    for (int u = 0; u < kStripBatch; ++u)
#pragma unroll
      for (int c = 0; c < 4; ++c)
#pragma unroll
        for (int k = 0; k < R; ++k)
          acc[c][k] += v[u][c] * pk[u][k];
  }
  for (; i < rows; ++i) {
    C v[4];
    loadM4<T, HasResidual, Vector>(g, e, (rowBegin + i) * b.m + j, valid, v);
#pragma unroll
    for (int k = 0; k < R; ++k) {
      C pk = k < cols ? Device<T>::load(__ldg(p + i * b.r + k)) : C(0);
#pragma unroll
      for (int c = 0; c < 4; ++c)
        acc[c][k] += v[c] * pk;
    }
  }
}

/// A warp streams a strip of kStripRows rows x kStripColumns columns (4 per
/// lane) and writes r sums per column for its chunk of rows; blocks hold
/// kThreads / 32 independent strips. P's rows are read by all lanes at
/// once (a broadcast from the L1 cache).
template <typename T, int R, bool HasResidual>
__global__ void __launch_bounds__(kThreads)
    backprojectPartialKernel(Launch<BackProjection> launch, int64_t blocks) {
  using C = typename Device<T>::Compute;
  constexpr int kWarps = kThreads / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    int t = findTensor(launch, block);
    const BackProjection &b = launch.tensors[t];
    int64_t task = (block - launch.firstBlock[t]) * kWarps + warp;
    if (task >= b.chunks * b.strips)
      continue;
    int64_t chunk = task / b.strips, strip = task % b.strips;
    int64_t rowBegin = chunk * kStripRows;
    int rows = int(min(b.n - rowBegin, int64_t(kStripRows)));
    int64_t j = strip * kStripColumns + 4 * lane;
    int valid = int(min(b.m - j, int64_t(4)));
    if (valid <= 0)
      continue;
    const int cols = int(min(b.r - b.column, int64_t(R)));
    C acc[4][R];
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
      for (int k = 0; k < R; ++k)
        acc[c][k] = C(0);
    if (b.vector && valid == 4)
      backprojectStrip<T, R, HasResidual, true>(b, rowBegin, rows, j, valid,
                                                cols, acc);
    else
      backprojectStrip<T, R, HasResidual, false>(b, rowBegin, rows, j, valid,
                                                 cols, acc);
    C *partials = static_cast<C *>(b.partials) + (chunk * b.m + j) * R;
#pragma unroll
    for (int c = 0; c < 4; ++c)
      if (c < valid)
#pragma unroll
        for (int k = 0; k < R; ++k)
          partials[c * R + k] = acc[c][k];
  }
}

constexpr int kSumOutputs = 32; // outputs (j, k) a block of the sum finishes

/// Q[j][column + k] = the sum over chunks of the partials. A block finishes
/// kSumOutputs consecutive (j, k), one per lane; warp w adds the chunks
/// w, w + 8, ... in order, and the warps' sums are added in warp order:
/// a fixed order whatever the launch, with every warp's loads coalesced.
template <typename T, int R>
__global__ void __launch_bounds__(kThreads)
    backprojectSumKernel(Launch<BackProjection> launch, int64_t blocks) {
  using C = typename Device<T>::Compute;
  constexpr int kWarps = kThreads / 32;
  __shared__ C sums[kWarps][kSumOutputs];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    int t = findTensor(launch, block);
    const BackProjection &b = launch.tensors[t];
    int64_t index =
        (block - launch.firstBlock[t]) * kSumOutputs + lane; // j * R + k
    const C *partials = static_cast<const C *>(b.partials);
    C sum = C(0);
    if (index < b.m * R) {
      const int64_t stride = b.m * R;
      int64_t c = warp;
      for (; c + 3 * kWarps < b.chunks; c += 4 * kWarps) {
        C a0 = partials[c * stride + index];
        C a1 = partials[(c + kWarps) * stride + index];
        C a2 = partials[(c + 2 * kWarps) * stride + index];
        C a3 = partials[(c + 3 * kWarps) * stride + index];
        sum = (((sum + a0) + a1) + a2) + a3;
      }
      for (; c < b.chunks; c += kWarps)
        sum += partials[c * stride + index];
    }
    sums[warp][lane] = sum;
    __syncthreads();
    if (warp == 0 && index < b.m * R) {
      C total = C(0);
      for (int w = 0; w < kWarps; ++w)
        total += sums[w][lane];
      int64_t j = index / R;
      int k = int(index % R);
      if (k < b.r - b.column)
        static_cast<T *>(b.out)[j * b.r + b.column + k] =
            Device<T>::store(total);
    }
    __syncthreads();
  }
}

//===--- orthogonalize ---------------------------------------------------===//

struct Orthogonalization {
  void *data;
  double *work; // n x r working copy in f64
  int64_t n, r;
};

constexpr int kOrthThreads = 512;
/// Dot products reduced together per pass (with the norm of column j).
constexpr int kOrthGroup = 16;

/// Sums `count` <= kOrthGroup + 1 values over the block in a fixed order (warp
/// shuffles, then the warps in order); every thread gets the totals.
__device__ void blockSums(double values[kOrthGroup + 1], int count,
                          double (*shared)[kOrthGroup + 1], double *totals) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k <= kOrthGroup; ++k)
    if (k < count) {
      double v = warpSum(values[k]);
      if (lane == 0)
        shared[warp][k] = v;
    }
  __syncthreads();
  if (threadIdx.x < count) {
    double total = 0.0;
    for (int w = 0; w < kOrthThreads / 32; ++w)
      total += shared[w][threadIdx.x];
    totals[threadIdx.x] = total;
  }
  __syncthreads();
}

__device__ double blockMax(double value, double *shared) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    value = fmax(value, __shfl_down_sync(0xffffffffu, value, offset));
  if (lane == 0)
    shared[warp] = value;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kOrthThreads / 32; ++w)
    total = fmax(total, shared[w]);
  __syncthreads();
  return total;
}

/// One block per matrix: modified Gram-Schmidt as the CPU kernel does it
/// (zero columns stay zero, a non-finite column becomes NaN and so does
/// every later column), in f64 on a working copy.
///
/// Column j needs one reduction: its squared norm s and its raw dot
/// products d_k with the later columns, after which a_j /= (|a_j| + eps)
/// and a_k -= (d_k / (|a_j| + eps)) a_j. For f32/f16/bf16 data the f64
/// squares can neither overflow nor underflow, so s is summed unscaled
/// (s is 0 exactly for a zero column and non-finite exactly for a
/// non-finite one); f64 data takes the CPU kernel's scaled norm and a
/// second reduction for the dot products of the normalized column.
template <typename T>
__global__ void __launch_bounds__(kOrthThreads)
    orthogonalizeKernel(Launch<Orthogonalization> launch, int64_t blocks,
                        double epsilon) {
  constexpr bool kScaled = std::is_same_v<T, double>;
  __shared__ double shared[kOrthThreads / 32][kOrthGroup + 1];
  __shared__ double totals[kOrthGroup + 1];
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    const Orthogonalization &o = launch.tensors[findTensor(launch, block)];
    T *data = static_cast<T *>(o.data);
    double *a = o.work;
    const int64_t n = o.n, r = o.r;
    for (int64_t i = threadIdx.x; i < n * r; i += blockDim.x)
      a[i] = double(Device<T>::load(data[i]));
    __syncthreads();
    for (int64_t j = 0; j < r; ++j) {
      double inverse;
      bool zero = false;
      if constexpr (kScaled) {
        double largest = 0.0, nonFinite = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
          double v = a[i * r + j];
          if (!isfinite(v))
            nonFinite = 1.0;
          else
            largest = fmax(largest, fabs(v));
        }
        largest = blockMax(largest, &shared[0][0]);
        nonFinite = blockMax(nonFinite, &shared[0][0]);
        zero = nonFinite == 0.0 && largest == 0.0;
        double norm = nan("");
        if (!zero && nonFinite == 0.0) {
          double squares[kOrthGroup + 1] = {0.0};
          for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            double scaled = a[i * r + j] / largest;
            squares[0] += scaled * scaled;
          }
          blockSums(squares, 1, shared, totals);
          norm = largest * sqrt(totals[0]);
        }
        inverse = 1.0 / (norm + epsilon);
      }
      // Passes over groups of later columns; with unscaled data the first
      // pass also sums the squares of column j.
      bool needNorm = !kScaled;
      for (int64_t begin = j + 1; needNorm || begin < r;) {
        int count = int(min(int64_t(kOrthGroup), r - begin));
        // sums[0]: the squares of column j (first pass, unscaled data);
        // sums[1 + k]: its dot product with column begin + k.
        double sums[kOrthGroup + 1];
#pragma unroll
        for (int k = 0; k <= kOrthGroup; ++k)
          sums[k] = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
          // Scaled: dot products of the normalized column, as the CPU does.
          double aj = kScaled ? a[i * r + j] * inverse : a[i * r + j];
          if (needNorm)
            sums[0] += aj * aj;
#pragma unroll
          for (int k = 0; k < kOrthGroup; ++k)
            if (k < count)
              sums[1 + k] += aj * a[i * r + begin + k];
        }
        blockSums(sums, 1 + count, shared, totals);
        if (needNorm) {
          double squares = totals[0];
          zero = squares == 0.0;
          inverse =
              1.0 / ((isfinite(squares) ? sqrt(squares) : nan("")) + epsilon);
        }
        // Unscaled: the raw dot products times 1 / (|a_j| + eps) are those
        // of the normalized column.
        double toNormalized = kScaled ? 1.0 : inverse;
        if (!zero)
          for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            double aj = a[i * r + j] * inverse;
            for (int k = 0; k < count; ++k)
              a[i * r + begin + k] -= totals[1 + k] * toNormalized * aj;
          }
        __syncthreads();
        begin += count;
        needNorm = false;
      }
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        a[i * r + j] = zero ? 0.0 : a[i * r + j] * inverse;
      __syncthreads();
    }
    for (int64_t i = threadIdx.x; i < n * r; i += blockDim.x)
      data[i] = Device<T>::store(typename Device<T>::Compute(a[i]));
    __syncthreads();
  }
}

//===--- reconstruct (+ residual) ----------------------------------------===//

struct Reconstruction {
  const void *p, *q, *g;
  void *e, *out;
  int64_t n, m, r;
  int64_t segments;  // per row, of 4 * threadsPerRow columns
  int threadsPerRow; // 32..kThreads: short rows share a block
  bool vector;
  bool factorAligned; // Q starts on a 16-byte boundary
};

/// Threads per row for reconstruct: 4 columns each, a block's worth for
/// rows of over 512 columns, fewer (and several rows a block) for short
/// ones, so that few threads idle.
int reconstructThreadsPerRow(int64_t m) {
  int threads = kThreads;
  while (threads > 32 && 4 * (threads / 2) >= m)
    threads /= 2;
  return threads;
}

/// A block per (group of kThreads / threadsPerRow rows, segment of
/// 4 * threadsPerRow columns); a thread makes 4 consecutive elements of
/// M_hat = P Q^T from P's row (read by the row's threads at once) and 4
/// rows of Q, and with the residual E' = G + E - M_hat in
/// the same pass (`out` may alias `g`: each element is read before it is
/// written, by the same thread). R > 0 unrolls the rank; R == 0 loops.
template <typename T, int R, bool HasResidual>
__global__ void __launch_bounds__(kThreads)
    reconstructKernel(Launch<Reconstruction> launch, int64_t blocks) {
  using C = typename Device<T>::Compute;
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x) {
    int t = findTensor(launch, block);
    const Reconstruction &c = launch.tensors[t];
    int64_t local = block - launch.firstBlock[t];
    const int tpr = c.threadsPerRow;
    int64_t row = (local / c.segments) * (kThreads / tpr) + threadIdx.x / tpr;
    int64_t j = (local % c.segments) * (4 * tpr) + 4 * (threadIdx.x % tpr);
    if (row >= c.n || j >= c.m)
      continue;
    int valid = int(min(c.m - j, int64_t(4)));
    const T *p = static_cast<const T *>(c.p) + row * c.r;
    const T *q = static_cast<const T *>(c.q) + j * c.r;
    C mHat[4] = {C(0), C(0), C(0), C(0)};
    if constexpr (R > 0) {
      C pk[R];
#pragma unroll
      for (int k = 0; k < R; ++k)
        pk[k] = k < c.r ? Device<T>::load(__ldg(p + k)) : C(0);
      if (c.r == R && c.factorAligned && valid == 4) {
        // Q's 4 rows are 4R contiguous elements: whole-word loads.
        C block[4][R];
        loadFactorBlock<T, R>(q, block);
#pragma unroll
        for (int x = 0; x < 4; ++x)
#pragma unroll
          for (int k = 0; k < R; ++k)
            mHat[x] += pk[k] * block[x][k];
      } else {
#pragma unroll
        for (int x = 0; x < 4; ++x)
          if (x < valid)
#pragma unroll
            for (int k = 0; k < R; ++k)
              if (k < c.r)
                mHat[x] += pk[k] * Device<T>::load(__ldg(q + x * c.r + k));
      }
    } else {
      for (int64_t k = 0; k < c.r; ++k) {
        C pk = Device<T>::load(__ldg(p + k));
#pragma unroll
        for (int x = 0; x < 4; ++x)
          if (x < valid)
            mHat[x] += pk * Device<T>::load(__ldg(q + x * c.r + k));
      }
    }
    int64_t index = row * c.m + j;
    T *out = static_cast<T *>(c.out) + index;
    if (c.vector && valid == 4) {
      if (HasResidual) {
        T *e = static_cast<T *>(c.e) + index;
        C gv[4], ev[4];
        load4(static_cast<const T *>(c.g) + index, gv);
        load4(e, ev);
#pragma unroll
        for (int x = 0; x < 4; ++x)
          ev[x] = (gv[x] + ev[x]) - mHat[x];
        store4(e, ev);
      }
      store4(out, mHat);
      continue;
    }
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      if (x >= valid)
        break;
      if (HasResidual) {
        T *e = static_cast<T *>(c.e) + index;
        C sum = Device<T>::load(static_cast<const T *>(c.g)[index + x]) +
                Device<T>::load(e[x]);
        e[x] = Device<T>::store(sum - mHat[x]);
      }
      out[x] = Device<T>::store(mHat[x]);
    }
  }
}

//===--- random normal ---------------------------------------------------===//

template <typename T>
__global__ void randomNormalKernel(T *out, int64_t numel, PhiloxKey key,
                                   uint64_t step) {
  int64_t quad = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (quad * 4 >= numel)
    return;
  double samples[4];
  normalQuad(key, step, uint64_t(quad), samples);
  for (int k = 0; k < 4 && quad * 4 + k < numel; ++k)
    out[quad * 4 + k] =
        Device<T>::store(typename Device<T>::Compute(samples[k]));
}

/// Whether `pointer` can be read 4 elements of `code` at a time.
bool alignedFor(int code, const void *pointer) {
  return reinterpret_cast<uintptr_t>(pointer) %
             (4 * ddprt_dtype_size(ddprt_dtype(code))) ==
         0;
}

/// Whether every row of `g` (and of its residual) starts aligned to 4
/// elements, so the kernels may read them 4 at a time.
bool rowsAligned(const ddprt_matrix &g, const ddprt_matrix *residual) {
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

} // namespace

//===--- Scratch ---------------------------------------------------------===//

Scratch::~Scratch() { release(); }

void Scratch::release() {
  // cudaFree waits for the device, and so for the work that used it.
  if (device_)
    cudaFree(device_);
  device_ = nullptr;
  deviceBytes_ = 0;
}

cudaError_t Scratch::device(size_t bytes, cudaStream_t stream, void **pointer) {
  if (bytes > deviceBytes_) {
    // Stream-ordered: the old buffer is freed after the work already
    // enqueued on `stream` that uses it, with no device-wide wait.
    size_t previous = deviceBytes_;
    if (device_) {
      if (cudaError_t error = cudaFreeAsync(device_, stream))
        return error;
      device_ = nullptr;
      deviceBytes_ = 0;
    }
    // Grow geometrically so that a slowly growing need reallocates rarely.
    size_t size = std::max(bytes, previous + previous / 2);
    if (cudaError_t error = cudaMallocAsync(&device_, size, stream))
      return error;
    deviceBytes_ = size;
  }
  *pointer = device_;
  return cudaSuccess;
}

//===--- Launchers -------------------------------------------------------===//

cudaError_t cast(double factor, const ddprt_buffer *inputs,
                 const ddprt_buffer *outputs, int count, Scratch &,
                 cudaStream_t stream) {
  // Group by (input, output) dtype: one launch sequence per pair.
  for (int fromCode = 0; fromCode < 4; ++fromCode)
    for (int toCode = 0; toCode < 4; ++toCode) {
      std::vector<Elementwise> tensors;
      for (int i = 0; i < count; ++i)
        if (inputs[i].dtype == fromCode && outputs[i].dtype == toCode &&
            inputs[i].numel > 0)
          tensors.push_back({inputs[i].data, outputs[i].data, inputs[i].numel,
                             alignedFor(fromCode, inputs[i].data) &&
                                 alignedFor(toCode, outputs[i].data)});
      if (tensors.empty())
        continue;
      bool wide = fromCode == DDPRT_F64 || toCode == DDPRT_F64;
      auto blocksOf = [](const Elementwise &e) {
        return ceilDiv(e.numel, kCastBlockElements);
      };
      cudaError_t error = dispatch(ddprt_dtype(fromCode), [&](auto inTag) {
        using In = decltype(inTag);
        return dispatch(ddprt_dtype(toCode), [&](auto outTag) {
          using Out = decltype(outTag);
          if (wide)
            return launchAll(
                tensors, blocksOf,
                [&](const Launch<Elementwise> &launch, int64_t blocks) {
                  castKernel<In, Out, double>
                      <<<gridFor(blocks), kThreads, 0, stream>>>(launch, blocks,
                                                                 factor);
                });
          return launchAll(
              tensors, blocksOf,
              [&](const Launch<Elementwise> &launch, int64_t blocks) {
                castKernel<In, Out, float>
                    <<<gridFor(blocks), kThreads, 0, stream>>>(launch, blocks,
                                                               float(factor));
              });
        });
      });
      if (error)
        return error;
    }
  return cudaSuccess;
}

cudaError_t scale(double factor, const ddprt_buffer *buffers, int count,
                  Scratch &scratch, cudaStream_t stream) {
  // An in-place cast to the same type.
  return cast(factor, buffers, buffers, count, scratch, stream);
}

cudaError_t project(const ddprt_matrix *matrices, const ddprt_matrix *residuals,
                    const ddprt_matrix *qs, const ddprt_matrix *ps, int count,
                    Scratch &, cudaStream_t stream) {
  // Rows of no elements project to zero (no kernel visits them).
  for (int i = 0; i < count; ++i)
    if (matrices[i].cols == 0 && matrices[i].rows > 0 && qs[i].cols > 0)
      if (cudaError_t error = cudaMemsetAsync(ps[i].data, 0,
                                              size_t(ps[i].rows * ps[i].cols) *
                                                  ddprt_dtype_size(ps[i].dtype),
                                              stream))
        return error;
  // Tensors grouped by dtype and rank chunk: one launch sequence each.
  for (int code = 0; code < 4; ++code) {
    int64_t maxRank = 0;
    for (int i = 0; i < count; ++i)
      if (matrices[i].dtype == code)
        maxRank = std::max(maxRank, qs[i].cols);
    for (int64_t column = 0; column < maxRank; column += kMaxRankPerLaunch) {
      std::vector<Projection> tensors;
      int64_t widest = 0;
      for (int i = 0; i < count; ++i)
        if (matrices[i].dtype == code && qs[i].cols > column &&
            matrices[i].rows > 0 && matrices[i].cols > 0) {
          const ddprt_matrix &g = matrices[i];
          bool vector = rowsAligned(g, residuals ? &residuals[i] : nullptr);
          tensors.push_back(
              {g.data, residuals ? residuals[i].data : nullptr, qs[i].data,
               ps[i].data, g.rows, g.cols, qs[i].cols, column,
               threadsPerRowFor(g.cols), vector,
               reinterpret_cast<uintptr_t>(qs[i].data) % 16 == 0});
          widest = std::max(widest, qs[i].cols - column);
        }
      if (tensors.empty())
        continue;
      cudaError_t error = dispatch(ddprt_dtype(code), [&](auto tag) {
        using T = decltype(tag);
        return withRank(widest, [&](auto rankTag) {
          constexpr int R = decltype(rankTag)::value;
          auto blocksOf = [](const Projection &p) {
            return ceilDiv(p.n, kThreads / p.threadsPerRow);
          };
          return launchAll(
              tensors, blocksOf,
              [&](const Launch<Projection> &launch, int64_t blocks) {
                if (residuals)
                  projectKernel<T, R, true>
                      <<<gridFor(blocks), kThreads, 0, stream>>>(launch,
                                                                 blocks);
                else
                  projectKernel<T, R, false>
                      <<<gridFor(blocks), kThreads, 0, stream>>>(launch,
                                                                 blocks);
              });
        });
      });
      if (error)
        return error;
    }
  }
  return cudaSuccess;
}

cudaError_t backproject(const ddprt_matrix *matrices,
                        const ddprt_matrix *residuals, const ddprt_matrix *ps,
                        const ddprt_matrix *qs, int count, Scratch &scratch,
                        cudaStream_t stream) {
  for (int code = 0; code < 4; ++code) {
    int64_t maxRank = 0;
    for (int i = 0; i < count; ++i)
      if (matrices[i].dtype == code)
        maxRank = std::max(maxRank, ps[i].cols);
    size_t computeSize = code == DDPRT_F64 ? sizeof(double) : sizeof(float);
    for (int64_t column = 0; column < maxRank; column += kMaxRankPerLaunch) {
      int64_t widest = 0;
      for (int i = 0; i < count; ++i)
        if (matrices[i].dtype == code && ps[i].cols > column)
          widest = std::max(widest, ps[i].cols - column);
      cudaError_t error = withRank(widest, [&](auto rankTag) {
        constexpr int R = decltype(rankTag)::value;
        std::vector<BackProjection> tensors;
        size_t partialBytes = 0;
        for (int i = 0; i < count; ++i) {
          const ddprt_matrix &g = matrices[i];
          if (g.dtype != code || ps[i].cols <= column || g.cols == 0)
            continue;
          bool vector = rowsAligned(g, residuals ? &residuals[i] : nullptr);
          BackProjection b{g.data,
                           residuals ? residuals[i].data : nullptr,
                           ps[i].data,
                           qs[i].data,
                           nullptr,
                           g.rows,
                           g.cols,
                           ps[i].cols,
                           column,
                           std::max<int64_t>(1, ceilDiv(g.rows, kStripRows)),
                           ceilDiv(g.cols, kStripColumns),
                           vector};
          // Offsets now; the base pointer once the scratch is sized.
          b.partials = reinterpret_cast<void *>(partialBytes);
          partialBytes += size_t(b.chunks * g.cols) * R * computeSize;
          tensors.push_back(b);
        }
        if (tensors.empty())
          return cudaSuccess;
        void *base = nullptr;
        if (cudaError_t e = scratch.device(partialBytes, stream, &base))
          return e;
        for (BackProjection &b : tensors)
          b.partials =
              static_cast<char *>(base) + reinterpret_cast<size_t>(b.partials);
        return dispatch(ddprt_dtype(code), [&](auto tag) {
          using T = decltype(tag);
          auto partialBlocks = [](const BackProjection &b) {
            return ceilDiv(b.chunks * b.strips, kThreads / 32);
          };
          if (cudaError_t e = launchAll(
                  tensors, partialBlocks,
                  [&](const Launch<BackProjection> &launch, int64_t blocks) {
                    if (residuals)
                      backprojectPartialKernel<T, R, true>
                          <<<gridFor(blocks), kThreads, 0, stream>>>(launch,
                                                                     blocks);
                    else
                      backprojectPartialKernel<T, R, false>
                          <<<gridFor(blocks), kThreads, 0, stream>>>(launch,
                                                                     blocks);
                  }))
            return e;
          auto sumBlocks = [&](const BackProjection &b) {
            return ceilDiv(b.m * R, kSumOutputs);
          };
          return launchAll(
              tensors, sumBlocks,
              [&](const Launch<BackProjection> &launch, int64_t blocks) {
                backprojectSumKernel<T, R>
                    <<<gridFor(blocks), kThreads, 0, stream>>>(launch, blocks);
              });
        });
      });
      if (error)
        return error;
    }
  }
  return cudaSuccess;
}

cudaError_t orthogonalize(const ddprt_matrix *ps, int count, double epsilon,
                          Scratch &scratch, cudaStream_t stream) {
  size_t workBytes = 0;
  for (int i = 0; i < count; ++i)
    workBytes += size_t(ps[i].rows * ps[i].cols) * sizeof(double);
  void *base = nullptr;
  if (cudaError_t error =
          scratch.device(std::max<size_t>(workBytes, 8), stream, &base))
    return error;
  for (int code = 0; code < 4; ++code) {
    std::vector<Orthogonalization> tensors;
    size_t offset = 0;
    for (int i = 0; i < count; ++i) {
      size_t bytes = size_t(ps[i].rows * ps[i].cols) * sizeof(double);
      if (ps[i].dtype == code && bytes > 0)
        tensors.push_back(
            {ps[i].data,
             reinterpret_cast<double *>(static_cast<char *>(base) + offset),
             ps[i].rows, ps[i].cols});
      offset += bytes;
    }
    if (tensors.empty())
      continue;
    cudaError_t error = dispatch(ddprt_dtype(code), [&](auto tag) {
      using T = decltype(tag);
      return launchAll(
          tensors, [](const Orthogonalization &) { return int64_t(1); },
          [&](const Launch<Orthogonalization> &launch, int64_t blocks) {
            orthogonalizeKernel<T>
                <<<gridFor(blocks), kOrthThreads, 0, stream>>>(launch, blocks,
                                                               epsilon);
          });
    });
    if (error)
      return error;
  }
  return cudaSuccess;
}

cudaError_t reconstruct(const ddprt_matrix *ps, const ddprt_matrix *qs,
                        const ddprt_matrix *matrices,
                        const ddprt_matrix *residuals,
                        const ddprt_matrix *reconstructions, int count,
                        Scratch &, cudaStream_t stream) {
  for (int code = 0; code < 4; ++code) {
    std::vector<Reconstruction> tensors;
    int64_t widest = 0;
    for (int i = 0; i < count; ++i)
      if (ps[i].dtype == code && ps[i].rows * qs[i].rows > 0) {
        const void *g = matrices ? matrices[i].data : nullptr;
        void *e = residuals ? residuals[i].data : nullptr;
        void *out = reconstructions[i].data;
        int64_t m = qs[i].rows;
        bool vector = m % 4 == 0 && alignedFor(code, out) &&
                      (!g || alignedFor(code, g)) &&
                      (!e || alignedFor(code, e));
        tensors.push_back({ps[i].data, qs[i].data, g, e, out, ps[i].rows, m,
                           ps[i].cols, 0, reconstructThreadsPerRow(m), vector,
                           reinterpret_cast<uintptr_t>(qs[i].data) % 16 == 0});
        widest = std::max(widest, ps[i].cols);
      }
    if (tensors.empty())
      continue;
    for (Reconstruction &c : tensors)
      c.segments = ceilDiv(c.m, 4 * c.threadsPerRow);
    auto blocksOf = [](const Reconstruction &c) {
      return ceilDiv(c.n, kThreads / c.threadsPerRow) * c.segments;
    };
    cudaError_t error = dispatch(ddprt_dtype(code), [&](auto tag) {
      using T = decltype(tag);
      auto run = [&](auto rankTag) {
        constexpr int R = decltype(rankTag)::value;
        return launchAll(
            tensors, blocksOf,
            [&](const Launch<Reconstruction> &launch, int64_t blocks) {
              if (residuals)
                reconstructKernel<T, R, true>
                    <<<gridFor(blocks), kThreads, 0, stream>>>(launch, blocks);
              else
                reconstructKernel<T, R, false>
                    <<<gridFor(blocks), kThreads, 0, stream>>>(launch, blocks);
            });
      };
      if (widest > kMaxRankPerLaunch)
        return run(std::integral_constant<int, 0>{});
      return withRank(widest, run);
    });
    if (error)
      return error;
  }
  return cudaSuccess;
}

cudaError_t randomNormal(const ddprt_buffer &output, uint64_t seed,
                         uint64_t streamId, uint64_t step,
                         cudaStream_t stream) {
  if (output.numel == 0)
    return cudaSuccess;
  PhiloxKey key = philoxKeyFor(seed, streamId);
  int64_t quads = ceilDiv(output.numel, 4);
  unsigned grid = unsigned(ceilDiv(quads, kThreads));
  beginLaunches();
  return dispatch(output.dtype, [&](auto tag) {
    using T = decltype(tag);
    randomNormalKernel<T><<<grid, kThreads, 0, stream>>>(
        static_cast<T *>(output.data), output.numel, key, step);
    return launchError();
  });
}

} // namespace ddprt::cuda
