//===- CudaBackend.h - the CUDA/NCCL backend -------------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Two streams: `compute_` runs the kernels, `commStream_` runs NCCL (and the
// division of a mean's f16/bf16 buffers). A collective waits for the compute
// work before it (an event), and the compute work after it waits for the
// collective, so a started allreduce overlaps the compression kernels
// enqueued before its wait. Calls return once enqueued; ddprt_synchronize
// waits for the device.
//
// NCCL: the communicator is created nonblocking, so that a rank that never
// arrives is a timeout, and a blocking one is split from it for the
// collectives: a blocking ncclGroupEnd returns once the work is enqueued,
// with no proxy thread started and polled per group. A watchdog thread
// bounds everything that can wait on a peer: it polls each collective's
// completion event and ncclCommGetAsyncError, and when a collective is not
// done within the timeout (or NCCL reports an error) it revokes the
// communicator, which ends the NCCL kernels, so that a host blocked in
// ncclGroupEnd, in cudaLaunchKernel on a full queue, or in a synchronize
// returns; every later call fails with the reason.
//
// Each entry point selects this rank's device (its rank on the node, not
// the global rank, picks it), so that a host thread that switched devices
// does not enqueue work on the wrong one.
//
// The class is split by concern: NcclSetup.cpp creates, watches and
// releases the NCCL communicators (initialization, the watchdog, revoke
// and teardown); CudaBackend.cpp dispatches the runtime's calls to NCCL,
// cuBLAS and the fused kernels on the two streams.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_LIB_CUDA_CUDABACKEND_H
#define DDPRT_LIB_CUDA_CUDABACKEND_H

#include "../Backend.h"
#include "../Communicator.h"
#include "CompiledKernels.h"
#include "CudaKernels.h"
#include "Gemm.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ddprt {

using Clock = std::chrono::steady_clock;

inline double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline Error cudaFailure(cudaError_t code, const char *what) {
  return fail(DDPRT_ERROR_BACKEND,
              std::string(what) + " failed: " + cudaGetErrorString(code));
}

