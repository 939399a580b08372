//===- Project.cu - PowerSGD's products with the gradient, on the GPU
//-------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Per tensor, an n x m gradient G (and its residual E) at rank r, elements
// of s bytes.
//  - project (G+E)Q: reads G and E once (2nms bytes) per 8 columns of Q;
//    a row is split over 32..256 threads so that short and long rows both
//    fill the GPU; Q comes from the L1 cache, a thread's 4 rows of it in
//    whole 16-byte words where Q has exactly R columns.
//  - backproject (G+E)^T P: the same reads; each warp streams a strip of 32
//    rows x 128 columns, 4 rows' loads in flight, and writes its partial
//    sums (r floats per column per 32 rows: 1/32 of the gradient's bytes at
//    r = 2, 1/8 at r = 8), which a second kernel adds in a fixed order, 8
//    warps per 32 outputs.
// Bound by memory bandwidth: the floor of a PowerSGD step is 32 bytes per
// f32 element (G and E read by project, backproject and reconstruct; G and
// E written by reconstruct). Every reduction has a fixed order, so results
// are bitwise reproducible.
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "KernelSupport.cuh"

#include "../Numeric.h"

namespace ddprt::cuda {

using namespace detail;

namespace {

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

} // namespace

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

} // namespace ddprt::cuda
