//===- CpuBackend.cpp - MPI collectives and C++ kernels -------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Allreduces are queued on the communicator and run on its communication
// thread, in the order they were issued, while the caller goes on
// computing; ddprt_wait waits for its own request (and those before it).
// Communicator.cpp says who calls MPI and when (the host's MPI calls
// included).
//
//===----------------------------------------------------------------------===//

#include "../Backend.h"
#include "../Communicator.h"
#include "../HostArithmetic.h"
#include "Kernels.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

namespace ddprt {

namespace {
/// A bucket being reduced: the caller's buffers, reduced in place, and the
/// staging buffer its small tensors travel in. Owned by the queued work, on
/// the communication thread.
struct Bucket {
  ddprt_group group;
  ddprt_reduction reduction;
  std::vector<ddprt_buffer> buffers;
  std::vector<int64_t> signature;
  std::vector<char> staging;
};

/// Checks that every rank passes the same bucket, then reduces it. Large
/// buffers are reduced in place, one at a time; small ones of a dtype
/// travel together in the staging buffer (one collective, not one per
/// bias). A mean scales by 1/W after the sum (once, by the rank that owns
/// each chunk), except for f16/bf16, which divide first so that the sum
/// stays in range.
Error reduce(Collectives &collectives, Bucket &bucket) {
  DDPRT_TRY(collectives.checkSameOnAllRanks(bucket.signature, "allreduce"));
  const int64_t kSmallBytes = 64 * 1024;
  double inverse = 1.0 / collectives.members(bucket.group);
  bool mean = bucket.reduction == DDPRT_MEAN;
  std::map<ddprt_dtype, std::vector<ddprt_buffer>> small;
  for (const ddprt_buffer &buffer : bucket.buffers) {
    if (buffer.numel == 0)
      continue;
    bool narrow = buffer.dtype == DDPRT_F16 || buffer.dtype == DDPRT_BF16;
    if (mean && narrow)
      scaleHost(inverse, buffer);
    int64_t bytes = buffer.numel * int64_t(ddprt_dtype_size(buffer.dtype));
    if (bytes < kSmallBytes) {
      small[buffer.dtype].push_back(buffer);
      continue;
    }
    DDPRT_TRY(collectives.sum(bucket.group, buffer.data, buffer.numel,
                              buffer.dtype, mean && !narrow ? inverse : 1.0));
  }
  for (auto &[dtype, group] : small) {
    bool narrow = dtype == DDPRT_F16 || dtype == DDPRT_BF16;
    double scale = mean && !narrow ? inverse : 1.0;
    if (group.size() == 1) {
      DDPRT_TRY(collectives.sum(bucket.group, group[0].data, group[0].numel,
                                dtype, scale));
      continue;
    }
    size_t elementSize = ddprt_dtype_size(dtype);
    int64_t total = 0;
    for (const ddprt_buffer &buffer : group)
      total += buffer.numel;
    std::vector<char> &staging = bucket.staging;
    staging.resize(size_t(total) * elementSize);
    size_t offset = 0;
    for (const ddprt_buffer &buffer : group) {
      std::memcpy(staging.data() + offset, buffer.data,
                  size_t(buffer.numel) * elementSize);
      offset += size_t(buffer.numel) * elementSize;
    }
    DDPRT_TRY(
        collectives.sum(bucket.group, staging.data(), total, dtype, scale));
    offset = 0;
    for (const ddprt_buffer &buffer : group) {
      std::memcpy(buffer.data, staging.data() + offset,
                  size_t(buffer.numel) * elementSize);
      offset += size_t(buffer.numel) * elementSize;
    }
  }
  return Error::success();
}

/// Tensors being gathered: a copy of the caller's buffer lists, owned by
/// the queued work.
struct Gathering {
  std::vector<ddprt_buffer> inputs, outputs;
  std::vector<int64_t> signature;
};

/// Checks that every rank passes the same tensors, then gathers them in one
/// collective: this rank's inputs packed back to back, every rank's packed
/// block received rank-major, then each tensor's slice of each block copied
/// to its place in the output. Staging both sides lets inputs and outputs
/// overlap, and costs two copies of what the ranks' loopback MPI copies
/// anyway; the tensors schemes gather are compressed, hence small.
Error gather(Collectives &collectives, const Gathering &gathering) {
  DDPRT_TRY(collectives.checkSameOnAllRanks(gathering.signature, "allgather"));
  auto bytesOf = [](const ddprt_buffer &buffer) {
    return size_t(buffer.numel) * ddprt_dtype_size(buffer.dtype);
  };
  size_t block = 0;
  for (const ddprt_buffer &input : gathering.inputs)
    block += bytesOf(input);
  // Kept from call to call (per thread: the caller may run queued work):
  // a step gathers the same sizes every time, and fresh pages cost a page
  // fault each. Not zero-filled: every byte is written before it is read.
  thread_local std::vector<char> sentBuffer, receivedBuffer;
  if (sentBuffer.size() < block)
    sentBuffer.resize(block);
  if (receivedBuffer.size() < block * size_t(collectives.size()))
    receivedBuffer.resize(block * size_t(collectives.size()));
  char *sent = sentBuffer.data(), *received = receivedBuffer.data();
  size_t offset = 0;
  for (const ddprt_buffer &input : gathering.inputs) {
    if (bytesOf(input) > 0)
      std::memcpy(sent + offset, input.data, bytesOf(input));
    offset += bytesOf(input);
  }
  DDPRT_TRY(collectives.gather(sent, int64_t(block), received));
  offset = 0;
  for (size_t i = 0; i < gathering.inputs.size(); ++i) {
    size_t bytes = bytesOf(gathering.inputs[i]);
    char *output = static_cast<char *>(gathering.outputs[i].data);
    for (int rank = 0; bytes > 0 && rank < collectives.size(); ++rank)
      std::memcpy(output + size_t(rank) * bytes,
                  received + size_t(rank) * block + offset, bytes);
    offset += bytes;
  }
  return Error::success();
}

/// A bucket queued on the communicator; a mismatch or a failure of its
/// collectives is reported by the wait.
class CpuRequest : public Request {
public:
  std::shared_ptr<Operation> operation;
};

class CpuBackend : public Backend {
public:
  explicit CpuBackend(Communicator &communicator)
      : communicator_(communicator) {}

