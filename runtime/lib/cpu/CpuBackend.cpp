//===- CpuBackend.cpp - MPI collectives and C++ kernels -------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "../Backend.h"
#include "../Communicator.h"
#include "Kernels.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

namespace ddprt {

namespace {
/// A bucket to reduce. The collectives run at the wait (MPI progresses
/// only inside MPI calls, so starting early would not overlap anyway); the
/// CUDA backend overlaps on a stream of its own.
class CpuRequest : public Request {
public:
  ddprt_reduction reduction;
  std::vector<ddprt_buffer> buffers;
};

class CpuBackend : public Backend {
public:
  explicit CpuBackend(Communicator &communicator)
      : communicator_(communicator) {}

  Error allreduce(ddprt_reduction reduction, ddprt_buffer *buffers,
                  int count) override {
    CpuRequest request;
    request.reduction = reduction;
    request.buffers.assign(buffers, buffers + count);
    return wait(request);
  }

  Error allreduceStart(ddprt_reduction reduction, ddprt_buffer *buffers,
                       int count, std::unique_ptr<Request> &result) override {
    auto request = std::make_unique<CpuRequest>();
    request->reduction = reduction;
    request->buffers.assign(buffers, buffers + count);
    result = std::move(request);
    return Error::success();
  }

  /// Large buffers are reduced in place, one at a time; small ones of a
  /// dtype travel together in a staging buffer (one collective, not one per
  /// bias). A mean scales by 1/W after the sum (once, by the rank that owns
  /// each chunk), except for f16/bf16, which divide first so that the sum
  /// stays in range.
  Error wait(Request &base) override {
    auto &request = static_cast<CpuRequest &>(base);
    const int64_t kSmallBytes = 64 * 1024;
    double inverse = 1.0 / communicator_.size();
    bool mean = request.reduction == DDPRT_MEAN;
    std::map<ddprt_dtype, std::vector<ddprt_buffer>> small;
    for (const ddprt_buffer &buffer : request.buffers) {
      if (buffer.numel == 0)
        continue;
      bool narrow = buffer.dtype == DDPRT_F16 || buffer.dtype == DDPRT_BF16;
      if (mean && narrow)
        cpu::scale(inverse, buffer);
      int64_t bytes = buffer.numel * int64_t(ddprt_dtype_size(buffer.dtype));
      if (bytes < kSmallBytes) {
        small[buffer.dtype].push_back(buffer);
        continue;
      }
      DDPRT_TRY(communicator_.sum(buffer.data, buffer.numel, buffer.dtype,
                                  mean && !narrow ? inverse : 1.0));
    }
    for (auto &[dtype, group] : small) {
      bool narrow = dtype == DDPRT_F16 || dtype == DDPRT_BF16;
      double scale = mean && !narrow ? inverse : 1.0;
      if (group.size() == 1) {
        DDPRT_TRY(
            communicator_.sum(group[0].data, group[0].numel, dtype, scale));
        continue;
      }
      size_t elementSize = ddprt_dtype_size(dtype);
      int64_t total = 0;
      for (const ddprt_buffer &buffer : group)
        total += buffer.numel;
      staging_.resize(size_t(total) * elementSize);
      size_t offset = 0;
      for (const ddprt_buffer &buffer : group) {
        std::memcpy(staging_.data() + offset, buffer.data,
                    size_t(buffer.numel) * elementSize);
        offset += size_t(buffer.numel) * elementSize;
      }
      DDPRT_TRY(communicator_.sum(staging_.data(), total, dtype, scale));
      offset = 0;
      for (const ddprt_buffer &buffer : group) {
        std::memcpy(buffer.data, staging_.data() + offset,
                    size_t(buffer.numel) * elementSize);
        offset += size_t(buffer.numel) * elementSize;
      }
    }
    return Error::success();
  }

  Error synchronize() override { return Error::success(); }
  Error hostBarrier() override { return Error::success(); }

