//===- Kernels.h - the compression kernels on the CPU -----------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Host-memory implementations of the ddp ops. They assume arguments the C
// API has validated (sizes consistent, one dtype per tensor). The CUDA
// backend's tests use them as a second reference.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_CPU_KERNELS_H
#define DDPRT_CPU_KERNELS_H

#include "ddprt/ddprt.h"

#include <cstdint>

namespace ddprt::cpu {

/// output = convert(input * factor), the product formed in the wider type.
void cast(double factor, const ddprt_buffer &input, const ddprt_buffer &output);

/// P = (M + E) Q; `residual` may be null. Reads M and E once.
void project(const ddprt_matrix &matrix, const ddprt_matrix *residual,
             const ddprt_matrix &q, const ddprt_matrix &p);

/// Q = (M + E)^T P; `residual` may be null.
void backproject(const ddprt_matrix &matrix, const ddprt_matrix *residual,
                 const ddprt_matrix &p, const ddprt_matrix &q);

/// Modified Gram-Schmidt over the columns of `p`, in place, computed in f64:
/// each column becomes v / (|v| + epsilon); a column of norm exactly zero
/// becomes zero. Non-finite input gives NaN columns.
void orthogonalize(const ddprt_matrix &p, double epsilon);

/// M_hat = P Q^T into `reconstruction`; with `residual` (then `matrix` too),
/// E = M + E - M_hat in the same pass. `reconstruction` may alias `matrix`.
void reconstruct(const ddprt_matrix &p, const ddprt_matrix &q,
                 const ddprt_matrix *matrix, const ddprt_matrix *residual,
                 const ddprt_matrix &reconstruction);

/// Standard normal samples from Philox4x32-10 keyed by (seed, stream, step).
void randomNormal(const ddprt_buffer &output, uint64_t seed, uint64_t stream,
                  uint64_t step);

/// ddprt_top_k (checked): the k = values.numel elements of `input`
/// largest in magnitude, largest first, ties in index order.
void topK(const ddprt_buffer &input, const ddprt_buffer &values,
          const ddprt_buffer &indices);

/// ddprt_gemm (checked): OpenBLAS's sgemm over the batch, or loops where
/// the runtime was built without it (gemmUsesBlas says which).
void gemm(bool transposeA, bool transposeB, int64_t batch, int64_t m,
          int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
          int64_t strideA, const float *b, int64_t ldb, int64_t strideB,
          float beta, float *c, int64_t ldc, int64_t strideC);
bool gemmUsesBlas();
/// The threads gemm may use in this process.
void setGemmThreads(int threads);

} // namespace ddprt::cpu

#endif // DDPRT_CPU_KERNELS_H
