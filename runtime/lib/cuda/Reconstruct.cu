//===- Reconstruct.cu - PowerSGD's reconstruction on the GPU
//----------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// reconstruct + residual: P Q^T, and E' = G + E - P Q^T; reads G and E,
// writes M_hat and E' (4nms bytes for an n x m gradient of s-byte elements),
// 4 elements per access; M + E is never stored; short rows share a block.
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

} // namespace

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

} // namespace ddprt::cuda
