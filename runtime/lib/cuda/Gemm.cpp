//===- Gemm.cpp - PowerSGD's projections through cuBLAS -------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Row-major n x m G is, to cuBLAS (column-major), the m x n matrix G^T with
// leading dimension m; likewise P (n x r) is P^T (r x n, ld r) and Q (m x r)
// is Q^T (r x m, ld r). So
//   P^T = Q^T G^T:  gemm(N, N, r, n, m, Q^T, G^T) -> P^T
//   Q^T = P^T G:    gemm(N, T, r, m, n, P^T, G^T) -> Q^T
// and E's product is added by a second GEMM with beta = 1.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include <algorithm>

#include <cstdlib>
#include <cstring>

namespace ddprt::cuda {

bool ProjectorPolicy::readEnvironment(std::string &message) {
  const char *value = std::getenv("DDPRT_CUDA_PROJECTION");
  if (!value || !*value || std::strcmp(value, "auto") == 0)
    mode = Mode::Auto;
  else if (std::strcmp(value, "fused") == 0)
    mode = Mode::Fused;
  else if (std::strcmp(value, "gemm") == 0)
    mode = Mode::Gemm;
  else {
    message = std::string("DDPRT_CUDA_PROJECTION must be auto, fused or "
                          "gemm, not '") +
              value + "'";
    return false;
  }
  return true;
}

Projector ProjectorPolicy::choose(ddprt_dtype dtype, int64_t rank) const {
  if (dtype != DDPRT_F32 && dtype != DDPRT_F64)
    return Projector::Fused;
  switch (mode) {
  case Mode::Fused:
    return Projector::Fused;
  case Mode::Gemm:
    return Projector::Gemm;
  case Mode::Auto:
    break;
  }
  return rank > fusedMaxRank ? Projector::Gemm : Projector::Fused;
}

void Gemm::release() {
  if (handle_)
    cublasDestroy(handle_);
  handle_ = nullptr;
}

cublasStatus_t Gemm::prepare(cudaStream_t stream) {
  if (!handle_) {
    if (cublasStatus_t status = cublasCreate(&handle_))
      return status;
    // Strict f32: no TF32 tensor-core rounding of the inputs.
    if (cublasStatus_t status = cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH))
      return status;
  }
  return cublasSetStream(handle_, stream);
}

cublasStatus_t Gemm::strided(bool transposeA, bool transposeB, int64_t batch,
                             int64_t m, int64_t n, int64_t k, float alpha,
                             const float *a, int64_t lda, int64_t strideA,
                             const float *b, int64_t ldb, int64_t strideB,
                             float beta, float *c, int64_t ldc,
                             int64_t strideC) {
  // Batches beyond cuBLAS's int count go in several calls.
  constexpr int64_t kMaxBatch = 0x7fffffff;
  for (int64_t first = 0; first < batch; first += kMaxBatch) {
    int64_t count = std::min(kMaxBatch, batch - first);
    if (cublasStatus_t status = cublasSgemmStridedBatched(
            handle_, transposeB ? CUBLAS_OP_T : CUBLAS_OP_N,
            transposeA ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(m), int(k),
            &alpha, b + first * strideB, int(ldb), strideB,
            a + first * strideA, int(lda), strideA, &beta,
            c + first * strideC, int(ldc), strideC, int(count)))
      return status;
  }
  return CUBLAS_STATUS_SUCCESS;
}

namespace {
/// One GEMM C = alpha op(A) op(B) + beta C in the matrices' element type.
cublasStatus_t gemm(cublasHandle_t handle, cublasOperation_t opB, int64_t rows,
                    int64_t cols, int64_t inner, const void *a, int64_t lda,
                    const void *b, int64_t ldb, bool accumulate, void *c,
                    int64_t ldc, ddprt_dtype dtype) {
  if (dtype == DDPRT_F64) {
    const double one = 1.0, beta = accumulate ? 1.0 : 0.0;
    return cublasDgemm(handle, CUBLAS_OP_N, opB, int(rows), int(cols),
                       int(inner), &one, static_cast<const double *>(a),
                       int(lda), static_cast<const double *>(b), int(ldb),
                       &beta, static_cast<double *>(c), int(ldc));
  }
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  return cublasGemmEx(handle, CUBLAS_OP_N, opB, int(rows), int(cols),
                      int(inner), &one, a, CUDA_R_32F, int(lda), b, CUDA_R_32F,
                      int(ldb), &beta, c, CUDA_R_32F, int(ldc),
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}
/// out = op(factor) op(G) + op(factor) op(E): G's product, then E's added
/// with beta = 1 (M = G + E is never stored).
cublasStatus_t gemmOfSum(cublasHandle_t handle, cublasOperation_t opB,
                         int64_t rows, int64_t cols, int64_t inner,
                         const ddprt_matrix &factor, const ddprt_matrix &g,
                         const ddprt_matrix *e, const ddprt_matrix &out) {
  int64_t r = factor.cols, m = g.cols;
  if (cublasStatus_t status = gemm(handle, opB, rows, cols, inner, factor.data,
                                   r, g.data, m, false, out.data, r, g.dtype))
    return status;
  if (!e)
    return CUBLAS_STATUS_SUCCESS;
  return gemm(handle, opB, rows, cols, inner, factor.data, r, e->data, m, true,
              out.data, r, g.dtype);
}
} // namespace

cublasStatus_t Gemm::project(const ddprt_matrix &g, const ddprt_matrix *e,
                             const ddprt_matrix &q, const ddprt_matrix &p) {
  return gemmOfSum(handle_, CUBLAS_OP_N, q.cols, g.rows, g.cols, q, g, e, p);
}

cublasStatus_t Gemm::backproject(const ddprt_matrix &g, const ddprt_matrix *e,
                                 const ddprt_matrix &p, const ddprt_matrix &q) {
  return gemmOfSum(handle_, CUBLAS_OP_T, p.cols, g.cols, g.rows, p, g, e, q);
}

} // namespace ddprt::cuda
