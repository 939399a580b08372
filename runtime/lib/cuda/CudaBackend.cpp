//===- CudaBackend.cpp - NCCL collectives and CUDA kernels ----------------===//
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
//===----------------------------------------------------------------------===//

#include "../Backend.h"
#include "../Communicator.h"
#include "CompiledKernels.h"
#include "CudaKernels.h"
#include "Gemm.h"

#include <cstring>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ddprt {

namespace {
using Clock = std::chrono::steady_clock;

Error cudaFailure(cudaError_t code, const char *what) {
  return fail(DDPRT_ERROR_BACKEND,
              std::string(what) + " failed: " + cudaGetErrorString(code));
}

#define CUDA_TRY(call)                                                         \
  do {                                                                         \
    if (cudaError_t cudaCode = (call))                                         \
      return cudaFailure(cudaCode, #call);                                     \
  } while (false)

Error cublasFailure(cublasStatus_t status, const char *what) {
  return fail(DDPRT_ERROR_BACKEND, std::string(what) + " failed: cuBLAS " +
                                       cublasGetStatusString(status));
}

ncclDataType_t ncclType(ddprt_dtype dtype) {
  switch (dtype) {
  case DDPRT_F32:
    return ncclFloat32;
  case DDPRT_F64:
    return ncclFloat64;
  case DDPRT_F16:
    return ncclFloat16;
  case DDPRT_BF16:
    return ncclBfloat16;
  // Not summed: the C API keeps integers from allreduces.
  case DDPRT_I8:
    return ncclInt8;
  case DDPRT_I32:
    return ncclInt32;
  case DDPRT_I64:
    return ncclInt64;
  }
  return ncclFloat32; // not reached: the C API validated the dtype
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// ncclCommRevoke (NCCL 2.28+) stops a communicator's operations without
/// freeing it, so another thread may still hold the handle; older NCCLs
/// only have ncclCommAbort. Looked up at run time: the GPU machines' NCCL
/// need not be the one built against.
using RevokeFn = ncclResult_t (*)(ncclComm_t, int);
RevokeFn revokeFunction() {
  static RevokeFn revoke =
      reinterpret_cast<RevokeFn>(dlsym(RTLD_DEFAULT, "ncclCommRevoke"));
  return revoke;
}

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

  Error initialize() {
    std::string policyMessage;
    if (!policy_.readEnvironment(policyMessage))
      return fail(DDPRT_ERROR_INVALID_ARGUMENT, policyMessage);
    int devices = 0;
    if (cudaError_t code = cudaGetDeviceCount(&devices))
      return fail(DDPRT_ERROR_UNSUPPORTED,
                  std::string("no usable CUDA device: ") +
                      cudaGetErrorString(code));
    if (devices == 0)
      return fail(DDPRT_ERROR_UNSUPPORTED, "no usable CUDA device: none found");
    // One GPU per rank: the caller's (ddprt_options.device), or the ranks
    // of a node take its devices in turn.
    if (options_.device >= devices)
      return fail(DDPRT_ERROR_INVALID_ARGUMENT,
                  "device " + std::to_string(options_.device) + ", but " +
                      std::to_string(devices) + " CUDA devices are visible");
    device_ = options_.device >= 0 ? options_.device
                                   : communicator_.localRank() % devices;
    CUDA_TRY(cudaSetDevice(device_));
    // Compiled steps and the kernels run on the caller's stream where it
    // gave one (PyTorch's current stream: what it queued comes first).
    if (options_.stream) {
      compute_ = static_cast<cudaStream_t>(options_.stream);
      ownsCompute_ = false;
    } else {
      CUDA_TRY(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    }
    CUDA_TRY(cudaStreamCreateWithFlags(&commStream_, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    CUDA_TRY(cudaEventCreateWithFlags(&gathered_, cudaEventDisableTiming));
    ncclComm_t parent = nullptr;
    if (options_.join == DDPRT_JOIN_NCCL_COMM) {
      // The caller's communicator: checked against the rank and size it
      // said, then only split (never finalized or destroyed here).
      parent =
          static_cast<ncclComm_t>(const_cast<void *>(options_.join_handle));
      int count = 0, rank = 0;
      DDPRT_TRY(ncclCheck(ncclCommCount(parent, &count), "ncclCommCount"));
      DDPRT_TRY(ncclCheck(ncclCommUserRank(parent, &rank), "ncclCommUserRank"));
      if (count != communicator_.size() || rank != communicator_.rank())
        return fail(DDPRT_ERROR_INVALID_ARGUMENT,
                    "the NCCL communicator is rank " + std::to_string(rank) +
                        " of " + std::to_string(count) +
                        ", but join_rank and join_world_size say " +
                        std::to_string(communicator_.rank()) + " of " +
                        std::to_string(communicator_.size()));
    } else {
      ncclUniqueId id{};
      static_assert(sizeof(id) == DDPRT_NCCL_UNIQUE_ID_BYTES,
                    "ddprt_options.nccl_unique_id holds an ncclUniqueId");
      if (options_.join == DDPRT_JOIN_NCCL_UNIQUE_ID) {
        std::memcpy(&id, options_.nccl_unique_id, sizeof(id));
      } else {
        // Rank 0 sends the id, or word that it has none, so that the other
        // ranks fail with it instead of waiting in the broadcast.
        struct {
          int ok;
          ncclUniqueId id;
        } shared{};
        Error idError;
        if (communicator_.rank() == 0) {
          idError = ncclCheck(ncclGetUniqueId(&shared.id), "ncclGetUniqueId");
          shared.ok = !idError;
        }
        DDPRT_TRY(communicator_.broadcast(&shared, int(sizeof(shared))));
        if (idError)
          return idError;
        if (!shared.ok)
          return fail(DDPRT_ERROR_COMMUNICATION,
                      "rank 0 could not create the NCCL unique id");
        id = shared.id;
      }
      // Nonblocking init, so that a rank that never arrives times out.
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      ncclResult_t result = ncclCommInitRankConfig(
          &initComm_, communicator_.size(), id, communicator_.rank(), &config);
      if (result != ncclSuccess && result != ncclInProgress)
        return ncclCheck(result, "ncclCommInitRankConfig");
      DDPRT_TRY(waitUntilReady(initComm_, "ncclCommInitRankConfig"));
      parent = initComm_;
    }
    // The blocking communicator the collectives use. The split is itself a
    // collective: the watchdog bounds it like one.
    watchdog_ = std::thread([this] { watch(); });
    ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER;
    blocking.blocking = 1;
    uint64_t split = beginWatched();
    ncclComm_t collectives = nullptr;
    ncclResult_t result =
        ncclCommSplit(parent, 0, communicator_.rank(), &collectives, &blocking);
    endWatched(split, nullptr);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ncclComm_ = collectives;
    }
    if (Error failed = failure())
      return failed;
    if (result != ncclSuccess && result != ncclInProgress)
      return ncclCheck(result, "ncclCommSplit");
    return waitUntilReady(ncclComm_, "ncclCommSplit");
  }

  ~CudaBackend() override {
    shutdown();
    gemm_.release();
    scratch_.release();
    commScratch_.release();
    compiled_.release();
    for (cudaEvent_t event : eventPool_)
      cudaEventDestroy(event);
    for (InFlight &entry : inFlight_)
      if (entry.done)
        cudaEventDestroy(entry.done);
    if (ready_)
      cudaEventDestroy(ready_);
    if (gathered_)
      cudaEventDestroy(gathered_);
    if (signatureWords_)
      cudaFree(signatureWords_);
    if (compute_ && ownsCompute_)
      cudaStreamDestroy(compute_);
    if (commStream_)
      cudaStreamDestroy(commStream_);
  }

  /// Drains the streams (bounded by the timeout: a collective still stuck
  /// then is stopped, so the drain ends) and releases the communicators,
  /// healthy ones with ncclCommFinalize (bounded by the watchdog like a
  /// collective) before ncclCommDestroy.
  void shutdown() override {
    if (shutDown_)
      return;
    shutDown_ = true;
    cudaSetDevice(device_);
    if (compute_ && commStream_ && synchronize()) {
      abortCommunicators("the runtime was finalized with a collective "
                         "still running");
      waitForStreams(timeoutSeconds_ > 0 ? timeoutSeconds_ : 10.0);
    }
    if (!failed_.load()) {
      uint64_t id = beginWatched();
      for (ncclComm_t comm : {ncclComm_, initComm_})
        if (comm && ncclCommFinalize(comm) == ncclInProgress)
          waitUntilQuiet(comm);
      endWatched(id, nullptr);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopWatchdog_ = true;
    }
    wake_.notify_all();
    if (watchdog_.joinable())
      watchdog_.join();
    // No other thread uses the communicators now. An aborted one is freed
    // already. A revoked one may be destroyed once it is quiet (nccl.h);
    // one that does not get there within the bound is aborted instead.
    for (ncclComm_t *comm : {&ncclComm_, &initComm_}) {
      if (*comm && !abortedWithoutRevoke_) {
        if (failed_.load() && !waitUntilQuiet(*comm))
          ncclCommAbort(*comm);
        else
          ncclCommDestroy(*comm);
      }
      *comm = nullptr;
    }
  }

  Error allreduce(ddprt_group group, ddprt_reduction reduction,
                  ddprt_buffer *buffers, int count) override {
    std::unique_ptr<Request> request;
    DDPRT_TRY(allreduceStart(group, reduction, buffers, count, request));
    return wait(*request);
  }

  /// Fails with DDPRT_ERROR_MISMATCH unless every rank passes the same
  /// `signature`: over MPI (Communicator), or, in a job joined through
  /// NCCL, which has no MPI, through NCCL: the largest of each rank's hash
  /// and of its complement says whether every hash was the same.
  Error checkSameOnAllRanks(const std::vector<int64_t> &signature,
                            const char *what) {
    if (!communicator_.joinedByNccl())
      return communicator_.checkSameOnAllRanks(signature, what);
    if (!options_.check_shapes || communicator_.size() == 1)
      return Error::success();
    uint64_t hash = 1469598103934665603ull;
    for (int64_t word : signature)
      for (int byte = 0; byte < 8; ++byte) {
        hash ^= uint8_t(uint64_t(word) >> (8 * byte));
        hash *= 1099511628211ull;
      }
    int64_t words[2] = {int64_t(hash >> 1), int64_t(~hash >> 1)};
    if (!signatureWords_)
      CUDA_TRY(cudaMalloc(&signatureWords_, sizeof(words)));
    CUDA_TRY(cudaMemcpyAsync(signatureWords_, words, sizeof(words),
                             cudaMemcpyHostToDevice, commStream_));
    uint64_t id = beginWatched();
    ncclResult_t result =
        ncclAllReduce(signatureWords_, signatureWords_, 2, ncclInt64, ncclMax,
                      ncclComm_, commStream_);
    int64_t largest[2] = {};
    cudaError_t copied =
        result == ncclSuccess
            ? cudaMemcpyAsync(largest, signatureWords_, sizeof(largest),
                              cudaMemcpyDeviceToHost, commStream_)
            : cudaSuccess;
    cudaError_t synchronized = cudaStreamSynchronize(commStream_);
    endWatched(id, nullptr);
    if (Error failed = failure())
      return failed;
    DDPRT_TRY(ncclCheck(result, "ncclAllReduce"));
    CUDA_TRY(copied);
    CUDA_TRY(synchronized);
    if (largest[0] != words[0] || largest[1] != words[1])
      return fail(DDPRT_ERROR_MISMATCH,
                  std::string(what) +
                      ": ranks passed different buffers (their "
                      "count, sizes, types or reduction "
                      "differ; rank " +
                      std::to_string(communicator_.rank()) + ")");
    return Error::success();
  }

  /// NCCL's communicator spans the world: a group is served where it is
  /// the world (the node of a one-node job, the nodes of a job with one
  /// rank per node), refused otherwise.
  Error checkGroup(ddprt_group group) {
    bool world =
        group == DDPRT_GROUP_WORLD ||
        (group == DDPRT_GROUP_NODE && communicator_.nodeCount() == 1) ||
        (group == DDPRT_GROUP_ACROSS_NODES && communicator_.ranksOnNode() == 1);
    if (world)
      return Error::success();
    return fail(DDPRT_ERROR_UNSUPPORTED,
                "the CUDA backend reduces within or across nodes only where "
                "that is every rank (one node, or one rank per node); this "
                "job has " +
                    std::to_string(communicator_.nodeCount()) + " nodes of " +
                    std::to_string(communicator_.ranksOnNode()) + " ranks");
  }

  /// The mean as the CPU backend computes it: f16/bf16 are divided first,
  /// in f32 and rounded once (cuda::scale, on the communication stream), then
  /// summed; f32/f64 use ncclAvg (a pre-multiplication by 1/W in the element
  /// type). ncclAvg is not used for f16/bf16: NCCL rounds its 1/W to the
  /// narrow type (bf16(1/3) is 0.2% too large), which biases every mean
  /// where W is not a power of two.
  Error allreduceStart(ddprt_group group, ddprt_reduction reduction,
                       ddprt_buffer *buffers, int count,
                       std::unique_ptr<Request> &result) override {
    DDPRT_TRY(enter());
    DDPRT_TRY(checkGroup(group));
    DDPRT_TRY(checkSameOnAllRanks(
        bucketSignature(reduction, buffers, count, group), "allreduce"));
    auto request = std::make_unique<CudaRequest>();
    CUDA_TRY(cudaEventCreateWithFlags(&request->done, cudaEventDisableTiming));
    CUDA_TRY(cudaEventRecord(ready_, compute_));
    CUDA_TRY(cudaStreamWaitEvent(commStream_, ready_, 0));
    // checkGroup left only groups that are the world.
    int world = communicator_.size();
    bool mean = reduction == DDPRT_MEAN && world > 1;
    auto narrow = [](ddprt_dtype dtype) {
      return dtype == DDPRT_F16 || dtype == DDPRT_BF16;
    };
    if (mean) {
      std::vector<ddprt_buffer> divideFirst;
      for (int i = 0; i < count; ++i)
        if (buffers[i].numel > 0 && narrow(buffers[i].dtype))
          divideFirst.push_back(buffers[i]);
      CUDA_TRY(cuda::scale(1.0 / world, divideFirst.data(),
                           int(divideFirst.size()), commScratch_, commStream_));
    }
    DDPRT_TRY(enqueueGrouped(count, [&](int i) {
      if (buffers[i].numel == 0)
        return Error::success();
      ncclRedOp_t op = mean && !narrow(buffers[i].dtype) ? ncclAvg : ncclSum;
      return ncclCheck(ncclAllReduce(buffers[i].data, buffers[i].data,
                                     size_t(buffers[i].numel),
                                     ncclType(buffers[i].dtype), op, ncclComm_,
                                     commStream_),
                       "ncclAllReduce");
    }));
    CUDA_TRY(cudaEventRecord(request->done, commStream_));
    result = std::move(request);
    return Error::success();
  }

  /// Ordered as an allreduce and its wait are: after the compute work
  /// before it, on the communication stream (so after the allreduces
  /// started before it), and the compute work after it waits for it.
  Error allgather(const ddprt_buffer *inputs, const ddprt_buffer *outputs,
                  int count) override {
    DDPRT_TRY(enter());
    DDPRT_TRY(
        checkSameOnAllRanks(allgatherSignature(inputs, count), "allgather"));
    CUDA_TRY(cudaEventRecord(ready_, compute_));
    CUDA_TRY(cudaStreamWaitEvent(commStream_, ready_, 0));
    DDPRT_TRY(enqueueGrouped(count, [&](int i) {
      if (inputs[i].numel == 0)
        return Error::success();
      return ncclCheck(ncclAllGather(inputs[i].data, outputs[i].data,
                                     size_t(inputs[i].numel),
                                     ncclType(inputs[i].dtype), ncclComm_,
                                     commStream_),
                       "ncclAllGather");
    }));
    CUDA_TRY(cudaEventRecord(gathered_, commStream_));
    CUDA_TRY(cudaStreamWaitEvent(compute_, gathered_, 0));
    return Error::success();
  }

  /// Later compute waits for the collective on the device; the host does
  /// not block.
  Error wait(Request &base) override {
    DDPRT_TRY(enter());
    auto &request = static_cast<CudaRequest &>(base);
    CUDA_TRY(cudaStreamWaitEvent(compute_, request.done, 0));
    return Error::success();
  }

  /// Whether the collective finished on the device.
  Error completed(Request &base, bool &done) override {
    DDPRT_TRY(enter());
    cudaError_t state = cudaEventQuery(static_cast<CudaRequest &>(base).done);
    done = state != cudaErrorNotReady;
    if (!done)
      return Error::success();
    CUDA_TRY(state);
    return Error::success();
  }

  Error synchronize() override { return drain(/*communication=*/true); }

  /// The compute stream only: a collective started and not yet waited for
  /// keeps running on the communication stream (a wait made the compute
  /// stream wait for its collective, so waited ones are drained too).
  Error hostBarrier() override { return drain(/*communication=*/false); }

  /// Blocks until the compute stream (and the communication stream, if
  /// `communication`) has run everything enqueued, within the timeout.
  Error drain(bool communication) {
    DDPRT_TRY(selectDevice());
    // Poll instead of blocking so that a dead peer becomes a timeout.
    auto start = Clock::now();
    while (true) {
      cudaError_t computeState = cudaStreamQuery(compute_);
      cudaError_t commState =
          communication ? cudaStreamQuery(commStream_) : cudaSuccess;
      // A query that answers "not ready" also leaves that answer as the
      // thread's last error; clear it, so that it is not taken for the
      // error of a later launch.
      if (computeState == cudaErrorNotReady || commState == cudaErrorNotReady)
        (void)cudaGetLastError();
      if (computeState == cudaSuccess && commState == cudaSuccess)
        return failure();
      if (computeState != cudaErrorNotReady && computeState != cudaSuccess)
        return cudaFailure(computeState, "the compute stream");
      if (commState != cudaErrorNotReady && commState != cudaSuccess)
        return cudaFailure(commState, "the communication stream");
      DDPRT_TRY(failure());
      if (timeoutSeconds_ > 0 && secondsSince(start) > timeoutSeconds_) {
        std::string reason =
            std::string(communication ? "synchronize" : "the host barrier") +
            " did not complete within " + std::to_string(timeoutSeconds_) +
            " s on rank " + std::to_string(communicator_.rank());
        abortCommunicators(reason, true);
        return failure();
      }
      std::this_thread::yield();
    }
  }

  Error scale(double factor, ddprt_buffer *buffers, int count) override {
    DDPRT_TRY(enter());
    CUDA_TRY(cuda::scale(factor, buffers, count, scratch_, compute_));
    return Error::success();
  }
  Error cast(double factor, const ddprt_buffer *inputs, ddprt_buffer *outputs,
             int count) override {
    DDPRT_TRY(enter());
    CUDA_TRY(cuda::cast(factor, inputs, outputs, count, scratch_, compute_));
    return Error::success();
  }
  Error project(const ddprt_matrix *matrices, const ddprt_matrix *residuals,
                const ddprt_matrix *qs, ddprt_matrix *ps, int count) override {
    return projection(cuda::project, &cuda::Gemm::project, "cuBLAS project",
                      matrices, residuals, qs, ps, count);
  }
  Error backproject(const ddprt_matrix *matrices, const ddprt_matrix *residuals,
                    const ddprt_matrix *ps, ddprt_matrix *qs,
                    int count) override {
    return projection(cuda::backproject, &cuda::Gemm::backproject,
                      "cuBLAS backproject", matrices, residuals, ps, qs, count);
  }
  Error orthogonalize(ddprt_matrix *ps, int count, double epsilon) override {
    DDPRT_TRY(enter());
    CUDA_TRY(cuda::orthogonalize(ps, count, epsilon, scratch_, compute_));
    return Error::success();
  }
  Error reconstruct(const ddprt_matrix *ps, const ddprt_matrix *qs,
                    const ddprt_matrix *matrices, ddprt_matrix *residuals,
                    ddprt_matrix *reconstructions, int count) override {
    DDPRT_TRY(enter());
    CUDA_TRY(cuda::reconstruct(ps, qs, matrices, residuals, reconstructions,
                               count, scratch_, compute_));
    return Error::success();
  }
  Error gemm(bool transposeA, bool transposeB, int64_t batch, int64_t m,
             int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
             int64_t strideA, const float *b, int64_t ldb, int64_t strideB,
             float beta, float *c, int64_t ldc, int64_t strideC) override {
    DDPRT_TRY(prepareGemm());
    if (cublasStatus_t status =
            gemm_.strided(transposeA, transposeB, batch, m, n, k, alpha, a,
                          lda, strideA, b, ldb, strideB, beta, c, ldc, strideC))
      return cublasFailure(status, "cuBLAS gemm");
    return Error::success();
  }

  Error randomNormal(ddprt_buffer output, uint64_t seed, uint64_t stream,
                     uint64_t step) override {
    DDPRT_TRY(enter());
    CUDA_TRY(cuda::randomNormal(output, seed, stream, step, compute_));
    return Error::success();
  }

  Error topK(const ddprt_buffer &input, const ddprt_buffer &values,
             const ddprt_buffer &indices) override {
    DDPRT_TRY(enter());
    CUDA_TRY(cuda::topK(input, values, indices, compute_));
    return Error::success();
  }

  Error launchKernel(const void *image, const char *name, const int64_t grid[3],
                     const int64_t block[3], int32_t sharedBytes,
                     void **params) override {
    DDPRT_TRY(enter());
    return compiled_.launch(image, name, grid, block, sharedBytes, params,
                            compute_);
  }

  Error allocateZeroed(size_t bytes, void **pointer) override {
    DDPRT_TRY(selectDevice());
    CUDA_TRY(cudaMalloc(pointer, bytes == 0 ? 1 : bytes));
    if (cudaError_t code = cudaMemsetAsync(*pointer, 0, bytes, compute_)) {
      // The caller keeps nothing on failure: do not leak the allocation.
      cudaFree(*pointer);
      *pointer = nullptr;
      return cudaFailure(code, "cudaMemsetAsync");
    }
    return Error::success();
  }
  /// After shutdown() the device is idle (or its collectives revoked), so
  /// the implicit synchronization of cudaFree is bounded.
  void deallocate(void *pointer) override {
    cudaSetDevice(device_);
    cudaFree(pointer);
  }
  Error copyToHost(void *host, const void *source, size_t bytes) override {
    DDPRT_TRY(synchronize());
    CUDA_TRY(cudaMemcpy(host, source, bytes, cudaMemcpyDeviceToHost));
    return Error::success();
  }
  /// On the compute stream, and waited for: a plain cudaMemcpy from pageable
  /// memory returns once the data is staged, before the DMA lands, and runs
  /// on the legacy stream, which the non-blocking compute stream does not
  /// wait for, so the next kernel could read the old contents.
  Error copyFromHost(void *destination, const void *host,
                     size_t bytes) override {
    DDPRT_TRY(synchronize());
    CUDA_TRY(cudaMemcpyAsync(destination, host, bytes, cudaMemcpyHostToDevice,
                             compute_));
    return synchronize();
  }
  /// Managed memory: host code reads and writes it, kernels and NCCL too.
  Error allocateShared(size_t bytes, void **pointer) override {
    DDPRT_TRY(selectDevice());
    CUDA_TRY(cudaMallocManaged(pointer, bytes == 0 ? 1 : bytes,
                               cudaMemAttachGlobal));
    return Error::success();
  }
  void deallocateShared(void *pointer) override {
    cudaSetDevice(device_);
    cudaFree(pointer);
  }
  /// From the device's default pool, which keeps freed memory (its
  /// release threshold raised once): a step's temporaries cost no driver
  /// call after the first step.
  Error allocateDevice(size_t bytes, void **pointer) override {
    DDPRT_TRY(enter());
    if (!poolKept_) {
      cudaMemPool_t pool = nullptr;
      CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, device_));
      uint64_t keep = UINT64_MAX;
      CUDA_TRY(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold,
                                       &keep));
      poolKept_ = true;
    }
    CUDA_TRY(cudaMallocAsync(pointer, bytes == 0 ? 1 : bytes, compute_));
    return Error::success();
  }
  Error deallocateDevice(void *pointer) override {
    // (Also after a failure: the step's frees still run.)
    DDPRT_TRY(selectDevice());
    CUDA_TRY(cudaFreeAsync(pointer, compute_));
    return Error::success();
  }
  /// cudaMemcpyDefault lets unified addressing find where each side lives.
  /// A host destination is only complete after ddprt_synchronize.
  Error copy(void *destination, const void *source, size_t bytes) override {
    DDPRT_TRY(enter());
    CUDA_TRY(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault,
                             compute_));
    return Error::success();
  }

private:
  //===--- Entry, errors
  //---------------------------------------------------===//

