//===- Gemm.h - PowerSGD's projections through cuBLAS -----------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// P = (G + E) Q and Q = (G + E)^T P as cuBLAS GEMMs: G's product, then E's
// added with beta = 1 (so M = G + E is never stored). The fused kernels
// (CudaKernels.h) read G and E once per 8 columns of the factor; cuBLAS
// reads them once per GEMM whatever the rank, so it wins at large ranks.
// Which one runs is chosen per tensor by Gemm::prefer, from the rank alone
// (deterministic); the crossover was measured on an H200
// (docs/performance.md). f32 runs in strict f32 (no TF32), f64 in f64;
// f16/bf16 always take the fused kernels, whose sum of G and E is rounded
// once.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_CUDA_GEMM_H
#define DDPRT_CUDA_GEMM_H

#include "ddprt/ddprt.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

namespace ddprt::cuda {

/// Where the projections of one tensor run.
enum class Projector { Fused, Gemm };

/// The choice between the fused kernels and cuBLAS.
struct ProjectorPolicy {
  enum class Mode { Auto, Fused, Gemm } mode = Mode::Auto;
  /// Auto: ranks above this go to cuBLAS.
  int64_t fusedMaxRank = 8;

  /// Reads DDPRT_CUDA_PROJECTION=auto|fused|gemm (benchmarks and tests
  /// force one path with it); false and a message for any other value.
  bool readEnvironment(std::string &message);
  Projector choose(ddprt_dtype dtype, int64_t rank) const;
};

class Gemm {
public:
  ~Gemm() { release(); }
  /// Destroys the handle (before the stream it is bound to goes).
  void release();
  /// Creates the handle on first use, bound to `stream`.
  cublasStatus_t prepare(cudaStream_t stream);

  /// p = (g + e) q for one tensor (e may be null); g is n x m, q m x r.
  cublasStatus_t project(const ddprt_matrix &g, const ddprt_matrix *e,
                         const ddprt_matrix &q, const ddprt_matrix &p);
  /// q = (g + e)^T p for one tensor (e may be null).
  cublasStatus_t backproject(const ddprt_matrix &g, const ddprt_matrix *e,
                             const ddprt_matrix &p, const ddprt_matrix &q);

  /// ddprt_gemm (row-major, checked) as cublasSgemmStridedBatched on the
  /// column-major transposes: C^T = op(B)^T op(A)^T.
  cublasStatus_t strided(bool transposeA, bool transposeB, int64_t batch,
                         int64_t m, int64_t n, int64_t k, float alpha,
                         const float *a, int64_t lda, int64_t strideA,
                         const float *b, int64_t ldb, int64_t strideB,
                         float beta, float *c, int64_t ldc, int64_t strideC);

private:
  cublasHandle_t handle_ = nullptr;
};

} // namespace ddprt::cuda

#endif // DDPRT_CUDA_GEMM_H
