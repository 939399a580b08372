//===- Validation.h - the C ABI's argument checks ---------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every argument that comes through the C ABI is checked here before a
// backend sees it (the backends trust what reaches them): null pointers,
// counts, dtypes, sizes and shapes that do not fit together. That every
// rank passes the same bucket to a collective is checked by the backends,
// as part of the collective (on the CPU backend in the communication queue,
// so a started allreduce's mismatch is reported by its wait). Each
// check<Call> checks the arguments of ddprt_<call> in the order its
// messages promise.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_VALIDATION_H
#define DDPRT_VALIDATION_H

#include "Context.h"
#include "Error.h"

#include <cstring>
#include <string>

namespace ddprt {

/// The integer a caller stored in an enum-typed argument or field. C
/// callers may store any int there; reading an out-of-range value as the
/// C++ enum type is undefined behaviour, so every enum that comes through
/// the C ABI is read as an int and validated before it is used as the enum.
template <typename Enum> int asInt(const Enum &value) {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized here");
  int raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

/// ddprt_dtype_size of a dtype read as an int: 0 if it is none.
size_t dtypeSize(int dtype);

/// DDPRT_ERROR_INVALID_ARGUMENT with `message`.
Error invalid(const std::string &message);

/// A context that exists and started.
Error checkContext(const ddprt_context *context);
Error checkAllreduce(const ddprt_context *context,
                     const ddprt_reduction &reduction, const ddprt_role &role,
                     const ddprt_buffer *buffers, int count);
/// A known group; a mean across nodes of different sizes is refused (it
/// would not be the job's mean).
Error checkGroup(const ddprt_context *context, const ddprt_group &group,
                 const ddprt_reduction &reduction);
/// Any dtype of the list; outputs[i] has inputs[i]'s dtype and world size
/// times its elements.
Error checkAllgather(const ddprt_context *context, const ddprt_role &role,
                     const ddprt_buffer *inputs, const ddprt_buffer *outputs,
                     int count);
Error checkWait(const ddprt_context *context, const ddprt_request *request);
Error checkRequestCompleted(const ddprt_context *context,
                            const ddprt_request *request,
                            const int32_t *completed);
Error checkScale(const ddprt_context *context, const ddprt_world_scale &factor,
                 const ddprt_buffer *buffers, int count);
Error checkCast(const ddprt_context *context, const ddprt_world_scale &factor,
                const ddprt_buffer *inputs, const ddprt_buffer *outputs,
                int count);
/// N (matrix, residual?, factor, output) tuples of a projection: P = M Q
/// (transpose = false) or Q = M^T P (true).
Error checkProjection(const ddprt_context *context,
                      const ddprt_matrix *matrices,
                      const ddprt_matrix *residuals,
                      const ddprt_matrix *factors, const ddprt_matrix *outputs,
                      int count, bool transpose);
Error checkOrthogonalize(const ddprt_context *context, const ddprt_matrix *ps,
                         int count, double epsilon);
Error checkReconstruct(const ddprt_context *context, const ddprt_matrix *ps,
                       const ddprt_matrix *qs, const ddprt_matrix *matrices,
                       const ddprt_matrix *residuals,
                       const ddprt_matrix *reconstructions, int count);
Error checkInspect(const ddprt_context *context, const ddprt_buffer *buffers,
                   int count);
Error checkRandomNormal(const ddprt_context *context,
                        const ddprt_buffer *output);
Error checkTopK(const ddprt_context *context, const ddprt_buffer *input,
                const ddprt_buffer *values, const ddprt_buffer *indices);
Error checkStateGet(const ddprt_context *context, const char *name,
                    const ddprt_dtype &dtype, int64_t numel,
                    ddprt_state **state);
Error checkGemm(const ddprt_context *context, ddprt_dtype dtype,
                int transposeA, int transposeB, int64_t batch, int64_t m,
                int64_t n, int64_t k, const void *a, int64_t lda,
                int64_t strideA, const void *b, int64_t ldb, int64_t strideB,
                const void *c, int64_t ldc, int64_t strideC);
Error checkCopy(const ddprt_context *context, const ddprt_buffer *sources,
                const ddprt_buffer *destinations, int count);
Error checkAlloc(const ddprt_context *context, void **pointer);
Error checkCheckpointPath(const ddprt_context *context, const char *path);

} // namespace ddprt

#endif // DDPRT_VALIDATION_H