  Error selectDevice() {
    CUDA_TRY(cudaSetDevice(device_));
    return Error::success();
  }

  /// Every entry point that enqueues work: this rank's device, and no work
  /// after the communicator failed (the data it would read is suspect).
  Error enter() {
    DDPRT_TRY(failure());
    return selectDevice();
  }

  /// The reason the communicator was revoked or aborted, as an error.
  Error failure() {
    if (!failed_.load())
      return Error::success();
    std::lock_guard<std::mutex> lock(mutex_);
    return fail(timedOut_ ? DDPRT_ERROR_TIMEOUT : DDPRT_ERROR_COMMUNICATION,
                failureReason_ + "; the NCCL communicator was stopped and "
                                 "every later call fails");
  }

  Error ncclCheck(ncclResult_t result, const char *what) {
    if (result == ncclSuccess || result == ncclInProgress)
      return Error::success();
    return fail(DDPRT_ERROR_COMMUNICATION,
                std::string(what) + " failed: " + ncclGetErrorString(result) +
                    " (" + ncclGetLastError(nullptr) + ")");
  }

  /// Stops the communicators once, from any thread: revoked where NCCL can
  /// (the handles stay valid for a thread inside an NCCL call), aborted
  /// otherwise. Their kernels end, so the streams drain. With an NCCL older
  /// than 2.28 (no revoke) an abort from the watchdog frees the
  /// communicator while the host thread may be inside an NCCL call on it,
  /// as PyTorch's watchdog does; 2.28 and later do not have that hazard.
  void abortCommunicators(const std::string &reason, bool timedOut = false) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failed_.load())
        return;
      failureReason_ = reason;
      timedOut_ = timedOut;
      failed_.store(true);
    }
    RevokeFn revoke = revokeFunction();
    std::string outcome;
    ncclComm_t comms[2];
    {
      std::lock_guard<std::mutex> lock(mutex_);
      comms[0] = ncclComm_;
      comms[1] = initComm_;
    }
    for (ncclComm_t comm : comms) {
      if (!comm)
        continue;
      ncclResult_t result = revoke ? revoke(comm, 0) : ncclCommAbort(comm);
      if (result != ncclSuccess && result != ncclInProgress)
        outcome += std::string("; ") +
                   (revoke ? "ncclCommRevoke" : "ncclCommAbort") +
                   " failed: " + ncclGetErrorString(result);
    }
    if (!revoke)
      abortedWithoutRevoke_ = true;
    if (!outcome.empty()) {
      std::lock_guard<std::mutex> lock(mutex_);
      failureReason_ += outcome;
    }
  }

  /// Polls a nonblocking communicator until it leaves ncclInProgress.
  Error waitUntilReady(ncclComm_t comm, const char *what) {
    auto start = Clock::now();
    while (true) {
      ncclResult_t state = ncclSuccess;
      DDPRT_TRY(ncclCheck(ncclCommGetAsyncError(comm, &state),
                          "ncclCommGetAsyncError"));
      if (state == ncclSuccess)
        return Error::success();
      if (state != ncclInProgress) {
        Error error = ncclCheck(state, what);
        abortCommunicators(error.message);
        return error;
      }
      if (timeoutSeconds_ > 0 && secondsSince(start) > timeoutSeconds_) {
        abortCommunicators(std::string(what) + " did not complete within " +
                               std::to_string(timeoutSeconds_) + " s on rank " +
                               std::to_string(communicator_.rank()),
                           true);
        return failure();
      }
      std::this_thread::yield();
    }
  }

  /// After ncclCommFinalize or ncclCommRevoke: waits (bounded by the
  /// timeout, or 10 s without one) for the communicator to leave
  /// ncclInProgress; whether it did.
  bool waitUntilQuiet(ncclComm_t comm) {
    auto start = Clock::now();
    double bound = timeoutSeconds_ > 0 ? timeoutSeconds_ : 10.0;
    ncclResult_t state = ncclInProgress;
    while (ncclCommGetAsyncError(comm, &state) == ncclSuccess &&
           state == ncclInProgress) {
      if (secondsSince(start) > bound)
        return false;
      std::this_thread::yield();
    }
    return true;
  }

  void waitForStreams(double seconds) {
    auto start = Clock::now();
    while ((cudaStreamQuery(compute_) == cudaErrorNotReady ||
            cudaStreamQuery(commStream_) == cudaErrorNotReady) &&
           secondsSince(start) < seconds)
      std::this_thread::yield();
    (void)cudaGetLastError();
  }

  //===--- The watchdog
  //----------------------------------------------------===//

  /// A collective being enqueued (done == nullptr) or in flight.
  struct InFlight {
    uint64_t id;
    Clock::time_point start;
    cudaEvent_t done = nullptr;
    bool enqueued = false;
  };

  uint64_t beginWatched() {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t id = nextId_++;
    inFlight_.push_back({id, Clock::now()});
    return id;
  }

  /// The collective `id` is enqueued; `done` (or nothing, if it failed to
  /// enqueue or has no event) marks its end on the device.
  void endWatched(uint64_t id, cudaEvent_t done) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (InFlight &entry : inFlight_)
      if (entry.id == id) {
        entry.done = done;
        entry.enqueued = true;
      }
  }

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
  cudaEvent_t recordOnComm() {
    cudaEvent_t event = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!eventPool_.empty()) {
        event = eventPool_.back();
        eventPool_.pop_back();
      }
    }
    if (!event &&
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess)
      return nullptr;
    if (cudaEventRecord(event, commStream_) != cudaSuccess) {
      cudaEventDestroy(event);
      return nullptr;
    }
    return event;
  }

  /// Every millisecond: retires finished collectives, stops the
  /// communicators when the oldest one is older than the timeout or NCCL
  /// reports an asynchronous error.
  void watch() {
    cudaSetDevice(device_);
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopWatchdog_) {
      wake_.wait_for(lock, std::chrono::milliseconds(1));
      if (stopWatchdog_ || failed_.load())
        continue;
      while (!inFlight_.empty() && inFlight_.front().enqueued) {
        InFlight &front = inFlight_.front();
        if (front.done) {
          cudaError_t state = cudaEventQuery(front.done);
          if (state == cudaErrorNotReady) {
            (void)cudaGetLastError();
            break;
          }
          eventPool_.push_back(front.done);
        }
        inFlight_.pop_front();
      }
      std::string reason;
      bool timedOut = false;
      if (!inFlight_.empty() && timeoutSeconds_ > 0 &&
          secondsSince(inFlight_.front().start) > timeoutSeconds_) {
        reason = "a collective did not complete within " +
                 std::to_string(timeoutSeconds_) + " s on rank " +
                 std::to_string(communicator_.rank()) +
                 " (a peer stalled or died)";
        timedOut = true;
      } else if (ncclComm_) {
        ncclResult_t state = ncclSuccess;
        if (ncclCommGetAsyncError(ncclComm_, &state) == ncclSuccess &&
            state != ncclSuccess && state != ncclInProgress)
          reason = std::string("NCCL reported an error: ") +
                   ncclGetErrorString(state);
      }
      if (reason.empty())
        continue;
      lock.unlock();
      abortCommunicators(reason, timedOut);
      lock.lock();
    }
  }

  //===--- cuBLAS or the fused kernels
  //-------------------------------------===//

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
                         int count) {
    Split split;
    for (int i = 0; i < count; ++i) {
      bool empty = matrices[i].rows == 0 || matrices[i].cols == 0 ||
                   factors[i].cols == 0;
      Group &group =
          !empty && policy_.choose(matrices[i].dtype, factors[i].cols) ==
                        cuda::Projector::Gemm
              ? split.gemm
              : split.fused;
      group.matrices.push_back(matrices[i]);
      if (residuals)
        group.residuals.push_back(residuals[i]);
      group.factors.push_back(factors[i]);
      group.outputs.push_back(outputs[i]);
    }
    return split;
  }

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
                   int count) {
    DDPRT_TRY(enter());
    Split split =
        splitByProjector(matrices, residuals, factors, outputs, count);
    Group &f = split.fused, &g = split.gemm;
    if (!f.matrices.empty())
      CUDA_TRY(fused(f.matrices.data(),
                     residuals ? f.residuals.data() : nullptr, f.factors.data(),
                     f.outputs.data(), int(f.matrices.size()), scratch_,
                     compute_));
    if (!g.matrices.empty())
      DDPRT_TRY(prepareGemm());
    for (size_t i = 0; i < g.matrices.size(); ++i) {
      if (cublasStatus_t status = (gemm_.*gemm)(
              g.matrices[i], residuals ? &g.residuals[i] : nullptr,
              g.factors[i], g.outputs[i]))
        return cublasFailure(status, what);
    }
    return Error::success();
  }

  Error prepareGemm() {
    if (cublasStatus_t status = gemm_.prepare(compute_))
      return cublasFailure(status, "cuBLAS setup");
    return Error::success();
  }

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
} // namespace

Error newNcclUniqueId(unsigned char *id) {
  ncclUniqueId unique{};
  if (ncclResult_t result = ncclGetUniqueId(&unique))
    return fail(DDPRT_ERROR_COMMUNICATION,
                std::string("ncclGetUniqueId failed: ") +
                    ncclGetErrorString(result));
  std::memcpy(id, &unique, sizeof(unique));
  return Error::success();
}

Error createCudaBackend(Communicator &communicator,
                        const ddprt_options &options,
                        std::unique_ptr<Backend> &backend) {
  auto cuda = std::make_unique<CudaBackend>(communicator, options);
  DDPRT_TRY(cuda->initialize());
  backend = std::move(cuda);
  return Error::success();
}

} // namespace ddprt
