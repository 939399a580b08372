//===- NcclSetup.cpp - the NCCL communicators: setup, watchdog, teardown -===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The part of the CUDA backend that owns the NCCL communicators: it creates
// them (nonblocking, then a blocking split for the collectives), runs the
// watchdog that bounds every wait on a peer, revokes or aborts them on a
// timeout or an NCCL error, and releases them at shutdown. The design is
// in CudaBackend.h.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <cstring>
#include <dlfcn.h>

namespace ddprt {

namespace {
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
} // namespace

Error CudaBackend::initialize() {
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
    parent = static_cast<ncclComm_t>(const_cast<void *>(options_.join_handle));
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

CudaBackend::~CudaBackend() {
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

void CudaBackend::shutdown() {
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

Error CudaBackend::failure() {
  if (!failed_.load())
    return Error::success();
  std::lock_guard<std::mutex> lock(mutex_);
  return fail(timedOut_ ? DDPRT_ERROR_TIMEOUT : DDPRT_ERROR_COMMUNICATION,
              failureReason_ + "; the NCCL communicator was stopped and "
                               "every later call fails");
}

Error CudaBackend::ncclCheck(ncclResult_t result, const char *what) {
  if (result == ncclSuccess || result == ncclInProgress)
    return Error::success();
  return fail(DDPRT_ERROR_COMMUNICATION,
              std::string(what) + " failed: " + ncclGetErrorString(result) +
                  " (" + ncclGetLastError(nullptr) + ")");
}

void CudaBackend::abortCommunicators(const std::string &reason, bool timedOut) {
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

Error CudaBackend::waitUntilReady(ncclComm_t comm, const char *what) {
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

bool CudaBackend::waitUntilQuiet(ncclComm_t comm) {
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

void CudaBackend::waitForStreams(double seconds) {
  auto start = Clock::now();
  while ((cudaStreamQuery(compute_) == cudaErrorNotReady ||
          cudaStreamQuery(commStream_) == cudaErrorNotReady) &&
         secondsSince(start) < seconds)
    std::this_thread::yield();
  (void)cudaGetLastError();
}

uint64_t CudaBackend::beginWatched() {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t id = nextId_++;
  inFlight_.push_back({id, Clock::now()});
  return id;
}

void CudaBackend::endWatched(uint64_t id, cudaEvent_t done) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (InFlight &entry : inFlight_)
    if (entry.id == id) {
      entry.done = done;
      entry.enqueued = true;
    }
}

cudaEvent_t CudaBackend::recordOnComm() {
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

void CudaBackend::watch() {
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
        reason =
            std::string("NCCL reported an error: ") + ncclGetErrorString(state);
    }
    if (reason.empty())
      continue;
    lock.unlock();
    abortCommunicators(reason, timedOut);
    lock.lock();
  }
}

Error newNcclUniqueId(unsigned char *id) {
  ncclUniqueId unique{};
  if (ncclResult_t result = ncclGetUniqueId(&unique))
    return fail(DDPRT_ERROR_COMMUNICATION,
                std::string("ncclGetUniqueId failed: ") +
                    ncclGetErrorString(result));
  std::memcpy(id, &unique, sizeof(unique));
  return Error::success();
}

} // namespace ddprt
