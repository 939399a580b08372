//===- CudaBackend.cpp - NCCL collectives and CUDA kernels ----------------===//
//
// Two streams: `compute_` runs the kernels, `comm_` runs NCCL (and the
// division of a mean's f16/bf16 buffers). A collective waits for the compute
// work before it (an event), and the compute work after it waits for the
// collective, so a started allreduce overlaps the compression kernels
// enqueued before its wait. Calls return once enqueued;
// ddprt_synchronize waits for the device. Every CUDA and NCCL call is
// checked; a collective that does not finish within the timeout aborts the
// NCCL communicator and fails instead of hanging.
//
//===----------------------------------------------------------------------===//

#include "../Backend.h"
#include "../Communicator.h"
#include "CudaKernels.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace ddprt {

namespace {
Error cudaFailure(cudaError_t code, const char *what) {
  return fail(DDPRT_ERROR_BACKEND,
              std::string(what) + " failed: " + cudaGetErrorString(code));
}

#define CUDA_TRY(call)                                                         \
  do {                                                                         \
    if (cudaError_t cudaCode = (call))                                         \
      return cudaFailure(cudaCode, #call);                                     \
  } while (false)

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
  case DDPRT_I64: // state only: the C API keeps it from collectives
    break;
  }
  return ncclFloat32;
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
  CudaBackend(Communicator &communicator, double timeoutSeconds)
      : communicator_(communicator), timeoutSeconds_(timeoutSeconds) {}

