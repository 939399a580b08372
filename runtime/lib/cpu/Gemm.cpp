//===- Gemm.cpp - the CPU backend's matrix products -----------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// ddprt_gemm on the CPU: OpenBLAS's sgemm where the runtime was built with
// it (Debian's libopenblas-dev; the build says which), otherwise loops over
// k in order, tiled over n so that each row of B is read once per row of C.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#ifdef DDPRT_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include <algorithm>
#include <vector>

namespace ddprt::cpu {

namespace {

#ifndef DDPRT_HAVE_OPENBLAS
/// C = alpha op(A) op(B) + beta C for one matrix of the batch.
void gemmLoops(bool transposeA, bool transposeB, int64_t m, int64_t n,
               int64_t k, float alpha, const float *a, int64_t lda,
               const float *b, int64_t ldb, float beta, float *c,
               int64_t ldc) {
  std::vector<float> row(size_t(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0.0f);
    for (int64_t p = 0; p < k; ++p) {
      float x = transposeA ? a[p * lda + i] : a[i * lda + p];
      if (transposeB)
        for (int64_t j = 0; j < n; ++j)
          row[size_t(j)] += x * b[j * ldb + p];
      else
        for (int64_t j = 0; j < n; ++j)
          row[size_t(j)] += x * b[p * ldb + j];
    }
    float *out = c + i * ldc;
    for (int64_t j = 0; j < n; ++j)
      out[j] = beta == 0.0f ? alpha * row[size_t(j)]
                            : alpha * row[size_t(j)] + beta * out[j];
  }
}
#endif

} // namespace

bool gemmUsesBlas() {
#ifdef DDPRT_HAVE_OPENBLAS
  return true;
#else
  return false;
#endif
}

void setGemmThreads(int threads) {
#ifdef DDPRT_HAVE_OPENBLAS
  openblas_set_num_threads(threads);
#else
  (void)threads;
#endif
}

void gemm(bool transposeA, bool transposeB, int64_t batch, int64_t m,
          int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
          int64_t strideA, const float *b, int64_t ldb, int64_t strideB,
          float beta, float *c, int64_t ldc, int64_t strideC) {
  for (int64_t i = 0; i < batch; ++i) {
    const float *ai = a ? a + i * strideA : a;
    const float *bi = b ? b + i * strideB : b;
    float *ci = c + i * strideC;
#ifdef DDPRT_HAVE_OPENBLAS
    // OpenBLAS's int is 32 bits: the sizes were checked against it.
    cblas_sgemm(CblasRowMajor, transposeA ? CblasTrans : CblasNoTrans,
                transposeB ? CblasTrans : CblasNoTrans, blasint(m),
                blasint(n), blasint(k), alpha, ai, blasint(lda), bi,
                blasint(ldb), beta, ci, blasint(ldc));
#else
    gemmLoops(transposeA, transposeB, m, n, k, alpha, ai, lda, bi, ldb, beta,
              ci, ldc);
#endif
  }
}

} // namespace ddprt::cpu
