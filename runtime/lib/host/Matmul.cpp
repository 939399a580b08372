//===- Matmul.cpp - the matmuls of compiled steps -------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// ddp-lower-to-llvm turns each f32 contraction of a step (linalg.matmul,
// batch_matmul, their transposed forms, a linalg.generic that is one) into
// a call C += A B on strided views, A (batch x) m x k, B k x n, C m x n,
// as unranked memrefs. Here each view becomes what ddprt_gemm takes: a
// row-major matrix, or the transpose of one, with its leading dimension; a
// view that is neither (a strided slice) is copied into a dense buffer
// first.
//
//===----------------------------------------------------------------------===//

#include "Matmul.h"

#include "Memory.h"

#include "ddprt/ddprt.h"

#include <algorithm>
#include <string>
#include <utility>

namespace stephost {

namespace {

constexpr const char *kWhere = "a matmul of the step (ddprt_gemm)";

/// A batch of rows x cols matrices at `data`, with their strides.
struct MatrixView {
  float *data;
  int64_t batch = 1, rows, cols;
  int64_t batchStride = 0, rowStride, colStride;

  MatrixView transposed() const {
    MatrixView t = *this;
    std::swap(t.rows, t.cols);
    std::swap(t.rowStride, t.colStride);
    return t;
  }
};

bool viewOf(const UnrankedMemRef &memref, MatrixView &view) {
  if (memref.rank != 2 && memref.rank != 3)
    return false;
  StridedMemRefView ranked = memref.ranked();
  const int64_t *sizes = ranked.sizes(), *strides = ranked.strides();
  int first = int(memref.rank) - 2;
  view.data = reinterpret_cast<float *>(ranked.data(sizeof(float)));
  if (first == 1) {
    view.batch = sizes[0];
    view.batchStride = view.batch > 1 ? strides[0] : 0;
  }
  view.rows = sizes[first];
  view.cols = sizes[first + 1];
  view.rowStride = strides[first];
  view.colStride = strides[first + 1];
  return true;
}

/// How ddprt_gemm reads `view`: row-major with leading dimension `ld`, or
/// (transposed) the transpose of a row-major cols x rows matrix.
bool asGemmOperand(const MatrixView &view, bool &transposed, int64_t &ld) {
  if (view.batchStride < 0)
    return false;
  if ((view.cols == 1 || view.colStride == 1) &&
      (view.rows == 1 || view.rowStride >= view.cols)) {
    transposed = false;
    ld = view.rows == 1 ? std::max<int64_t>(1, view.cols) : view.rowStride;
    return true;
  }
  if ((view.rows == 1 || view.rowStride == 1) &&
      (view.cols == 1 || view.colStride >= view.rows)) {
    transposed = true;
    ld = view.cols == 1 ? std::max<int64_t>(1, view.rows) : view.colStride;
    return true;
  }
  return false;
}

/// Whether the matrices of a batch of C (row-major, leading dimension `ld`)
/// overlap or interleave (a result indexed batch-inside-rows): ddprt_gemm
/// writes each as a block of its own, so such a C goes through a copy.
bool overlapsInBatch(const MatrixView &c, int64_t ld) {
  return c.batch > 1 && c.batchStride < (c.rows - 1) * ld + c.cols;
}

/// A dense row-major copy of a view no gemm operand describes: allocated
/// where the backend reads it (managed memory on CUDA), freed at the end.
class DenseCopy {
public:
  ~DenseCopy() {
    if (buffer_)
      releaseBuffer(buffer_);
  }

  /// Points `view` at a dense copy of what it shows; false if out of
  /// memory.
  bool make(MatrixView &view) {
    original_ = view;
    made_ = true;
    size_t count = size_t(view.batch * view.rows * view.cols);
    buffer_ = static_cast<float *>(allocateBuffer(count * sizeof(float)));
    if (!buffer_ && count > 0)
      return false;
    MatrixView dense{buffer_,         view.batch, view.rows, view.cols,
                     view.rows * view.cols, view.cols, 1};
    transfer(original_, dense);
    view = dense;
    return true;
  }

