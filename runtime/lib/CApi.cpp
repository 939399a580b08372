//===- CApi.cpp - the C ABI over the backends -----------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Thin extern "C" wrappers: each checks its arguments (Validation.h), runs
// the work (a backend call, timed into its phase and guarded against
// exceptions; State.h, Checkpoint.h, NonFinite.h for what is more than a
// call), and hands back the status with its message on the context
// (Status.h).
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "Context.h"
#include "Counters.h"
#include "NonFinite.h"
#include "Options.h"
#include "ProcessState.h"
#include "SimulatedLink.h"
#include "State.h"
#include "Status.h"
#include "Validation.h"

#include <climits>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string_view>

using namespace ddprt;

namespace {
/// Checks a bucket, checks all ranks agree on it, counts it.
Error prepareCollective(ddprt_context *context, const ddprt_group &group,
                        const ddprt_reduction &reduction,
                        const ddprt_role &role, const ddprt_buffer *buffers,
                        int count) {
  DDPRT_TRY(checkAllreduce(context, reduction, role, buffers, count));
  DDPRT_TRY(checkGroup(context, group, reduction));
  // Within a node nothing crosses the network.
  if (group != DDPRT_GROUP_NODE)
    countCollective(context->counters, role, buffers, count);
  return Error::success();
}
} // namespace