#define CUDA_TRY(call)                                                         \
  do {                                                                         \
    if (cudaError_t cudaCode = (call))                                         \
      return cudaFailure(cudaCode, #call);                                     \
  } while (false)

class CudaRequest : public Request {
public:
  cudaEvent_t done = nullptr;
  ~CudaRequest() override {
    if (done)
      cudaEventDestroy(done);
  }
};

class CudaBackend : public Backend {
public:
  CudaBackend(Communicator &communicator, const ddprt_options &options)
      : communicator_(communicator), options_(options),
        timeoutSeconds_(options.timeout_seconds) {}

  Error initialize();

  ~CudaBackend() override;

  /// Drains the streams (bounded by the timeout: a collective still stuck
  /// then is stopped, so the drain ends) and releases the communicators,
  /// healthy ones with ncclCommFinalize (bounded by the watchdog like a
  /// collective) before ncclCommDestroy.
  void shutdown() override;

  Error allreduce(ddprt_group group, ddprt_reduction reduction,
                  ddprt_buffer *buffers, int count) override;

  /// Fails with DDPRT_ERROR_MISMATCH unless every rank passes the same
  /// `signature`: over MPI (Communicator), or, in a job joined through
  /// NCCL, which has no MPI, through NCCL: the largest of each rank's hash
  /// and of its complement says whether every hash was the same.
  Error checkSameOnAllRanks(const std::vector<int64_t> &signature,
                            const char *what);

  /// NCCL's communicator spans the world: a group is served where it is
  /// the world (the node of a one-node job, the nodes of a job with one
  /// rank per node), refused otherwise.
  Error checkGroup(ddprt_group group);

  /// The mean as the CPU backend computes it: f16/bf16 are divided first,
  /// in f32 and rounded once (cuda::scale, on the communication stream), then
  /// summed; f32/f64 use ncclAvg (a pre-multiplication by 1/W in the element
  /// type). ncclAvg is not used for f16/bf16: NCCL rounds its 1/W to the
  /// narrow type (bf16(1/3) is 0.2% too large), which biases every mean
  /// where W is not a power of two.
  Error allreduceStart(ddprt_group group, ddprt_reduction reduction,
                       ddprt_buffer *buffers, int count,
                       std::unique_ptr<Request> &result) override;

  /// Ordered as an allreduce and its wait are: after the compute work
  /// before it, on the communication stream (so after the allreduces
  /// started before it), and the compute work after it waits for it.
  Error allgather(const ddprt_buffer *inputs, const ddprt_buffer *outputs,
                  int count) override;

  /// Later compute waits for the collective on the device; the host does
  /// not block.
  Error wait(Request &base) override;

  /// Whether the collective finished on the device.
  Error completed(Request &base, bool &done) override;

  Error synchronize() override { return drain(/*communication=*/true); }

  /// The compute stream only: a collective started and not yet waited for
  /// keeps running on the communication stream (a wait made the compute
  /// stream wait for its collective, so waited ones are drained too).
  Error hostBarrier() override { return drain(/*communication=*/false); }

  /// Blocks until the compute stream (and the communication stream, if
  /// `communication`) has run everything enqueued, within the timeout.
  Error drain(bool communication);

  Error scale(double factor, ddprt_buffer *buffers, int count) override;

  Error cast(double factor, const ddprt_buffer *inputs, ddprt_buffer *outputs,
             int count) override;

  Error project(const ddprt_matrix *matrices, const ddprt_matrix *residuals,
                const ddprt_matrix *qs, ddprt_matrix *ps, int count) override;

  Error backproject(const ddprt_matrix *matrices, const ddprt_matrix *residuals,
                    const ddprt_matrix *ps, ddprt_matrix *qs,
                    int count) override;

  Error orthogonalize(ddprt_matrix *ps, int count, double epsilon) override;

  Error reconstruct(const ddprt_matrix *ps, const ddprt_matrix *qs,
                    const ddprt_matrix *matrices, ddprt_matrix *residuals,
                    ddprt_matrix *reconstructions, int count) override;

  Error gemm(bool transposeA, bool transposeB, int64_t batch, int64_t m,
             int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
             int64_t strideA, const float *b, int64_t ldb, int64_t strideB,
             float beta, float *c, int64_t ldc, int64_t strideC) override;

  Error randomNormal(ddprt_buffer output, uint64_t seed, uint64_t stream,
                     uint64_t step) override;

  Error topK(const ddprt_buffer &input, const ddprt_buffer &values,
             const ddprt_buffer &indices) override;

  Error launchKernel(const void *image, const char *name, const int64_t grid[3],
                     const int64_t block[3], int32_t sharedBytes,
                     void **params) override;

  Error allocateZeroed(size_t bytes, void **pointer) override;

  /// After shutdown() the device is idle (or its collectives revoked), so
  /// the implicit synchronization of cudaFree is bounded.
  void deallocate(void *pointer) override;

  Error copyToHost(void *host, const void *source, size_t bytes) override;

  /// On the compute stream, and waited for: a plain cudaMemcpy from pageable
  /// memory returns once the data is staged, before the DMA lands, and runs
  /// on the legacy stream, which the non-blocking compute stream does not
  /// wait for, so the next kernel could read the old contents.
  Error copyFromHost(void *destination, const void *host,
                     size_t bytes) override;

  /// Managed memory: host code reads and writes it, kernels and NCCL too.
  Error allocateShared(size_t bytes, void **pointer) override;

  void deallocateShared(void *pointer) override;

  /// From the device's default pool, which keeps freed memory (its
  /// release threshold raised once): a step's temporaries cost no driver
  /// call after the first step.
  Error allocateDevice(size_t bytes, void **pointer) override;

  Error deallocateDevice(void *pointer) override;

  /// cudaMemcpyDefault lets unified addressing find where each side lives.
  /// A host destination is only complete after ddprt_synchronize.
  Error copy(void *destination, const void *source, size_t bytes) override;

private:
  //===--- Entry, errors, stopping the communicators ----------------------===//

  Error selectDevice();

  /// Every entry point that enqueues work: this rank's device, and no work
  /// after the communicator failed (the data it would read is suspect).
  Error enter();

  /// The reason the communicator was revoked or aborted, as an error.
  Error failure();

  Error ncclCheck(ncclResult_t result, const char *what);

  /// Stops the communicators once, from any thread: revoked where NCCL can
  /// (the handles stay valid for a thread inside an NCCL call), aborted
  /// otherwise. Their kernels end, so the streams drain. With an NCCL older
  /// than 2.28 (no revoke) an abort from the watchdog frees the
  /// communicator while the host thread may be inside an NCCL call on it,
  /// as PyTorch's watchdog does; 2.28 and later do not have that hazard.
  void abortCommunicators(const std::string &reason, bool timedOut = false);

  /// Polls a nonblocking communicator until it leaves ncclInProgress.
  Error waitUntilReady(ncclComm_t comm, const char *what);

  /// After ncclCommFinalize or ncclCommRevoke: waits (bounded by the
  /// timeout, or 10 s without one) for the communicator to leave
  /// ncclInProgress; whether it did.
  bool waitUntilQuiet(ncclComm_t comm);

  void waitForStreams(double seconds);

  //===--- The watchdog (NcclSetup.cpp) -----------------------------------===//

  /// A collective being enqueued (done == nullptr) or in flight.
  struct InFlight {
    uint64_t id;
    Clock::time_point start;
    cudaEvent_t done = nullptr;
    bool enqueued = false;
  };

  uint64_t beginWatched();

  /// The collective `id` is enqueued; `done` (or nothing, if it failed to
  /// enqueue or has no event) marks its end on the device.
  void endWatched(uint64_t id, cudaEvent_t done);

  /// Enqueues operations 0 to count - 1 on the communication stream in NCCL
  /// groups (`operation(i)` enqueues the i-th on ncclComm_ and commStream_,
  /// or nothing, and says what NCCL answered), each watched by the watchdog
  /// from here to its end on the device.
  template <typename Operation>
  Error enqueueGrouped(int count, Operation &&operation) {
    // Older NCCL releases take at most 2048 operations per group.
    constexpr int kMaxGroupOps = 2048;
    for (int begin = 0; begin < count; begin += kMaxGroupOps) {
      int end = std::min(count, begin + kMaxGroupOps);
      uint64_t watched = beginWatched();
      if (!ncclComm_ || failed_.load()) {
        endWatched(watched, nullptr);
        return failed_.load()
                   ? failure()
                   : fail(DDPRT_ERROR_STATE, "the NCCL communicator is gone");
      }
      Error enqueued = ncclCheck(ncclGroupStart(), "ncclGroupStart");
      for (int i = begin; i < end && !enqueued; ++i)
        enqueued = operation(i);
      // The group is closed on every path: an open group would swallow
      // every later NCCL call of this thread.
      ncclResult_t grouped = ncclGroupEnd();
      cudaEvent_t done = nullptr;
      if (!enqueued && grouped == ncclSuccess)
        done = recordOnComm();
      endWatched(watched, done);
      if (Error failed = failure())
        return failed;
      if (enqueued || grouped != ncclSuccess) {
        Error error = enqueued ? enqueued : ncclCheck(grouped, "ncclGroupEnd");
        // This rank now runs a different sequence of collectives than its
        // peers: the communicator cannot be used again.
        abortCommunicators(error.message);
        return error;
      }
    }
    return Error::success();
  }

  /// An event recorded on the communication stream, from the pool.
  cudaEvent_t recordOnComm();

  /// Every millisecond: retires finished collectives, stops the
  /// communicators when the oldest one is older than the timeout or NCCL
  /// reports an asynchronous error.
  void watch();

  //===--- cuBLAS or the fused kernels (CudaBackend.cpp) ------------------===//

  struct Group {
    std::vector<ddprt_matrix> matrices, residuals, factors, outputs;
  };

  struct Split {
    Group fused, gemm;
  };

  /// The tensors of one call by the projector the policy chooses for each.
  Split splitByProjector(const ddprt_matrix *matrices,
                         const ddprt_matrix *residuals,
                         const ddprt_matrix *factors, ddprt_matrix *outputs,
                         int count);

  using FusedProjection = cudaError_t (*)(const ddprt_matrix *,
                                          const ddprt_matrix *,
                                          const ddprt_matrix *,
                                          const ddprt_matrix *, int,
                                          cuda::Scratch &, cudaStream_t);

  using GemmProjection = cublasStatus_t (cuda::Gemm::*)(const ddprt_matrix &,
                                                        const ddprt_matrix *,
                                                        const ddprt_matrix &,
                                                        const ddprt_matrix &);

  /// One projection (project or backproject) over `count` tensors: those
  /// the policy gives to the fused kernels in one call, the others through
  /// cuBLAS one by one.
  Error projection(FusedProjection fused, GemmProjection gemm, const char *what,
                   const ddprt_matrix *matrices, const ddprt_matrix *residuals,
                   const ddprt_matrix *factors, ddprt_matrix *outputs,
                   int count);

  Error prepareGemm();

  Communicator &communicator_;

  /// The context's options: device, stream, how the job was joined.
  const ddprt_options options_;

  double timeoutSeconds_;

  /// Whether compute_ is the runtime's own (else the caller's stream).
  bool ownsCompute_ = true;

  /// Two words on the device for the shape check of a job joined through
  /// NCCL (checkSameOnAllRanks).
  void *signatureWords_ = nullptr;

  int device_ = 0;

  cudaStream_t compute_ = nullptr, commStream_ = nullptr;

  /// ready_: the compute stream's work so far, for the communication
  /// stream to wait for; gathered_: a blocking allgather's end, for the
  /// compute stream to wait for. Recorded anew by each call.
  cudaEvent_t ready_ = nullptr, gathered_ = nullptr;

  /// initComm_: the nonblocking communicator; ncclComm_: the blocking one
  /// split from it, which the collectives use. Written under mutex_ (the
  /// watchdog reads them).
  ncclComm_t initComm_ = nullptr, ncclComm_ = nullptr;

  // One Scratch per stream: reuse is safe only in one stream's order.
  cuda::Scratch scratch_, commScratch_;

  /// The kernels compiled steps launch (ddprt_launch_kernel).
  cuda::CompiledKernels compiled_;

  /// Whether the default pool keeps what ddprt_device_free returns.
  bool poolKept_ = false;

  cuda::ProjectorPolicy policy_;

  cuda::Gemm gemm_;

  bool shutDown_ = false;

  // The watchdog's state, under mutex_.
  std::mutex mutex_;

  std::condition_variable wake_;

  std::thread watchdog_;

  std::deque<InFlight> inFlight_;

  std::vector<cudaEvent_t> eventPool_;

  uint64_t nextId_ = 0;

  bool stopWatchdog_ = false;

  std::atomic<bool> failed_{false};

  bool timedOut_ = false;

  bool abortedWithoutRevoke_ = false;

  std::string failureReason_;
};

} // namespace ddprt

#endif // DDPRT_LIB_CUDA_CUDABACKEND_H
