//===- Orthogonalize.cu - PowerSGD's orthogonalization on the GPU
//-----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One block per matrix (n x r is small): modified Gram-Schmidt in f64 with
// one block reduction per column (the norm and the column's dot products
// with the later columns together), in a fixed order, so results are
// bitwise reproducible.
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "KernelSupport.cuh"

#include "../Numeric.h"

namespace ddprt::cuda {

using namespace detail;

namespace {

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

} // namespace

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

} // namespace ddprt::cuda