  /// Copies the dense result back into the view it was made from, if a
  /// copy was made.
  void writeBack() {
    if (!made_)
      return;
    MatrixView dense{buffer_,          original_.batch, original_.rows,
                     original_.cols,   original_.rows * original_.cols,
                     original_.cols,   1};
    transfer(dense, original_);
  }

private:
  static void transfer(const MatrixView &from, const MatrixView &to) {
    for (int64_t b = 0; b < from.batch; ++b)
      for (int64_t i = 0; i < from.rows; ++i)
        for (int64_t j = 0; j < from.cols; ++j)
          to.data[b * to.batchStride + i * to.rowStride + j * to.colStride] =
              from.data[b * from.batchStride + i * from.rowStride +
                        j * from.colStride];
  }

  float *buffer_ = nullptr;
  bool made_ = false;
  MatrixView original_{};
};

void failMatmul(ddprt_context *context, const std::string &message) {
  ddprt_fail(context, kWhere, message.c_str());
}

} // namespace

void hostMatmulF32(int64_t aRank, void *aDescriptor, int64_t bRank,
                   void *bDescriptor, int64_t cRank, void *cDescriptor) {
  ddprt_context *context = ddprt_current_context();
  MatrixView a{}, b{}, c{};
  if (!viewOf({aRank, aDescriptor}, a) || !viewOf({bRank, bDescriptor}, b) ||
      !viewOf({cRank, cDescriptor}, c) || aRank != cRank || bRank != cRank)
    return failMatmul(context, "the operands are not matrices or batches of "
                               "matrices of one rank");
  if (a.rows != c.rows || b.cols != c.cols || a.cols != b.rows ||
      a.batch != c.batch || b.batch != c.batch)
    return failMatmul(
        context, "shapes do not multiply: A " + std::to_string(a.rows) + "x" +
                     std::to_string(a.cols) + ", B " + std::to_string(b.rows) +
                     "x" + std::to_string(b.cols) + ", C " +
                     std::to_string(c.rows) + "x" + std::to_string(c.cols));
  // Nothing to add: no C, or a sum over K = 0 terms (whose A and B may
  // have strides no gemm operand takes).
  if (c.batch == 0 || c.rows == 0 || c.cols == 0 || a.cols == 0)
    return;
  // C stored column by column: C^T += B^T A^T, row-major.
  bool cTransposed = false;
  int64_t ldc = 0;
  if (asGemmOperand(c, cTransposed, ldc) && cTransposed) {
    MatrixView at = a.transposed();
    a = b.transposed();
    b = at;
    c = c.transposed();
  }
  DenseCopy copies[3];
  MatrixView *views[3] = {&a, &b, &c};
  bool transposed[3] = {};
  int64_t ld[3] = {};
  for (int i = 0; i < 3; ++i) {
    // ddprt_gemm writes C row-major (a C stored by columns was turned
    // around above).
    bool fits = asGemmOperand(*views[i], transposed[i], ld[i]) &&
                !(i == 2 && (transposed[i] || overlapsInBatch(*views[i], ld[i])));
    if (!fits) {
      if (!copies[i].make(*views[i]))
        return failMatmul(context, "cannot allocate a dense copy of an "
                                   "operand (out of host memory)");
      transposed[i] = false;
      ld[i] = std::max<int64_t>(1, views[i]->cols);
    }
  }
  ddprt_status status = ddprt_gemm(
      context, DDPRT_F32, transposed[0], transposed[1], c.batch, c.rows,
      c.cols, a.cols, 1.0f, a.data, ld[0], a.batchStride, b.data, ld[1],
      b.batchStride, 1.0f, c.data, ld[2], c.batchStride);
  // Host code reads C next: on a GPU, wait for it.
  if (status == DDPRT_OK && ddprt_backend(context) != DDPRT_BACKEND_CPU)
    status = ddprt_host_barrier(context);
  ddprt_check(context, status, kWhere);
  if (status == DDPRT_OK)
    copies[2].writeBack();
}

} // namespace stephost
