//===- Matmul.h - the matmuls of compiled steps -----------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDPRT_HOST_MATMUL_H
#define DDPRT_HOST_MATMUL_H

#include "MemRef.h"

#include <cstdint>

namespace stephost {

/// ddprt_step_matmul_f32, what a step's f32 contractions call: C += A B on
/// three unranked memrefs of rank 2 (m x k, k x n, m x n) or 3 (a batch of
/// those), each passed as (rank, descriptor) as func.call passes an
/// unranked memref. Failures go to ddprt_fail / ddprt_check with the
/// current context.
void hostMatmulF32(int64_t aRank, void *aDescriptor, int64_t bRank,
                   void *bDescriptor, int64_t cRank, void *cDescriptor);

} // namespace stephost

#endif // DDPRT_HOST_MATMUL_H
