//===- CompiledKernels.cpp - kernels a compiled step brings ---------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "CompiledKernels.h"

namespace ddprt::cuda {

namespace {

Error launchFailure(cudaError_t code, const char *what, const char *name) {
  return fail(DDPRT_ERROR_BACKEND, std::string(what) + " for kernel '" + name +
                                       "' failed: " + cudaGetErrorString(code));
}

} // namespace

Error CompiledKernels::launch(const void *image, const char *name,
                              const int64_t grid[3], const int64_t block[3],
                              int32_t sharedBytes, void **params,
                              cudaStream_t stream) {
  auto library = libraries_.find(image);
  if (library == libraries_.end()) {
    cudaLibrary_t loaded = nullptr;
    // PTX is compiled by the driver here, once: an image the driver cannot
    // compile (a newer PTX version, another architecture) fails here, with
    // the driver's reason.
    if (cudaError_t code = cudaLibraryLoadData(&loaded, image, nullptr, nullptr,
                                               0, nullptr, nullptr, 0))
      return launchFailure(code, "cudaLibraryLoadData", name);
    library = libraries_.emplace(image, loaded).first;
  }
  auto key = std::make_pair(library->second, std::string(name));
  auto kernel = kernels_.find(key);
  if (kernel == kernels_.end()) {
    cudaKernel_t found = nullptr;
    if (cudaError_t code = cudaLibraryGetKernel(&found, library->second, name))
      return launchFailure(code, "cudaLibraryGetKernel", name);
    kernel = kernels_.emplace(std::move(key), found).first;
  }
  dim3 blocks{unsigned(grid[0]), unsigned(grid[1]), unsigned(grid[2])};
  dim3 threads{unsigned(block[0]), unsigned(block[1]), unsigned(block[2])};
  if (cudaError_t code = cudaLaunchKernel(
          reinterpret_cast<const void *>(kernel->second), blocks, threads,
          params, size_t(sharedBytes), stream))
    return launchFailure(code, "cudaLaunchKernel", name);
  return Error::success();
}

void CompiledKernels::release() {
  kernels_.clear();
  for (auto &[image, library] : libraries_)
    cudaLibraryUnload(library);
  libraries_.clear();
}

} // namespace ddprt::cuda
