//===- TopK.cu - top-k selection on NVIDIA GPUs ---------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// ddprt_top_k: the bits of |x| are the sort keys of a stable descending
// radix sort (CUB) of the positions, so the order is the CPU kernel's:
// largest magnitude first, equal magnitudes in index order, NaN above every
// number. The first k positions and their values are gathered into the
// outputs. Temporary memory is stream-ordered (cudaMallocAsync).
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "KernelSupport.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace ddprt::cuda {

using namespace detail;

namespace {

/// The storage bits of each dtype and the mask that clears the sign.
template <int Bytes> struct BitsOf;
template <> struct BitsOf<2> {
  using Type = uint16_t;
  static constexpr Type kMagnitude = 0x7fffu;
};
template <> struct BitsOf<4> {
  using Type = uint32_t;
  static constexpr Type kMagnitude = 0x7fffffffu;
};
template <> struct BitsOf<8> {
  using Type = uint64_t;
  static constexpr Type kMagnitude = 0x7fffffffffffffffull;
};

/// The grid for a loop over `n` elements (the kernels stride by the grid).
unsigned gridOver(int64_t n) { return gridFor(ceilDiv(n, kThreads)); }

template <typename Bits, typename Position>
__global__ void magnitudeKeys(const Bits *x, int64_t n, Bits *keys,
                              Position *positions) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    keys[i] = x[i] & BitsOf<sizeof(Bits)>::kMagnitude;
    positions[i] = Position(i);
  }
}

template <typename Bits, typename Position, typename Index>
__global__ void gatherTop(const Bits *x, const Position *sorted, int64_t k,
                          Bits *values, Index *indices) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < k;
       j += int64_t(gridDim.x) * blockDim.x) {
    Position i = sorted[j];
    values[j] = x[i];
    indices[j] = Index(i);
  }
}

/// Frees stream-ordered allocations when it goes out of scope.
struct AsyncBuffers {
  cudaStream_t stream;
  void *pointers[5] = {};
  int count = 0;
  cudaError_t allocate(size_t bytes, void **pointer) {
    cudaError_t error = cudaMallocAsync(pointer, bytes ? bytes : 1, stream);
    if (!error)
      pointers[count++] = *pointer;
    return error;
  }
  ~AsyncBuffers() {
    for (int i = 0; i < count; ++i)
      cudaFreeAsync(pointers[i], stream);
  }
};

template <typename Bits, typename Position>
cudaError_t topKWith(const ddprt_buffer &input, const ddprt_buffer &values,
                     const ddprt_buffer &indices, cudaStream_t stream) {
  int64_t n = input.numel, k = values.numel;
  AsyncBuffers scratch{stream};
  Bits *keys[2];
  Position *positions[2];
  for (int i = 0; i < 2; ++i) {
    if (cudaError_t error = scratch.allocate(
            n * sizeof(Bits), reinterpret_cast<void **>(&keys[i])))
      return error;
    if (cudaError_t error = scratch.allocate(
            n * sizeof(Position), reinterpret_cast<void **>(&positions[i])))
      return error;
  }
  const Bits *x = static_cast<const Bits *>(input.data);
  beginLaunches();
  magnitudeKeys<<<gridOver(n), kThreads, 0, stream>>>(x, n, keys[0],
                                                      positions[0]);
  if (cudaError_t error = launchError())
    return error;
  // The sign bit is clear: sort the bits below it.
  int endBit = int(sizeof(Bits) * 8 - 1);
  size_t tempBytes = 0;
  if (cudaError_t error = cub::DeviceRadixSort::SortPairsDescending(
          nullptr, tempBytes, keys[0], keys[1], positions[0], positions[1], n,
          0, endBit, stream))
    return error;
  void *temp = nullptr;
  if (cudaError_t error = scratch.allocate(tempBytes, &temp))
    return error;
  if (cudaError_t error = cub::DeviceRadixSort::SortPairsDescending(
          temp, tempBytes, keys[0], keys[1], positions[0], positions[1], n, 0,
          endBit, stream))
    return error;
  Bits *out = static_cast<Bits *>(values.data);
  beginLaunches();
  if (indices.dtype == DDPRT_I32)
    gatherTop<<<gridOver(k), kThreads, 0, stream>>>(
        x, positions[1], k, out, static_cast<int32_t *>(indices.data));
  else
    gatherTop<<<gridOver(k), kThreads, 0, stream>>>(
        x, positions[1], k, out, static_cast<int64_t *>(indices.data));
  return launchError();
}

template <typename Bits>
cudaError_t topKBits(const ddprt_buffer &input, const ddprt_buffer &values,
                     const ddprt_buffer &indices, cudaStream_t stream) {
  if (input.numel <= INT32_MAX)
    return topKWith<Bits, uint32_t>(input, values, indices, stream);
  return topKWith<Bits, uint64_t>(input, values, indices, stream);
}
} // namespace

cudaError_t topK(const ddprt_buffer &input, const ddprt_buffer &values,
                 const ddprt_buffer &indices, cudaStream_t stream) {
  switch (input.dtype) {
  case DDPRT_F16:
  case DDPRT_BF16:
    return topKBits<uint16_t>(input, values, indices, stream);
  case DDPRT_F32:
    return topKBits<uint32_t>(input, values, indices, stream);
  case DDPRT_F64:
    return topKBits<uint64_t>(input, values, indices, stream);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace ddprt::cuda
