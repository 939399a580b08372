//===- Backend.cpp - what every backend shares ----------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "Backend.h"

#include "HostArithmetic.h"

#include <string>
#include <vector>

namespace ddprt {

Error Backend::inspect(const ddprt_buffer *buffers, int count, bool *finite,
                       bool *nonzero) {
  std::vector<char> host;
  for (int i = 0; i < count; ++i) {
    const ddprt_buffer &buffer = buffers[i];
    host.resize(size_t(buffer.numel) * ddprt_dtype_size(buffer.dtype));
    DDPRT_TRY(copyToHost(host.data(), buffer.data, host.size()));
    inspectHost(ddprt_buffer{host.data(), buffer.dtype, buffer.numel},
                finite[i], nonzero[i]);
  }
  return Error::success();
}

Error Backend::launchKernel(const void *, const char *name, const int64_t[3],
                            const int64_t[3], int32_t, void **) {
  return fail(DDPRT_ERROR_UNSUPPORTED,
              std::string("ddprt_launch_kernel: kernel '") + name +
                  "' was compiled for a GPU (ddp-lower-to-llvm{target=cuda}); "
                  "this backend runs no device code: lower the step for the "
                  "CPU, or run it with the CUDA backend");
}

} // namespace ddprt
