//===- Counters.cpp - what the C ABI counts -------------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "Counters.h"

namespace ddprt {

void countCollective(ddprt_counters &counters, ddprt_role role,
                     const ddprt_buffer *buffers, int count) {
  uint64_t elements = 0, bytes = 0;
  for (int i = 0; i < count; ++i) {
    elements += uint64_t(buffers[i].numel);
    bytes += uint64_t(buffers[i].numel) * ddprt_dtype_size(buffers[i].dtype);
  }
  counters.collectives[role] += 1;
  counters.elements_sent[role] += elements;
  counters.bytes_sent[role] += bytes;
  counters.elements_after_compression += elements;
  // What a scheme sends instead of its gradients counts after compression
  // only (project and ddprt_count_uncompressed counted them before).
  if (role != DDPRT_ROLE_COMPRESSED)
    counters.elements_before_compression += elements;
}

void countProjection(ddprt_counters &counters, const ddprt_matrix *matrices,
                     int count) {
  for (int i = 0; i < count; ++i)
    counters.elements_before_compression +=
        uint64_t(matrices[i].rows * matrices[i].cols);
}

} // namespace ddprt
