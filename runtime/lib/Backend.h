//===- Backend.h - what a backend implements --------------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One interface, a CPU (MPI) and a CUDA (NCCL) implementation. The C API
// validates arguments, keeps the counters and the state, and calls these.
// Pointers are backend memory (host for CPU, device for CUDA).
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_BACKEND_H
#define DDPRT_BACKEND_H

#include "Error.h"
#include "ddprt/ddprt.h"

#include <cstddef>
#include <memory>

namespace ddprt {

class Communicator;

/// An allreduce in flight.
class Request {
public:
  virtual ~Request() = default;
};

class Backend {
public:
  virtual ~Backend() = default;

  /// `factor` is the world-size factor already resolved to a number.
  /// Over the ranks of `group` (ddprt_group).
  virtual Error allreduce(ddprt_group group, ddprt_reduction reduction,
                          ddprt_buffer *buffers, int count) = 0;
  virtual Error allreduceStart(ddprt_group group, ddprt_reduction reduction,
                               ddprt_buffer *buffers, int count,
                               std::unique_ptr<Request> &request) = 0;
  virtual Error wait(Request &request) = 0;
  /// Every rank's inputs[i] into outputs[i], rank-major, as one collective
  /// (validated: outputs[i] holds world size times inputs[i]). Blocking, and
  /// ordered after the allreduces started before it.
  virtual Error allgather(const ddprt_buffer *inputs,
                          const ddprt_buffer *outputs, int count) = 0;
  /// Whether the request has completed (on the device, for CUDA), without
  /// waiting or making progress.
  virtual Error completed(Request &request, bool &done) = 0;
  /// Blocks until everything enqueued so far is done (a no-op where calls
  /// complete before they return).
  virtual Error synchronize() = 0;
  /// Blocks until host code may touch what the calls so far wrote or read:
  /// everything but collectives started and not yet waited for (see
  /// ddprt_host_barrier). By default, synchronize.
  virtual Error hostBarrier() { return synchronize(); }
  /// Before the state is freed: waits for the device, within the timeout
  /// (stopping communication that does not finish), and releases the
  /// communicators. No call but deallocate follows.
  virtual void shutdown() {}

  virtual Error scale(double factor, ddprt_buffer *buffers, int count) = 0;
  virtual Error cast(double factor, const ddprt_buffer *inputs,
                     ddprt_buffer *outputs, int count) = 0;

  virtual Error project(const ddprt_matrix *matrices,
                        const ddprt_matrix *residuals, const ddprt_matrix *qs,
                        ddprt_matrix *ps, int count) = 0;
  virtual Error backproject(const ddprt_matrix *matrices,
                            const ddprt_matrix *residuals,
                            const ddprt_matrix *ps, ddprt_matrix *qs,
                            int count) = 0;
  virtual Error orthogonalize(ddprt_matrix *ps, int count, double epsilon) = 0;
  virtual Error reconstruct(const ddprt_matrix *ps, const ddprt_matrix *qs,
                            const ddprt_matrix *matrices,
                            ddprt_matrix *residuals,
                            ddprt_matrix *reconstructions, int count) = 0;
  /// ddprt_gemm, its arguments checked.
  virtual Error gemm(bool transposeA, bool transposeB, int64_t batch,
                     int64_t m, int64_t n, int64_t k, float alpha,
                     const float *a, int64_t lda, int64_t strideA,
                     const float *b, int64_t ldb, int64_t strideB, float beta,
                     float *c, int64_t ldc, int64_t strideC) = 0;
  /// ddprt_set_compute_threads (threads >= 1); backends without host
  /// threads of their own ignore it.
  virtual void setComputeThreads(int threads) { (void)threads; }
  virtual Error randomNormal(ddprt_buffer output, uint64_t seed,
                             uint64_t stream, uint64_t step) = 0;
  /// ddprt_top_k, its arguments checked.
  virtual Error topK(const ddprt_buffer &input, const ddprt_buffer &values,
                     const ddprt_buffer &indices) = 0;
  /// Per buffer: whether every element is finite and whether any is
  /// nonzero (`finite[i]`, `nonzero[i]`). Waits for the data. This default
  /// copies each buffer to the host (backend memory); the CPU backend reads
  /// them where they are.
  virtual Error inspect(const ddprt_buffer *buffers, int count, bool *finite,
                        bool *nonzero);

  /// ddprt_launch_kernel, its arguments checked (every grid and block
  /// dimension positive). By default: unsupported (no device to run it).
  virtual Error launchKernel(const void *image, const char *name,
                             const int64_t grid[3], const int64_t block[3],
                             int32_t sharedBytes, void **params);

  /// Zero-initialized backend memory for persistent state.
  virtual Error allocateZeroed(size_t bytes, void **pointer) = 0;
  virtual void deallocate(void *pointer) = 0;
  virtual Error copyToHost(void *host, const void *source, size_t bytes) = 0;
  virtual Error copyFromHost(void *destination, const void *host,
                             size_t bytes) = 0;
  /// Memory that both the host and the backend can address (for buffers
  /// that host code and runtime calls share).
  virtual Error allocateShared(size_t bytes, void **pointer) = 0;
  virtual void deallocateShared(void *pointer) = 0;
  /// Memory only the backend addresses, allocated and freed in stream
  /// order (ddprt_device_alloc). By default, shared memory.
  virtual Error allocateDevice(size_t bytes, void **pointer) {
    return allocateShared(bytes, pointer);
  }
  virtual Error deallocateDevice(void *pointer) {
    deallocateShared(pointer);
    return Error::success();
  }
  /// Copies between any two buffers the backend can address (host or
  /// device), ordered with the other calls.
  virtual Error copy(void *destination, const void *source, size_t bytes) = 0;
};

/// The CPU backend: MPI collectives over `communicator`, C++ kernels.
std::unique_ptr<Backend> createCpuBackend(Communicator &communicator);

/// The CUDA backend: NCCL collectives (its id broadcast over
/// `communicator`, or the caller's id or communicator: ddprt_join_kind),
/// CUDA kernels; one GPU per rank (options.device), on options.stream or
/// its own. Fails with DDPRT_ERROR_UNSUPPORTED or DDPRT_ERROR_BACKEND where
/// there is no usable device. Only in builds with CUDA (DDPRT_HAVE_CUDA).
Error createCudaBackend(Communicator &communicator,
                        const ddprt_options &options,
                        std::unique_ptr<Backend> &backend);
/// A new ncclUniqueId's DDPRT_NCCL_UNIQUE_ID_BYTES bytes (CUDA builds).
Error newNcclUniqueId(unsigned char *id);

} // namespace ddprt

#endif // DDPRT_BACKEND_H
