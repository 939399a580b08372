//===- Scratch.cu - device scratch the launchers reuse --------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"

#include <algorithm>

namespace ddprt::cuda {

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

} // namespace ddprt::cuda