  Error initialize() {
    int devices = 0;
    if (cudaError_t code = cudaGetDeviceCount(&devices))
      return fail(DDPRT_ERROR_UNSUPPORTED,
                  std::string("no usable CUDA device: ") +
                      cudaGetErrorString(code));
    if (devices == 0)
      return fail(DDPRT_ERROR_UNSUPPORTED, "no usable CUDA device: none found");
    // One GPU per rank: ranks on the same node take devices in turn.
    CUDA_TRY(cudaSetDevice(communicator_.rank() % devices));
    CUDA_TRY(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    CUDA_TRY(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    // Rank 0 sends the id, or word that it has none, so that the other
    // ranks fail with it instead of waiting in the broadcast.
    struct {
      int ok;
      ncclUniqueId id;
    } shared{};
    Error idError;
    if (communicator_.rank() == 0) {
      idError = nccl(ncclGetUniqueId(&shared.id), "ncclGetUniqueId");
      shared.ok = !idError;
    }
    DDPRT_TRY(communicator_.broadcast(&shared, int(sizeof(shared))));
    if (idError)
      return idError;
    if (!shared.ok)
      return fail(DDPRT_ERROR_COMMUNICATION,
                  "rank 0 could not create the NCCL unique id");
    ncclUniqueId &id = shared.id;
    // Nonblocking init, so that a rank that never arrives times out.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t result = ncclCommInitRankConfig(
        &nccl_, communicator_.size(), id, communicator_.rank(), &config);
    if (result != ncclSuccess && result != ncclInProgress) {
      Error error = nccl(result, "ncclCommInitRankConfig");
      abortCommunicator();
      return error;
    }
    return waitForNccl("ncclCommInitRankConfig");
  }

  ~CudaBackend() override {
    // An aborted communicator is already freed (abortCommunicator()).
    if (nccl_)
      ncclCommDestroy(nccl_);
    if (ready_)
      cudaEventDestroy(ready_);
    if (compute_)
      cudaStreamDestroy(compute_);
    if (comm_)
      cudaStreamDestroy(comm_);
  }

  Error allreduce(ddprt_reduction reduction, ddprt_buffer *buffers,
                  int count) override {
    std::unique_ptr<Request> request;
    DDPRT_TRY(allreduceStart(reduction, buffers, count, request));
    return wait(*request);
  }

  /// The mean as the CPU backend computes it: f16/bf16 are divided first,
  /// in f32 and rounded once (cuda::scale, on the communication stream), then
  /// summed; f32/f64 use ncclAvg (a pre-multiplication by 1/W in the element
  /// type). ncclAvg is not used for f16/bf16: NCCL rounds its 1/W to the
  /// narrow type (bf16(1/3) is 0.2% too large), which biases every mean
  /// where W is not a power of two.
  Error allreduceStart(ddprt_reduction reduction, ddprt_buffer *buffers,
                       int count, std::unique_ptr<Request> &result) override {
    DDPRT_TRY(usable());
    auto request = std::make_unique<CudaRequest>();
    CUDA_TRY(cudaEventCreateWithFlags(&request->done, cudaEventDisableTiming));
    CUDA_TRY(cudaEventRecord(ready_, compute_));
    CUDA_TRY(cudaStreamWaitEvent(comm_, ready_, 0));
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
                           int(divideFirst.size()), commScratch_, comm_));
    }
    // Older NCCL releases take at most 2048 operations per group.
    constexpr int kMaxGroupOps = 2048;
    for (int begin = 0; begin < count; begin += kMaxGroupOps) {
      int end = std::min(count, begin + kMaxGroupOps);
      DDPRT_TRY(nccl(ncclGroupStart(), "ncclGroupStart"));
      Error enqueued;
      for (int i = begin; i < end && !enqueued; ++i) {
        if (buffers[i].numel == 0)
          continue;
        ncclRedOp_t op = mean && !narrow(buffers[i].dtype) ? ncclAvg : ncclSum;
        enqueued =
            nccl(ncclAllReduce(buffers[i].data, buffers[i].data,
                               size_t(buffers[i].numel),
                               ncclType(buffers[i].dtype), op, nccl_, comm_),
                 "ncclAllReduce");
      }
      // The group is closed on every path: an open group would swallow every
      // later NCCL call of this thread.
      ncclResult_t grouped = ncclGroupEnd();
      if (enqueued || (grouped != ncclSuccess && grouped != ncclInProgress)) {
        Error error = enqueued ? enqueued : nccl(grouped, "ncclGroupEnd");
        // This rank now runs a different sequence of collectives than its
        // peers: the communicator cannot be used again.
        abortCommunicator();
        return error;
      }
      DDPRT_TRY(waitForNccl("ncclGroupEnd"));
    }
    CUDA_TRY(cudaEventRecord(request->done, comm_));
    result = std::move(request);
    return Error::success();
  }

  /// Later compute waits for the collective on the device; the host does
  /// not block.
  Error wait(Request &base) override {
    auto &request = static_cast<CudaRequest &>(base);
    CUDA_TRY(cudaStreamWaitEvent(compute_, request.done, 0));
    return Error::success();
  }

  Error synchronize() override {
    // Poll instead of blocking so that a dead peer becomes a timeout.
    auto start = std::chrono::steady_clock::now();
    while (true) {
      cudaError_t computeState = cudaStreamQuery(compute_);
      cudaError_t commState = cudaStreamQuery(comm_);
      if (computeState == cudaSuccess && commState == cudaSuccess)
        return Error::success();
      if (computeState != cudaErrorNotReady && computeState != cudaSuccess)
        return cudaFailure(computeState, "the compute stream");
      if (commState != cudaErrorNotReady && commState != cudaSuccess)
        return cudaFailure(commState, "the communication stream");
      DDPRT_TRY(checkAsyncError());
      DDPRT_TRY(checkTimeout(start, "synchronize"));
      std::this_thread::yield();
    }
  }

  Error scale(double factor, ddprt_buffer *buffers, int count) override {
    CUDA_TRY(cuda::scale(factor, buffers, count, scratch_, compute_));
    return Error::success();
  }
  Error cast(double factor, const ddprt_buffer *inputs, ddprt_buffer *outputs,
             int count) override {
    CUDA_TRY(cuda::cast(factor, inputs, outputs, count, scratch_, compute_));
    return Error::success();
  }
  Error project(const ddprt_matrix *matrices, const ddprt_matrix *residuals,
                const ddprt_matrix *qs, ddprt_matrix *ps, int count) override {
    CUDA_TRY(
        cuda::project(matrices, residuals, qs, ps, count, scratch_, compute_));
    return Error::success();
  }
  Error backproject(const ddprt_matrix *matrices, const ddprt_matrix *residuals,
                    const ddprt_matrix *ps, ddprt_matrix *qs,
                    int count) override {
    CUDA_TRY(cuda::backproject(matrices, residuals, ps, qs, count, scratch_,
                               compute_));
    return Error::success();
  }
  Error orthogonalize(ddprt_matrix *ps, int count, double epsilon) override {
    CUDA_TRY(cuda::orthogonalize(ps, count, epsilon, scratch_, compute_));
    return Error::success();
  }
  Error reconstruct(const ddprt_matrix *ps, const ddprt_matrix *qs,
                    const ddprt_matrix *matrices, ddprt_matrix *residuals,
                    ddprt_matrix *reconstructions, int count) override {
    CUDA_TRY(cuda::reconstruct(ps, qs, matrices, residuals, reconstructions,
                               count, scratch_, compute_));
    return Error::success();
  }
  Error randomNormal(ddprt_buffer output, uint64_t seed, uint64_t stream,
                     uint64_t step) override {
    CUDA_TRY(cuda::randomNormal(output, seed, stream, step, compute_));
    return Error::success();
  }

  Error allocateZeroed(size_t bytes, void **pointer) override {
    CUDA_TRY(cudaMalloc(pointer, bytes == 0 ? 1 : bytes));
    if (cudaError_t code = cudaMemsetAsync(*pointer, 0, bytes, compute_)) {
      // The caller keeps nothing on failure: do not leak the allocation.
      cudaFree(*pointer);
      *pointer = nullptr;
      return cudaFailure(code, "cudaMemsetAsync");
    }
    return Error::success();
  }
  void deallocate(void *pointer) override { cudaFree(pointer); }
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
    CUDA_TRY(cudaStreamSynchronize(compute_));
    return Error::success();
  }
  /// Managed memory: host code reads and writes it, kernels and NCCL too.
  Error allocateShared(size_t bytes, void **pointer) override {
    CUDA_TRY(cudaMallocManaged(pointer, bytes == 0 ? 1 : bytes,
                               cudaMemAttachGlobal));
    return Error::success();
  }
  void deallocateShared(void *pointer) override { cudaFree(pointer); }
  /// cudaMemcpyDefault lets unified addressing find where each side lives.
  /// A host destination is only complete after ddprt_synchronize.
  Error copy(void *destination, const void *source, size_t bytes) override {
    CUDA_TRY(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault,
                             compute_));
    return Error::success();
  }