extern "C" {

ddprt_status ddprt_get_version(int *version) {
  if (!version)
    return DDPRT_ERROR_INVALID_ARGUMENT;
  *version = DDPRT_VERSION;
  return DDPRT_OK;
}

ddprt_status ddprt_nccl_unique_id(unsigned char *id) {
  if (!id)
    return DDPRT_ERROR_INVALID_ARGUMENT;
#if defined(DDPRT_HAVE_CUDA)
  return guarded([&] { return newNcclUniqueId(id); }).status;
#else
  return DDPRT_ERROR_UNSUPPORTED;
#endif
}

size_t ddprt_dtype_size(ddprt_dtype dtype) { return dtypeSize(asInt(dtype)); }

ddprt_status ddprt_parse_simulated_link(const char *text, double *gbps,
                                        double *latency_us, const char **why) {
  // This thread's last message (valid until its next call).
  thread_local char saved[512];
  std::string message;
  SimulatedLink link;
  if (!text || !gbps || !latency_us)
    message = "a null text or result pointer";
  else if (parseSimulatedLink(text, link, message)) {
    *gbps = link.gbps;
    *latency_us = link.latencyUs;
    return DDPRT_OK;
  }
  std::snprintf(saved, sizeof saved, "%s", message.c_str());
  if (why)
    *why = saved;
  return DDPRT_ERROR_INVALID_ARGUMENT;
}

const char *ddprt_status_string(ddprt_status status) {
  switch (asInt(status)) {
  case DDPRT_OK:
    return "DDPRT_OK";
  case DDPRT_ERROR_INVALID_ARGUMENT:
    return "DDPRT_ERROR_INVALID_ARGUMENT";
  case DDPRT_ERROR_UNSUPPORTED:
    return "DDPRT_ERROR_UNSUPPORTED";
  case DDPRT_ERROR_COMMUNICATION:
    return "DDPRT_ERROR_COMMUNICATION";
  case DDPRT_ERROR_TIMEOUT:
    return "DDPRT_ERROR_TIMEOUT";
  case DDPRT_ERROR_MISMATCH:
    return "DDPRT_ERROR_MISMATCH";
  case DDPRT_ERROR_IO:
    return "DDPRT_ERROR_IO";
  case DDPRT_ERROR_BACKEND:
    return "DDPRT_ERROR_BACKEND";
  case DDPRT_ERROR_STATE:
    return "DDPRT_ERROR_STATE";
  case DDPRT_NONFINITE:
    return "DDPRT_NONFINITE";
  }
  return "DDPRT_UNKNOWN_STATUS";
}

ddprt_status ddprt_init(const ddprt_options *options, ddprt_context **result) {
  if (!result)
    return DDPRT_ERROR_INVALID_ARGUMENT;
  auto context = std::make_unique<ddprt_context>();
  *result = nullptr;
  Error error = initContext(*context, options);
  // Also on failure: the context says why, and is finalized.
  *result = context.release();
  return report(*result, error);
}

ddprt_status ddprt_finalize(ddprt_context *context) {
  if (!context)
    return DDPRT_ERROR_INVALID_ARGUMENT;
  destroyContext(context);
  return DDPRT_OK;
}

ddprt_status ddprt_get_options(const ddprt_context *context,
                               ddprt_options *options) {
  if (!context)
    return DDPRT_ERROR_INVALID_ARGUMENT;
  Error error = writeOptions(context->options, options);
  context->lastError = error.message;
  return error.status;
}

const char *ddprt_last_error(const ddprt_context *context) {
  return context ? context->lastError.c_str() : "the context is null";
}

int ddprt_rank(const ddprt_context *context) {
  return context && context->communicator ? context->communicator->rank() : -1;
}

int ddprt_world_size(const ddprt_context *context) {
  return context && context->communicator ? context->communicator->size() : 0;
}

ddprt_backend_kind ddprt_backend(const ddprt_context *context) {
  return context ? context->options.backend : DDPRT_BACKEND_CPU;
}

ddprt_status ddprt_allreduce_group(ddprt_context *context, ddprt_group group,
                                   ddprt_reduction reduction, ddprt_role role,
                                   ddprt_buffer *buffers, int count) {
  Error error =
      prepareCollective(context, group, reduction, role, buffers, count);
  if (!error)
    error = timed(context, DDPRT_PHASE_COMMUNICATION, [&] {
      return context->backend->allreduce(group, reduction, buffers, count);
    });
  return report(context, error);
}

ddprt_status ddprt_allreduce(ddprt_context *context, ddprt_reduction reduction,
                             ddprt_role role, ddprt_buffer *buffers,
                             int count) {
  return ddprt_allreduce_group(context, DDPRT_GROUP_WORLD, reduction, role,
                               buffers, count);
}

ddprt_status ddprt_allreduce_group_start(ddprt_context *context,
                                         ddprt_group group,
                                         ddprt_reduction reduction,
                                         ddprt_role role, ddprt_buffer *buffers,
                                         int count, ddprt_request **request) {
  Error error = request ? prepareCollective(context, group, reduction, role,
                                            buffers, count)
                        : invalid("the request pointer is null");
  if (!error) {
    auto handle = std::make_unique<ddprt_request>();
    handle->role = role;
    error = timed(context, DDPRT_PHASE_COMMUNICATION, [&] {
      return context->backend->allreduceStart(group, reduction, buffers, count,
                                              handle->backendRequest);
    });
    if (!error)
      error = guarded([&] {
        context->requests.insert(handle.get());
        return Error::success();
      });
    if (!error)
      *request = handle.release();
  }
  return report(context, error);
}

ddprt_status ddprt_allreduce_start(ddprt_context *context,
                                   ddprt_reduction reduction, ddprt_role role,
                                   ddprt_buffer *buffers, int count,
                                   ddprt_request **request) {
  return ddprt_allreduce_group_start(context, DDPRT_GROUP_WORLD, reduction,
                                     role, buffers, count, request);
}

ddprt_status ddprt_node_layout(const ddprt_context *context, int *nodes,
                               int *ranks_on_node) {
  Error error = checkContext(context);
  if (!error) {
    if (nodes)
      *nodes = context->communicator->nodeCount();
    if (ranks_on_node)
      *ranks_on_node = context->communicator->ranksOnNode();
  }
  return report(const_cast<ddprt_context *>(context), error);
}

ddprt_status ddprt_wait(ddprt_context *context, ddprt_request *request) {
  std::unique_ptr<ddprt_request> owned(request);
  Error error = checkWait(context, request);
  if (context)
    context->requests.erase(request);
  if (!error)
    error = timed(context, DDPRT_PHASE_COMMUNICATION, [&] {
      return context->backend->wait(*request->backendRequest);
    });
  return report(context, error);
}

ddprt_status ddprt_request_completed(ddprt_context *context,
                                     ddprt_request *request,
                                     int32_t *completed) {
  Error error = checkRequestCompleted(context, request, completed);
  if (!error) {
    bool done = false;
    error = context->backend->completed(*request->backendRequest, done);
    *completed = done ? 1 : 0;
  }
  return report(context, error);
}

ddprt_status ddprt_allgather(ddprt_context *context, ddprt_role role,
                             const ddprt_buffer *inputs,
                             const ddprt_buffer *outputs, int count) {
  Error error = checkAllgather(context, role, inputs, outputs, count);
  if (!error) {
    countCollective(context->counters, role, inputs, count);
    error = timed(context, DDPRT_PHASE_COMMUNICATION, [&] {
      return context->backend->allgather(inputs, outputs, count);
    });
  }
  return report(context, error);
}

ddprt_status ddprt_synchronize(ddprt_context *context) {
  Error error = checkContext(context);
  if (!error)
    error = timed(context, DDPRT_PHASE_COMMUNICATION,
                  [&] { return context->backend->synchronize(); });
  return report(context, error);
}

ddprt_status ddprt_host_barrier(ddprt_context *context) {
  Error error = checkContext(context);
  if (!error)
    error = timed(context, DDPRT_PHASE_COMMUNICATION,
                  [&] { return context->backend->hostBarrier(); });
  return report(context, error);
}

ddprt_status ddprt_scale(ddprt_context *context, ddprt_world_scale factor,
                         ddprt_buffer *buffers, int count) {
  Error error = checkScale(context, factor, buffers, count);
  if (!error)
    error = timed(context, DDPRT_PHASE_CAST, [&] {
      return context->backend->scale(worldScale(*context, factor), buffers,
                                     count);
    });
  return report(context, error);
}

ddprt_status ddprt_cast(ddprt_context *context, ddprt_world_scale factor,
                        const ddprt_buffer *inputs, ddprt_buffer *outputs,
                        int count) {
  Error error = checkCast(context, factor, inputs, outputs, count);
  if (!error)
    error = timed(context, DDPRT_PHASE_CAST, [&] {
      return context->backend->cast(worldScale(*context, factor), inputs,
                                    outputs, count);
    });
  return report(context, error);
}

ddprt_status ddprt_project(ddprt_context *context, const ddprt_matrix *matrices,
                           const ddprt_matrix *residuals,
                           const ddprt_matrix *qs, ddprt_matrix *ps,
                           int count) {
  Error error = checkProjection(context, matrices, residuals, qs, ps, count,
                                /*transpose=*/false);
  if (!error) {
    countProjection(context->counters, matrices, count);
    error = timed(context, DDPRT_PHASE_COMPRESSION, [&] {
      return context->backend->project(matrices, residuals, qs, ps, count);
    });
  }
  return report(context, error);
}

ddprt_status ddprt_backproject(ddprt_context *context,
                               const ddprt_matrix *matrices,
                               const ddprt_matrix *residuals,
                               const ddprt_matrix *ps, ddprt_matrix *qs,
                               int count) {
  Error error = checkProjection(context, matrices, residuals, ps, qs, count,
                                /*transpose=*/true);
  if (!error)
    error = timed(context, DDPRT_PHASE_COMPRESSION, [&] {
      return context->backend->backproject(matrices, residuals, ps, qs, count);
    });
  return report(context, error);
}

ddprt_status ddprt_orthogonalize(ddprt_context *context, ddprt_matrix *ps,
                                 int count, double epsilon) {
  Error error = checkOrthogonalize(context, ps, count, epsilon);
  if (!error)
    error = timed(context, DDPRT_PHASE_COMPRESSION, [&] {
      return context->backend->orthogonalize(ps, count, epsilon);
    });
  return report(context, error);
}

ddprt_status ddprt_reconstruct(ddprt_context *context, const ddprt_matrix *ps,
                               const ddprt_matrix *qs,
                               const ddprt_matrix *matrices,
                               ddprt_matrix *residuals,
                               ddprt_matrix *reconstructions, int count) {
  Error error = checkReconstruct(context, ps, qs, matrices, residuals,
                                 reconstructions, count);
  if (!error)
    error = reconstruct(*context, ps, qs, matrices, residuals, reconstructions,
                        count);
  return report(context, error);
}

ddprt_status ddprt_inspect(ddprt_context *context, const ddprt_buffer *buffers,
                           int count, int32_t *all_finite,
                           int32_t *any_nonzero) {
  Error error = checkInspect(context, buffers, count);
  if (!error)
    error = inspect(*context, buffers, count, all_finite, any_nonzero);
  return report(context, error);
}

ddprt_status ddprt_gemm(ddprt_context *context, ddprt_dtype dtype,
                        int transpose_a, int transpose_b, int64_t batch,
                        int64_t m, int64_t n, int64_t k, float alpha,
                        const void *a, int64_t lda, int64_t stride_a,
                        const void *b, int64_t ldb, int64_t stride_b,
                        float beta, void *c, int64_t ldc, int64_t stride_c) {
  Error error =
      checkGemm(context, dtype, transpose_a, transpose_b, batch, m, n, k, a,
                lda, stride_a, b, ldb, stride_b, c, ldc, stride_c);
  if (!error && batch > 0 && m > 0 && n > 0)
    error = context->backend->gemm(transpose_a != 0, transpose_b != 0, batch, m,
                                   n, k, alpha, static_cast<const float *>(a),
                                   lda, stride_a, static_cast<const float *>(b),
                                   ldb, stride_b, beta, static_cast<float *>(c),
                                   ldc, stride_c);
  return report(context, error);
}

ddprt_status ddprt_set_compute_threads(ddprt_context *context, int threads) {
  Error error = checkContext(context);
  if (!error && threads < 1)
    error = invalid("ddprt_set_compute_threads: " + std::to_string(threads) +
                    " threads (at least 1)");
  if (!error)
    context->backend->setComputeThreads(threads);
  return report(context, error);
}

ddprt_status ddprt_random_normal(ddprt_context *context, ddprt_buffer *output,
                                 uint64_t seed, uint64_t stream,
                                 uint64_t step) {
  Error error = checkRandomNormal(context, output);
  if (!error)
    error = timed(context, DDPRT_PHASE_COMPRESSION, [&] {
      return context->backend->randomNormal(*output, seed, stream, step);
    });
  return report(context, error);
}

ddprt_status ddprt_top_k(ddprt_context *context, const ddprt_buffer *input,
                         ddprt_buffer *values, ddprt_buffer *indices) {
  Error error = checkTopK(context, input, values, indices);
  if (!error)
    error = timed(context, DDPRT_PHASE_COMPRESSION, [&] {
      return context->backend->topK(*input, *values, *indices);
    });
  return report(context, error);
}

ddprt_status ddprt_launch_kernel(ddprt_context *context, const void *image,
                                 const char *name, int64_t grid_x,
                                 int64_t grid_y, int64_t grid_z,
                                 int64_t block_x, int64_t block_y,
                                 int64_t block_z, int32_t shared_bytes,
                                 void **params) {
  Error error = checkContext(context);
  const int64_t grid[3] = {grid_x, grid_y, grid_z};
  const int64_t block[3] = {block_x, block_y, block_z};
  if (!error && (!image || !name))
    error = invalid("ddprt_launch_kernel: no image or no kernel name");
  if (!error && shared_bytes < 0)
    error = invalid(std::string("ddprt_launch_kernel: kernel '") + name +
                    "' with negative shared memory");
  for (int d = 0; !error && d < 3; ++d)
    if (grid[d] < 0 || block[d] < 1 || grid[d] > INT32_MAX || block[d] > 1024)
      error = invalid(std::string("ddprt_launch_kernel: kernel '") + name +
                      "' with grid " + std::to_string(grid_x) + "x" +
                      std::to_string(grid_y) + "x" + std::to_string(grid_z) +
                      " and block " + std::to_string(block_x) + "x" +
                      std::to_string(block_y) + "x" + std::to_string(block_z));
  // An empty iteration space: nothing to launch (CUDA refuses a grid of 0).
  if (!error && grid_x * grid_y * grid_z == 0)
    return report(context, error);
  // Not timed: the launch returns before the kernel runs; the step's own
  // code is not one of the runtime's phases on either backend.
  if (!error)
    error = context->backend->launchKernel(image, name, grid, block,
                                           shared_bytes, params);
  return report(context, error);
}

ddprt_status ddprt_count_uncompressed(ddprt_context *context,
                                      int64_t elements) {
  Error error = checkContext(context);
  if (!error && elements < 0)
    error = invalid("ddprt_count_uncompressed: " + std::to_string(elements) +
                    " elements");
  if (!error)
    context->counters.elements_before_compression += uint64_t(elements);
  return report(context, error);
}

ddprt_status ddprt_state_get(ddprt_context *context, const char *name,
                             ddprt_dtype dtype, int64_t numel,
                             ddprt_state **state) {
  Error error = checkStateGet(context, name, dtype, numel, state);
  // The map and the name allocate: failures become statuses, not throws.
  if (!error)
    error =
        guarded([&] { return getState(*context, name, dtype, numel, state); });
  return report(context, error);
}

const char *ddprt_name_problem(const char *name, size_t length) {
  if (!name || length == 0)
    return "it is empty";
  std::string_view text(name, length);
  if (text == "." || text == "..")
    return "it names a directory ('.' or '..')";
  for (char c : text) {
    if (c == '/' || c == '\\')
      return "it holds a path separator ('/' or '\\')";
    if (c == '\0')
      return "it holds a NUL character";
    if ((unsigned char)c < 0x20 || c == 0x7f)
      return "it holds a control character";
  }
  return nullptr;
}

ddprt_buffer ddprt_state_buffer(const ddprt_state *state) {
  if (!state)
    return ddprt_buffer{nullptr, DDPRT_F32, 0};
  return ddprt_buffer{state->data, state->dtype, state->numel};
}

void *ddprt_state_data(const ddprt_state *state) {
  return state ? state->data : nullptr;
}

ddprt_status ddprt_copy(ddprt_context *context, const ddprt_buffer *sources,
                        ddprt_buffer *destinations, int count) {
  Error error = checkCopy(context, sources, destinations, count);
  for (int i = 0; !error && i < count; ++i)
    error = guarded([&] {
      return context->backend->copy(destinations[i].data, sources[i].data,
                                    size_t(sources[i].numel) *
                                        ddprt_dtype_size(sources[i].dtype));
    });
  return report(context, error);
}

ddprt_status ddprt_alloc(ddprt_context *context, size_t bytes, void **pointer) {
  Error error = checkAlloc(context, pointer);
  if (!error)
    error = guarded(
        [&] { return context->backend->allocateShared(bytes, pointer); });
  return report(context, error);
}

void ddprt_free(ddprt_context *context, void *pointer) {
  if (context && context->backend && pointer)
    context->backend->deallocateShared(pointer);
}

ddprt_status ddprt_device_alloc(ddprt_context *context, size_t bytes,
                                void **pointer) {
  Error error = checkAlloc(context, pointer);
  if (!error)
    error = guarded(
        [&] { return context->backend->allocateDevice(bytes, pointer); });
  return report(context, error);
}

ddprt_status ddprt_device_free(ddprt_context *context, void *pointer) {
  Error error = checkContext(context);
  if (!error && pointer)
    error = context->backend->deallocateDevice(pointer);
  return report(context, error);
}

void ddprt_set_current_context(ddprt_context *context) {
  setCurrentContext(context);
}

ddprt_context *ddprt_current_context(void) { return currentContext(); }

void ddprt_set_error_handler(ddprt_error_handler handler, void *user) {
  setErrorHandler(handler, user);
}

void ddprt_check(ddprt_context *context, ddprt_status status,
                 const char *where) {
  if (status != DDPRT_OK)
    handleFailure(context, status, where);
}

void ddprt_fail(ddprt_context *context, const char *where,
                const char *message) {
  // The checks of a parallel loop's iterations fail on their threads: one
  // at a time sets the message and calls the handler.
  static std::mutex failures;
  std::lock_guard<std::mutex> lock(failures);
  if (context)
    context->lastError = message ? message : "a check of compiled code failed";
  handleFailure(context, DDPRT_ERROR_INVALID_ARGUMENT, where);
}

void ddprt_report_nonfinite(ddprt_context *context, const char *where,
                            const char *message, int32_t this_rank_only) {
  if (context) {
    context->lastError = message ? message : "values that are not finite";
    context->counters.nonfinite_skips += 1;
    context->nonfiniteThisRankOnly = this_rank_only != 0;
  }
  handleFailure(context, DDPRT_NONFINITE, where);
  if (context)
    context->nonfiniteThisRankOnly = false;
}

int32_t ddprt_nonfinite_is_this_rank_only(const ddprt_context *context) {
  return context && context->nonfiniteThisRankOnly ? 1 : 0;
}

ddprt_status ddprt_checkpoint_save(ddprt_context *context, const char *path) {
  Error error = checkCheckpointPath(context, path);
  if (!error)
    error = saveCheckpoint(*context, path);
  return report(context, error);
}

ddprt_status ddprt_checkpoint_load(ddprt_context *context, const char *path) {
  Error error = checkCheckpointPath(context, path);
  if (!error)
    error = loadCheckpoint(*context, path);
  return report(context, error);
}

ddprt_status ddprt_get_counters(const ddprt_context *context,
                                ddprt_counters *counters) {
  if (!context)
    return DDPRT_ERROR_INVALID_ARGUMENT;
  if (!counters) {
    context->lastError = "ddprt_get_counters: the output is null";
    return DDPRT_ERROR_INVALID_ARGUMENT;
  }
  if (Error error = writeCounters(context->counters, counters)) {
    context->lastError = "ddprt_get_counters: " + error.message;
    return error.status;
  }
  return DDPRT_OK;
}

ddprt_status ddprt_reset_counters(ddprt_context *context) {
  if (!context)
    return DDPRT_ERROR_INVALID_ARGUMENT;
  context->counters = ddprt_counters{};
  return DDPRT_OK;
}

} // extern "C"
