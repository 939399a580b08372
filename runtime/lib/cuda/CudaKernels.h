//===- CudaKernels.h - the compression kernels on NVIDIA GPUs ---*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Multi-tensor launchers: the tensors' descriptors travel as kernel
// parameters, up to kTensorsPerLaunch per launch, so a bucket of hundreds of
// tensors costs a handful of launches and no host-to-device copy. Arguments
// are validated by the C API; pointers are device memory; everything is
// enqueued on `stream`.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_CUDA_CUDAKERNELS_H
#define DDPRT_CUDA_CUDAKERNELS_H

#include "ddprt/ddprt.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace ddprt::cuda {

/// Device scratch the launchers reuse (partial sums, f64 working copies).
/// Stream order makes reuse safe only if every launcher given this Scratch
/// runs on the same stream: use one Scratch per stream.
class Scratch {
public:
  ~Scratch();
  /// At least `bytes` of device memory, for work enqueued on `stream`
  /// (grown in stream order, never shrunk).
  cudaError_t device(size_t bytes, cudaStream_t stream, void **pointer);
  /// Frees the memory once the device is done with it.
  void release();

private:
  void *device_ = nullptr;
  size_t deviceBytes_ = 0;
};

/// Every launcher returns cudaSuccess or the first CUDA error.
cudaError_t scale(double factor, const ddprt_buffer *buffers, int count,
                  Scratch &scratch, cudaStream_t stream);
cudaError_t cast(double factor, const ddprt_buffer *inputs,
                 const ddprt_buffer *outputs, int count, Scratch &scratch,
                 cudaStream_t stream);
cudaError_t project(const ddprt_matrix *matrices, const ddprt_matrix *residuals,
                    const ddprt_matrix *qs, const ddprt_matrix *ps, int count,
                    Scratch &scratch, cudaStream_t stream);
cudaError_t backproject(const ddprt_matrix *matrices,
                        const ddprt_matrix *residuals, const ddprt_matrix *ps,
                        const ddprt_matrix *qs, int count, Scratch &scratch,
                        cudaStream_t stream);
cudaError_t orthogonalize(const ddprt_matrix *ps, int count, double epsilon,
                          Scratch &scratch, cudaStream_t stream);
cudaError_t reconstruct(const ddprt_matrix *ps, const ddprt_matrix *qs,
                        const ddprt_matrix *matrices,
                        const ddprt_matrix *residuals,
                        const ddprt_matrix *reconstructions, int count,
                        Scratch &scratch, cudaStream_t stream);
cudaError_t randomNormal(const ddprt_buffer &output, uint64_t seed,
                         uint64_t stream, uint64_t step,
                         cudaStream_t cudaStream);
/// ddprt_top_k (TopK.cu).
cudaError_t topK(const ddprt_buffer &input, const ddprt_buffer &values,
                 const ddprt_buffer &indices, cudaStream_t stream);

} // namespace ddprt::cuda

#endif // DDPRT_CUDA_CUDAKERNELS_H
