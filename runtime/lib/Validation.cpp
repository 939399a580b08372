//===- Validation.cpp - the C ABI's argument checks -----------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "Validation.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <vector>

namespace ddprt {

size_t dtypeSize(int dtype) {
  switch (dtype) {
#define DDPRT_DTYPE_SIZE(NAME, value, bytes, kind, compute)                    \
  case DDPRT_##NAME:                                                           \
    return bytes;
    DDPRT_FOR_EACH_DTYPE(DDPRT_DTYPE_SIZE)
#undef DDPRT_DTYPE_SIZE
  }
  return 0;
}

Error invalid(const std::string &message) {
  return fail(DDPRT_ERROR_INVALID_ARGUMENT, message);
}

namespace {

/// Which element types a call takes: allreduces and kernels those of the
/// compute column of ddprt.h's list; state and allgathers, which only move
/// bytes, every type of the list.
enum class Dtypes { Compute, Any };

bool takesDtype(int dtype, Dtypes accepted) {
  switch (dtype) {
#define DDPRT_DTYPE_TAKEN(NAME, value, bytes, kind, compute)                   \
  case DDPRT_##NAME:                                                           \
    return compute || accepted == Dtypes::Any;
    DDPRT_FOR_EACH_DTYPE(DDPRT_DTYPE_TAKEN)
#undef DDPRT_DTYPE_TAKEN
  }
  return false;
}

/// A dtype as the dialect names it (i8, f32), or "dtype N" if it is none.
std::string dtypeText(int dtype) {
  std::string name;
  switch (dtype) {
#define DDPRT_DTYPE_NAME(NAME, value, bytes, kind, compute)                    \
  case DDPRT_##NAME:                                                           \
    name = #NAME;                                                              \
    break;
    DDPRT_FOR_EACH_DTYPE(DDPRT_DTYPE_NAME)
#undef DDPRT_DTYPE_NAME
  default:
    return "dtype " + std::to_string(dtype);
  }
  for (char &c : name)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

/// Why a call does not take `dtype` (takesDtype said no).
std::string dtypeProblem(int dtype) {
  if (dtypeSize(dtype) == 0)
    return "unknown " + dtypeText(dtype);
  return dtypeText(dtype) + " is only for state buffers and ddprt_allgather";
}

Error checkCount(const void *array, int count, const char *what) {
  if (count < 0)
    return invalid(std::string(what) + ": count " + std::to_string(count) +
                   " is negative");
  if (count > 0 && !array)
    return invalid(std::string(what) + ": the array of " +
                   std::to_string(count) + " is null");
  return Error::success();
}

Error checkBuffer(const ddprt_buffer &buffer, const char *what, int index,
                  Dtypes accepted = Dtypes::Compute) {
  std::string where = std::string(what) + " #" + std::to_string(index);
  if (!takesDtype(asInt(buffer.dtype), accepted))
    return invalid(where + ": " + dtypeProblem(asInt(buffer.dtype)));
  if (buffer.numel < 0)
    return invalid(where + ": negative size " + std::to_string(buffer.numel));
  if (buffer.numel > INT64_MAX / int64_t(dtypeSize(asInt(buffer.dtype))))
    return invalid(where + ": " + std::to_string(buffer.numel) +
                   " elements are more bytes than a 64-bit size holds");
  if (buffer.numel > 0 && !buffer.data)
    return invalid(where + ": data is null");
  return Error::success();
}

Error checkBuffers(const ddprt_buffer *buffers, int count, const char *what,
                   Dtypes accepted = Dtypes::Compute) {
  DDPRT_TRY(checkCount(buffers, count, what));
  for (int i = 0; i < count; ++i)
    DDPRT_TRY(checkBuffer(buffers[i], what, i, accepted));
  return Error::success();
}

/// `dtype` is the validated dtype of the first matrix of the tuple.
Error checkMatrix(const ddprt_matrix &matrix, const char *what, int index,
                  int64_t rows, int64_t cols, int dtype) {
  std::string where = std::string(what) + " #" + std::to_string(index);
  if (asInt(matrix.dtype) != dtype)
    return invalid(where + ": dtype " + std::to_string(asInt(matrix.dtype)) +
                   " differs from the tensor's " + std::to_string(dtype));
  if (matrix.rows != rows || matrix.cols != cols)
    return invalid(where + " is " + std::to_string(matrix.rows) + "x" +
                   std::to_string(matrix.cols) + " but must be " +
                   std::to_string(rows) + "x" + std::to_string(cols));
  if (rows * cols > 0 && !matrix.data)
    return invalid(where + ": data is null");
  return Error::success();
}

Error checkFirstMatrix(const ddprt_matrix &matrix, const char *what,
                       int index) {
  if (!takesDtype(asInt(matrix.dtype), Dtypes::Compute))
    return invalid(std::string(what) + " #" + std::to_string(index) + ": " +
                   dtypeProblem(asInt(matrix.dtype)));
  if (matrix.rows < 0 || matrix.cols < 0)
    return invalid(std::string(what) + " #" + std::to_string(index) +
                   ": negative size");
  return checkMatrix(matrix, what, index, matrix.rows, matrix.cols,
                     asInt(matrix.dtype));
}

Error checkRole(const ddprt_role &role) {
  if (asInt(role) < 0 || asInt(role) >= DDPRT_ROLE_COUNT)
    return invalid("unknown role " + std::to_string(asInt(role)));
  return Error::success();
}

Error checkWorldScale(const ddprt_world_scale &factor) {
  int raw = asInt(factor);
  if (raw < DDPRT_SCALE_NONE || raw > DDPRT_SCALE_NODE_COUNT)
    return invalid("unknown world scale " + std::to_string(raw));
  return Error::success();
}

} // namespace

Error checkContext(const ddprt_context *context) {
  if (!context)
    return invalid("the context is null");
  if (!context->backend)
    return fail(DDPRT_ERROR_STATE, "the context failed to initialize");
  return Error::success();
}

Error checkAllreduce(const ddprt_context *context,
                     const ddprt_reduction &reduction, const ddprt_role &role,
                     const ddprt_buffer *buffers, int count) {
  DDPRT_TRY(checkContext(context));
  if (asInt(reduction) != DDPRT_SUM && asInt(reduction) != DDPRT_MEAN)
    return invalid("unknown reduction " + std::to_string(asInt(reduction)));
  DDPRT_TRY(checkRole(role));
  return checkBuffers(buffers, count, "allreduce buffer");
}

Error checkGroup(const ddprt_context *context, const ddprt_group &group,
                 const ddprt_reduction &reduction) {
  if (asInt(group) < DDPRT_GROUP_WORLD ||
      asInt(group) > DDPRT_GROUP_ACROSS_NODES)
    return invalid("unknown group " + std::to_string(asInt(group)));
  const Communicator &communicator = *context->communicator;
  if (group == DDPRT_GROUP_ACROSS_NODES && asInt(reduction) == DDPRT_MEAN &&
      !communicator.nodesAlike())
    return invalid(
        "a mean across nodes needs as many ranks on every node (the mean of "
        "the nodes' means is the job's mean only then); this job has " +
        std::to_string(communicator.nodeCount()) +
        " nodes of different "
        "sizes: set ranks_per_node (DDPRT_RANKS_PER_NODE) to a divisor of the "
        "world size, or reduce over the world");
  return Error::success();
}

Error checkAllgather(const ddprt_context *context, const ddprt_role &role,
                     const ddprt_buffer *inputs, const ddprt_buffer *outputs,
                     int count) {
  DDPRT_TRY(checkContext(context));
  DDPRT_TRY(checkRole(role));
  DDPRT_TRY(checkBuffers(inputs, count, "allgather input", Dtypes::Any));
  DDPRT_TRY(checkBuffers(outputs, count, "allgather output", Dtypes::Any));
  const int64_t world = context->communicator->size();
  for (int i = 0; i < count; ++i) {
    const ddprt_buffer &input = inputs[i], &output = outputs[i];
    // The input's bytes fit in 64 bits (checked); world times them may not.
    bool fits = input.numel <= INT64_MAX / world;
    if (asInt(output.dtype) != asInt(input.dtype) || !fits ||
        output.numel != world * input.numel)
      return invalid("allgather #" + std::to_string(i) +
                     ": the output must have the input's dtype (" +
                     dtypeText(asInt(input.dtype)) + ") and world size x " +
                     "its elements (" + std::to_string(world) + " x " +
                     std::to_string(input.numel) + "), but has " +
                     dtypeText(asInt(output.dtype)) + " and " +
                     std::to_string(output.numel) + " elements");
  }
  return Error::success();
}

Error checkWait(const ddprt_context *context, const ddprt_request *request) {
  DDPRT_TRY(checkContext(context));
  if (!request)
    return invalid("the request is null");
  return Error::success();
}

Error checkRequestCompleted(const ddprt_context *context,
                            const ddprt_request *request,
                            const int32_t *completed) {
  DDPRT_TRY(checkWait(context, request));
  if (!completed)
    return invalid("the output is null");
  return Error::success();
}

Error checkScale(const ddprt_context *context, const ddprt_world_scale &factor,
                 const ddprt_buffer *buffers, int count) {
  DDPRT_TRY(checkContext(context));
  DDPRT_TRY(checkWorldScale(factor));
  return checkBuffers(buffers, count, "buffer");
}

Error checkCast(const ddprt_context *context, const ddprt_world_scale &factor,
                const ddprt_buffer *inputs, const ddprt_buffer *outputs,
                int count) {
  DDPRT_TRY(checkContext(context));
  DDPRT_TRY(checkWorldScale(factor));
  DDPRT_TRY(checkBuffers(inputs, count, "input"));
  DDPRT_TRY(checkBuffers(outputs, count, "output"));
  for (int i = 0; i < count; ++i)
    if (inputs[i].numel != outputs[i].numel)
      return invalid("cast #" + std::to_string(i) + ": " +
                     std::to_string(inputs[i].numel) + " inputs but " +
                     std::to_string(outputs[i].numel) + " outputs");
  return Error::success();
}

Error checkProjection(const ddprt_context *context,
                      const ddprt_matrix *matrices,
                      const ddprt_matrix *residuals,
                      const ddprt_matrix *factors, const ddprt_matrix *outputs,
                      int count, bool transpose) {
  DDPRT_TRY(checkContext(context));
  DDPRT_TRY(checkCount(matrices, count, "matrix"));
  DDPRT_TRY(checkCount(factors, count, "factor"));
  DDPRT_TRY(checkCount(outputs, count, "output"));
  for (int i = 0; i < count; ++i) {
    const ddprt_matrix &m = matrices[i];
    DDPRT_TRY(checkFirstMatrix(m, "matrix", i));
    if (residuals)
      DDPRT_TRY(
          checkMatrix(residuals[i], "residual", i, m.rows, m.cols, m.dtype));
    int64_t inner = transpose ? m.rows : m.cols;
    int64_t outer = transpose ? m.cols : m.rows;
    int64_t rank = factors[i].cols;
    if (rank < 0)
      return invalid("factor #" + std::to_string(i) + ": negative size");
    DDPRT_TRY(checkMatrix(factors[i], "factor", i, inner, rank, m.dtype));
    DDPRT_TRY(checkMatrix(outputs[i], "output", i, outer, rank, m.dtype));
  }
  return Error::success();
}

Error checkOrthogonalize(const ddprt_context *context, const ddprt_matrix *ps,
                         int count, double epsilon) {
  DDPRT_TRY(checkContext(context));
  if (!(epsilon >= 0.0 && epsilon < HUGE_VAL))
    return invalid("epsilon must be finite and >= 0");
  DDPRT_TRY(checkCount(ps, count, "matrix"));
  for (int i = 0; i < count; ++i)
    DDPRT_TRY(checkFirstMatrix(ps[i], "matrix", i));
  return Error::success();
}

Error checkReconstruct(const ddprt_context *context, const ddprt_matrix *ps,
                       const ddprt_matrix *qs, const ddprt_matrix *matrices,
                       const ddprt_matrix *residuals,
                       const ddprt_matrix *reconstructions, int count) {
  DDPRT_TRY(checkContext(context));
  if ((residuals != nullptr) != (matrices != nullptr))
    return invalid("reconstruct needs both the matrices and the residuals, "
                   "or neither");
  DDPRT_TRY(checkCount(ps, count, "P"));
  DDPRT_TRY(checkCount(qs, count, "Q"));
  DDPRT_TRY(checkCount(reconstructions, count, "reconstruction"));
  for (int i = 0; i < count; ++i) {
    const ddprt_matrix &p = ps[i];
    DDPRT_TRY(checkFirstMatrix(p, "P", i));
    DDPRT_TRY(checkFirstMatrix(qs[i], "Q", i));
    if (qs[i].cols != p.cols || asInt(qs[i].dtype) != asInt(p.dtype))
      return invalid("Q #" + std::to_string(i) + " must have " +
                     std::to_string(p.cols) + " columns and P's dtype");
    DDPRT_TRY(checkMatrix(reconstructions[i], "reconstruction", i, p.rows,
                          qs[i].rows, asInt(p.dtype)));
    if (matrices)
      DDPRT_TRY(checkMatrix(matrices[i], "matrix", i, p.rows, qs[i].rows,
                            asInt(p.dtype)));
    if (residuals)
      DDPRT_TRY(checkMatrix(residuals[i], "residual", i, p.rows, qs[i].rows,
                            asInt(p.dtype)));
  }
  return Error::success();
}

Error checkInspect(const ddprt_context *context, const ddprt_buffer *buffers,
                   int count) {
  DDPRT_TRY(checkContext(context));
  return checkBuffers(buffers, count, "inspected buffer");
}

Error checkRandomNormal(const ddprt_context *context,
                        const ddprt_buffer *output) {
  DDPRT_TRY(checkContext(context));
  return output ? checkBuffer(*output, "output", 0)
                : invalid("the output is null");
}

namespace {
/// Whether the bytes of two validated buffers overlap.
bool overlap(const ddprt_buffer &a, const ddprt_buffer &b) {
  auto begin = [](const ddprt_buffer &x) {
    return reinterpret_cast<uintptr_t>(x.data);
  };
  auto end = [&](const ddprt_buffer &x) {
    return begin(x) + uintptr_t(x.numel) * dtypeSize(asInt(x.dtype));
  };
  return a.numel > 0 && b.numel > 0 && begin(a) < end(b) && begin(b) < end(a);
}
} // namespace

Error checkTopK(const ddprt_context *context, const ddprt_buffer *input,
                const ddprt_buffer *values, const ddprt_buffer *indices) {
  DDPRT_TRY(checkContext(context));
  if (!input || !values || !indices)
    return invalid("ddprt_top_k: the input, the values or the indices are "
                   "null");
  DDPRT_TRY(checkBuffer(*input, "top_k input", 0));
  DDPRT_TRY(checkBuffer(*values, "top_k values", 0));
  DDPRT_TRY(checkBuffer(*indices, "top_k indices", 0, Dtypes::Any));
  if (values->dtype != input->dtype)
    return invalid("ddprt_top_k: the values are " +
                   dtypeText(asInt(values->dtype)) + " but the input is " +
                   dtypeText(asInt(input->dtype)));
  if (indices->dtype != DDPRT_I32 && indices->dtype != DDPRT_I64)
    return invalid("ddprt_top_k: the indices are " +
                   dtypeText(asInt(indices->dtype)) + ", not i32 or i64");
  int64_t k = values->numel;
  if (indices->numel != k)
    return invalid("ddprt_top_k: " + std::to_string(k) + " values but " +
                   std::to_string(indices->numel) + " indices");
  if (k < 1 || k > input->numel)
    return invalid("ddprt_top_k: k = " + std::to_string(k) +
                   " must be between 1 and the input's " +
                   std::to_string(input->numel) + " elements");
  if (indices->dtype == DDPRT_I32 && input->numel - 1 > INT32_MAX)
    return invalid("ddprt_top_k: i32 indices cannot address " +
                   std::to_string(input->numel) + " elements");
  if (overlap(*input, *values) || overlap(*input, *indices) ||
      overlap(*values, *indices))
    return invalid("ddprt_top_k: the input, the values and the indices must "
                   "not overlap");
  return Error::success();
}

Error checkStateGet(const ddprt_context *context, const char *name,
                    const ddprt_dtype &dtype, int64_t numel,
                    ddprt_state **state) {
  DDPRT_TRY(checkContext(context));
  if (!name || !*name || !state)
    return invalid("a state needs a non-empty name and a result pointer");
  if (const char *problem = ddprt_name_problem(name, std::strlen(name)))
    return invalid(std::string("cannot name a state '") + name + "': " +
                   problem);
  if (dtypeSize(asInt(dtype)) == 0 || numel < 0 ||
      numel > INT64_MAX / int64_t(dtypeSize(asInt(dtype))))
    return invalid(std::string("state '") + name +
                   "': unknown dtype, or a negative size or one whose bytes "
                   "a 64-bit size cannot hold");
  return Error::success();
}

Error checkCopy(const ddprt_context *context, const ddprt_buffer *sources,
                const ddprt_buffer *destinations, int count) {
  DDPRT_TRY(checkContext(context));
  DDPRT_TRY(checkCount(sources, count, "ddprt_copy sources"));
  DDPRT_TRY(checkCount(destinations, count, "ddprt_copy destinations"));
  for (int i = 0; i < count; ++i) {
    const ddprt_buffer &from = sources[i], &to = destinations[i];
    if (asInt(from.dtype) != asInt(to.dtype) || from.numel != to.numel ||
        dtypeSize(asInt(from.dtype)) == 0 || from.numel < 0)
      return invalid("ddprt_copy #" + std::to_string(i) +
                     ": the buffers differ in dtype or size");
    if (from.numel > 0 && (!from.data || !to.data))
      return invalid("ddprt_copy #" + std::to_string(i) + ": data is null");
  }
  return Error::success();
}

Error checkGemm(const ddprt_context *context, ddprt_dtype dtype,
                int transposeA, int transposeB, int64_t batch, int64_t m,
                int64_t n, int64_t k, const void *a, int64_t lda,
                int64_t strideA, const void *b, int64_t ldb, int64_t strideB,
                const void *c, int64_t ldc, int64_t strideC) {
  DDPRT_TRY(checkContext(context));
  if (asInt(dtype) != DDPRT_F32)
    return fail(DDPRT_ERROR_UNSUPPORTED,
                "ddprt_gemm: " + dtypeText(asInt(dtype)) +
                    " matrices (only f32 ones)");
  if (batch < 0 || m < 0 || n < 0 || k < 0)
    return invalid("ddprt_gemm: a negative size (batch " +
                   std::to_string(batch) + ", m " + std::to_string(m) +
                   ", n " + std::to_string(n) + ", k " + std::to_string(k) +
                   ")");
  // The libraries count in 32-bit ints.
  constexpr int64_t kMaxDimension = 0x7fffffff;
  for (int64_t value : {m, n, k, lda, ldb, ldc})
    if (value > kMaxDimension)
      return fail(DDPRT_ERROR_UNSUPPORTED,
                  "ddprt_gemm: a size or leading dimension of " +
                      std::to_string(value) + " (at most 2^31 - 1)");
  // Rows as stored: op(A) is m x k, so A is m x k, or k x m transposed.
  struct Operand {
    const char *name;
    const void *data;
    int64_t rows, cols, ld, stride;
    bool read; // an empty product reads no A or B
  };
  bool empty = batch == 0 || m == 0 || n == 0;
  Operand operands[] = {
      {"A", a, transposeA ? k : m, transposeA ? m : k, lda, strideA,
       !empty && k > 0},
      {"B", b, transposeB ? n : k, transposeB ? k : n, ldb, strideB,
       !empty && k > 0},
      {"C", c, m, n, ldc, strideC, !empty},
  };
  for (const Operand &x : operands) {
    std::string name = std::string("ddprt_gemm: ") + x.name;
    if (x.ld < std::max<int64_t>(1, x.cols))
      return invalid(name + ": leading dimension " + std::to_string(x.ld) +
                     " is less than its " + std::to_string(x.cols) +
                     " columns");
    if (x.stride < 0)
      return invalid(name + ": negative batch stride");
    // The last element it reaches, (batch - 1) stride + (rows - 1) ld +
    // cols, must be an offset the pointer arithmetic can hold.
    int64_t last = 0, rowsPart = 0, batchPart = 0;
    if (batch > 0 && x.rows > 0 &&
        (__builtin_mul_overflow(x.rows - 1, x.ld, &rowsPart) ||
         __builtin_mul_overflow(batch - 1, x.stride, &batchPart) ||
         __builtin_add_overflow(rowsPart, batchPart, &last) ||
         __builtin_add_overflow(last, x.cols, &last)))
      return invalid(name + ": its strides reach beyond 2^63 elements");
    if (x.read && !x.data)
      return invalid(name + ": data is null");
  }
  // The C matrices of a batch must not overlap: each is written.
  if (batch > 1 && m > 0 && n > 0 && strideC < (m - 1) * ldc + n)
    return invalid("ddprt_gemm: C: batch stride " + std::to_string(strideC) +
                   " overlaps the matrices it separates");
  return Error::success();
}

Error checkAlloc(const ddprt_context *context, void **pointer) {
  DDPRT_TRY(checkContext(context));
  if (!pointer)
    return invalid("ddprt_alloc: the result pointer is null");
  return Error::success();
}

Error checkCheckpointPath(const ddprt_context *context, const char *path) {
  DDPRT_TRY(checkContext(context));
  if (!path || !*path)
    return invalid("the checkpoint path is empty");
  return Error::success();
}

} // namespace ddprt
