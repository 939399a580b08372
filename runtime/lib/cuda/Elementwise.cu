//===- Elementwise.cu - scale, cast and random normal on the GPU ----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// scale/cast: reads and writes n*m elements once, 4 elements per 16-byte
// (or narrower) access, 16 elements in flight per thread; bound by memory
// bandwidth. random normal: Philox samples, a pure function of (seed,
// stream, step, index), as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "KernelSupport.cuh"

#include "../Numeric.h"
#include "../Philox.h"

namespace ddprt::cuda {

using namespace detail;

namespace {

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

} // namespace

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