  /// Through the queue, so that it keeps its place among started ones.
  Error allreduce(ddprt_group group, ddprt_reduction reduction,
                  ddprt_buffer *buffers, int count) override {
    return communicator_.run(reduceWork(group, reduction, buffers, count));
  }

  Error allreduceStart(ddprt_group group, ddprt_reduction reduction,
                       ddprt_buffer *buffers, int count,
                       std::unique_ptr<Request> &result) override {
    auto request = std::make_unique<CpuRequest>();
    request->operation =
        communicator_.start(reduceWork(group, reduction, buffers, count));
    result = std::move(request);
    return Error::success();
  }

  Error wait(Request &request) override {
    return communicator_.wait(*static_cast<CpuRequest &>(request).operation);
  }

  /// Through the queue too, after the allreduces started before it.
  Error allgather(const ddprt_buffer *inputs, const ddprt_buffer *outputs,
                  int count) override {
    Gathering gathering{std::vector<ddprt_buffer>(inputs, inputs + count),
                        std::vector<ddprt_buffer>(outputs, outputs + count),
                        allgatherSignature(inputs, count)};
    return communicator_.run(
        [gathering = std::move(gathering)](Collectives &collectives) {
          return gather(collectives, gathering);
        });
  }

  Error completed(Request &request, bool &done) override {
    done =
        communicator_.completed(*static_cast<CpuRequest &>(request).operation);
    return Error::success();
  }

  /// The queue is drained: nothing is in flight.
  Error synchronize() override { return communicator_.drain(); }

  /// Host code may touch every buffer but those of started collectives,
  /// which belong to the communication thread until their wait.
  Error hostBarrier() override { return Error::success(); }

  /// Completes what is still queued (within the timeout) before the states
  /// it may reduce are freed.
  void shutdown() override { (void)communicator_.drain(); }

  Error scale(double factor, ddprt_buffer *buffers, int count) override {
    for (int i = 0; i < count; ++i)
      scaleHost(factor, buffers[i]);
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

  Error gemm(bool transposeA, bool transposeB, int64_t batch, int64_t m,
             int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
             int64_t strideA, const float *b, int64_t ldb, int64_t strideB,
             float beta, float *c, int64_t ldc, int64_t strideC) override {
    cpu::gemm(transposeA, transposeB, batch, m, n, k, alpha, a, lda, strideA,
              b, ldb, strideB, beta, c, ldc, strideC);
    return Error::success();
  }

  void setComputeThreads(int threads) override {
    cpu::setGemmThreads(threads);
  }

  Error randomNormal(ddprt_buffer output, uint64_t seed, uint64_t stream,
                     uint64_t step) override {
    cpu::randomNormal(output, seed, stream, step);
    return Error::success();
  }

  Error topK(const ddprt_buffer &input, const ddprt_buffer &values,
             const ddprt_buffer &indices) override {
    cpu::topK(input, values, indices);
    return Error::success();
  }

  Error inspect(const ddprt_buffer *buffers, int count, bool *finite,
                bool *nonzero) override {
    for (int i = 0; i < count; ++i)
      inspectHost(buffers[i], finite[i], nonzero[i]);
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
  /// The work that checks and reduces the bucket (reduce), owning a copy
  /// of its buffer list and its staging buffer.
  static Communicator::Work reduceWork(ddprt_group group,
                                       ddprt_reduction reduction,
                                       ddprt_buffer *buffers, int count) {
    Bucket bucket{group,
                  reduction,
                  std::vector<ddprt_buffer>(buffers, buffers + count),
                  bucketSignature(reduction, buffers, count, group),
                  {}};
    return [bucket = std::move(bucket)](Collectives &collectives) mutable {
      return reduce(collectives, bucket);
    };
  }

  Communicator &communicator_;
};
} // namespace

std::unique_ptr<Backend> createCpuBackend(Communicator &communicator) {
  return std::make_unique<CpuBackend>(communicator);
}

} // namespace ddprt