private:
  Error nccl(ncclResult_t result, const char *what) {
    if (result == ncclSuccess || result == ncclInProgress)
      return Error::success();
    return fail(DDPRT_ERROR_COMMUNICATION,
                std::string(what) + " failed: " + ncclGetErrorString(result) +
                    " (" + ncclGetLastError(nccl_) + ")");
  }

  Error usable() {
    if (aborted_)
      return fail(DDPRT_ERROR_STATE,
                  "the NCCL communicator was aborted after an earlier error");
    return Error::success();
  }

  /// Aborts the communicator at once (after a timeout or an NCCL error):
  /// its kernels stop waiting for peers, so the streams drain. Deferring the
  /// abort to the destructor hangs ddprt_finalize, whose cudaFree of the
  /// states synchronizes the device with a collective that never ends.
  void abortCommunicator() {
    if (nccl_)
      ncclCommAbort(nccl_);
    nccl_ = nullptr;
    aborted_ = true;
  }

  Error checkAsyncError() {
    if (!nccl_)
      return Error::success(); // aborted: its error was reported then
    ncclResult_t state = ncclSuccess;
    ncclResult_t query = ncclCommGetAsyncError(nccl_, &state);
    if (query != ncclSuccess)
      return nccl(query, "ncclCommGetAsyncError");
    if (state != ncclSuccess && state != ncclInProgress) {
      Error error = nccl(state, "an NCCL operation");
      abortCommunicator();
      return error;
    }
    return Error::success();
  }

  Error checkTimeout(std::chrono::steady_clock::time_point start,
                     const char *what) {
    if (timeoutSeconds_ <= 0.0)
      return Error::success();
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (waited <= timeoutSeconds_)
      return Error::success();
    abortCommunicator();
    return fail(DDPRT_ERROR_TIMEOUT,
                std::string(what) + " did not complete within " +
                    std::to_string(timeoutSeconds_) + " s on rank " +
                    std::to_string(communicator_.rank()) +
                    "; the NCCL communicator is aborted");
  }

  /// Waits for a nonblocking NCCL call to leave ncclInProgress.
  Error waitForNccl(const char *what) {
    auto start = std::chrono::steady_clock::now();
    while (true) {
      ncclResult_t state = ncclSuccess;
      DDPRT_TRY(
          nccl(ncclCommGetAsyncError(nccl_, &state), "ncclCommGetAsyncError"));
      if (state == ncclSuccess)
        return Error::success();
      if (state != ncclInProgress) {
        Error error = nccl(state, what);
        abortCommunicator();
        return error;
      }
      DDPRT_TRY(checkTimeout(start, what));
      std::this_thread::yield();
    }
  }

  Communicator &communicator_;
  double timeoutSeconds_;
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  ncclComm_t nccl_ = nullptr;
  bool aborted_ = false;
  // One Scratch per stream: reuse is safe only in one stream's order.
  cuda::Scratch scratch_, commScratch_;
};
} // namespace

Error createCudaBackend(Communicator &communicator, double timeoutSeconds,
                        std::unique_ptr<Backend> &backend) {
  auto cuda = std::make_unique<CudaBackend>(communicator, timeoutSeconds);
  DDPRT_TRY(cuda->initialize());
  backend = std::move(cuda);
  return Error::success();
}

} // namespace ddprt
