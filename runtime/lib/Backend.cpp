//===- Backend.cpp - what every backend shares ----------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "Backend.h"

#include "HostArithmetic.h"

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

} // namespace ddprt
