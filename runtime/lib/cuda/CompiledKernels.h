//===- CompiledKernels.h - kernels a compiled step brings -------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The device code the compiler embeds in a step (ddp-lower-to-llvm
// {target=cuda}: PTX for sm_90) and launches through ddprt_launch_kernel.
// Each image is loaded once (a CUDA library: cudaLibraryLoadData, which
// the driver JIT-compiles from PTX for this device), each kernel looked up
// once, and both kept until the backend goes.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_CUDA_COMPILEDKERNELS_H
#define DDPRT_CUDA_COMPILEDKERNELS_H

#include "../Error.h"

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <utility>

namespace ddprt::cuda {

class CompiledKernels {
public:
  CompiledKernels() = default;
  CompiledKernels(const CompiledKernels &) = delete;
  CompiledKernels &operator=(const CompiledKernels &) = delete;
  ~CompiledKernels() { release(); }

  /// Enqueues kernel `name` of `image` on `stream` (arguments checked by
  /// the C API: positive dimensions, at most 1024 threads a dimension).
  Error launch(const void *image, const char *name, const int64_t grid[3],
               const int64_t block[3], int32_t sharedBytes, void **params,
               cudaStream_t stream);

  /// Unloads every image (the device must be idle).
  void release();

private:
  std::map<const void *, cudaLibrary_t> libraries_;
  std::map<std::pair<cudaLibrary_t, std::string>, cudaKernel_t> kernels_;
};

} // namespace ddprt::cuda

#endif // DDPRT_CUDA_COMPILEDKERNELS_H