  Error scale(double factor, ddprt_buffer *buffers, int count) override {
    for (int i = 0; i < count; ++i)
      cpu::scale(factor, buffers[i]);
    return Error::success();
  }

  Error cast(double factor, const ddprt_buffer *inputs, ddprt_buffer *outputs,
             int count) override {
    for (int i = 0; i < count; ++i)
      cpu::cast(factor, inputs[i], outputs[i]);
    return Error::success();
  }

  Error project(const ddprt_matrix *matrices, const ddprt_matrix *residuals,
                const ddprt_matrix *qs, ddprt_matrix *ps, int count) override {
    for (int i = 0; i < count; ++i)
      cpu::project(matrices[i], residuals ? &residuals[i] : nullptr, qs[i],
                   ps[i]);
    return Error::success();
  }

  Error backproject(const ddprt_matrix *matrices, const ddprt_matrix *residuals,
                    const ddprt_matrix *ps, ddprt_matrix *qs,
                    int count) override {
    for (int i = 0; i < count; ++i)
      cpu::backproject(matrices[i], residuals ? &residuals[i] : nullptr, ps[i],
                       qs[i]);
    return Error::success();
  }

  Error orthogonalize(ddprt_matrix *ps, int count, double epsilon) override {
    for (int i = 0; i < count; ++i)
      cpu::orthogonalize(ps[i], epsilon);
    return Error::success();
  }

  Error reconstruct(const ddprt_matrix *ps, const ddprt_matrix *qs,
                    const ddprt_matrix *matrices, ddprt_matrix *residuals,
                    ddprt_matrix *reconstructions, int count) override {
    for (int i = 0; i < count; ++i)
      cpu::reconstruct(ps[i], qs[i], matrices ? &matrices[i] : nullptr,
                       residuals ? &residuals[i] : nullptr, reconstructions[i]);
    return Error::success();
  }

  Error randomNormal(ddprt_buffer output, uint64_t seed, uint64_t stream,
                     uint64_t step) override {
    cpu::randomNormal(output, seed, stream, step);
    return Error::success();
  }

  Error inspect(const ddprt_buffer *buffers, int count, bool *finite,
                bool *nonzero) override {
    for (int i = 0; i < count; ++i)
      cpu::inspect(buffers[i], finite[i], nonzero[i]);
    return Error::success();
  }

  Error allocateZeroed(size_t bytes, void **pointer) override {
    *pointer = std::calloc(bytes == 0 ? 1 : bytes, 1);
    if (!*pointer)
      return fail(DDPRT_ERROR_BACKEND, "out of host memory for " +
                                           std::to_string(bytes) +
                                           " bytes of state");
    return Error::success();
  }
  void deallocate(void *pointer) override { std::free(pointer); }
  Error copyToHost(void *host, const void *source, size_t bytes) override {
    std::memcpy(host, source, bytes);
    return Error::success();
  }
  Error copyFromHost(void *destination, const void *host,
                     size_t bytes) override {
    std::memcpy(destination, host, bytes);
    return Error::success();
  }
  Error allocateShared(size_t bytes, void **pointer) override {
    *pointer =
        std::aligned_alloc(64, (bytes + 63) / 64 * 64 + (bytes == 0) * 64);
    if (!*pointer)
      return fail(DDPRT_ERROR_BACKEND,
                  "out of host memory for " + std::to_string(bytes) + " bytes");
    return Error::success();
  }
  void deallocateShared(void *pointer) override { std::free(pointer); }
  Error copy(void *destination, const void *source, size_t bytes) override {
    std::memmove(destination, source, bytes);
    return Error::success();
  }

private:
  Communicator &communicator_;
  std::vector<char> staging_;
};
} // namespace

std::unique_ptr<Backend> createCpuBackend(Communicator &communicator) {
  return std::make_unique<CpuBackend>(communicator);
}

} // namespace ddprt
