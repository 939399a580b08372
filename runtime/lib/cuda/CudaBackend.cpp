//===- CudaBackend.cpp - calls to NCCL, cuBLAS, kernels -------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The runtime's calls on the CUDA backend: collectives enqueued on the
// communication stream through NCCL (watched as NcclSetup.cpp describes),
// the compression kernels and cuBLAS on the compute stream, and memory.
// The design is in CudaBackend.h.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

namespace ddprt {

namespace {
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
} // namespace

Error CudaBackend::allreduce(ddprt_group group, ddprt_reduction reduction,
                             ddprt_buffer *buffers, int count) {
  std::unique_ptr<Request> request;
  DDPRT_TRY(allreduceStart(group, reduction, buffers, count, request));
  return wait(*request);
}

Error CudaBackend::checkSameOnAllRanks(const std::vector<int64_t> &signature,
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

Error CudaBackend::checkGroup(ddprt_group group) {
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

Error CudaBackend::allreduceStart(ddprt_group group, ddprt_reduction reduction,
                                  ddprt_buffer *buffers, int count,
                                  std::unique_ptr<Request> &result) {
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

Error CudaBackend::allgather(const ddprt_buffer *inputs,
                             const ddprt_buffer *outputs, int count) {
  DDPRT_TRY(enter());
  DDPRT_TRY(
      checkSameOnAllRanks(allgatherSignature(inputs, count), "allgather"));
  CUDA_TRY(cudaEventRecord(ready_, compute_));
  CUDA_TRY(cudaStreamWaitEvent(commStream_, ready_, 0));
  DDPRT_TRY(enqueueGrouped(count, [&](int i) {
    if (inputs[i].numel == 0)
      return Error::success();
    return ncclCheck(
        ncclAllGather(inputs[i].data, outputs[i].data, size_t(inputs[i].numel),
                      ncclType(inputs[i].dtype), ncclComm_, commStream_),
        "ncclAllGather");
  }));
  CUDA_TRY(cudaEventRecord(gathered_, commStream_));
  CUDA_TRY(cudaStreamWaitEvent(compute_, gathered_, 0));
  return Error::success();
}

Error CudaBackend::wait(Request &base) {
  DDPRT_TRY(enter());
  auto &request = static_cast<CudaRequest &>(base);
  CUDA_TRY(cudaStreamWaitEvent(compute_, request.done, 0));
  return Error::success();
}

Error CudaBackend::completed(Request &base, bool &done) {
  DDPRT_TRY(enter());
  cudaError_t state = cudaEventQuery(static_cast<CudaRequest &>(base).done);
  done = state != cudaErrorNotReady;
  if (!done)
    return Error::success();
  CUDA_TRY(state);
  return Error::success();
}

Error CudaBackend::drain(bool communication) {
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

Error CudaBackend::scale(double factor, ddprt_buffer *buffers, int count) {
  DDPRT_TRY(enter());
  CUDA_TRY(cuda::scale(factor, buffers, count, scratch_, compute_));
  return Error::success();
}

Error CudaBackend::cast(double factor, const ddprt_buffer *inputs,
                        ddprt_buffer *outputs, int count) {
  DDPRT_TRY(enter());
  CUDA_TRY(cuda::cast(factor, inputs, outputs, count, scratch_, compute_));
  return Error::success();
}

Error CudaBackend::project(const ddprt_matrix *matrices,
                           const ddprt_matrix *residuals,
                           const ddprt_matrix *qs, ddprt_matrix *ps,
                           int count) {
  return projection(cuda::project, &cuda::Gemm::project, "cuBLAS project",
                    matrices, residuals, qs, ps, count);
}

Error CudaBackend::backproject(const ddprt_matrix *matrices,
                               const ddprt_matrix *residuals,
                               const ddprt_matrix *ps, ddprt_matrix *qs,
                               int count) {
  return projection(cuda::backproject, &cuda::Gemm::backproject,
                    "cuBLAS backproject", matrices, residuals, ps, qs, count);
}

Error CudaBackend::orthogonalize(ddprt_matrix *ps, int count, double epsilon) {
  DDPRT_TRY(enter());
  CUDA_TRY(cuda::orthogonalize(ps, count, epsilon, scratch_, compute_));
  return Error::success();
}

Error CudaBackend::reconstruct(const ddprt_matrix *ps, const ddprt_matrix *qs,
                               const ddprt_matrix *matrices,
                               ddprt_matrix *residuals,
                               ddprt_matrix *reconstructions, int count) {
  DDPRT_TRY(enter());
  CUDA_TRY(cuda::reconstruct(ps, qs, matrices, residuals, reconstructions,
                             count, scratch_, compute_));
  return Error::success();
}

Error CudaBackend::gemm(bool transposeA, bool transposeB, int64_t batch,
                        int64_t m, int64_t n, int64_t k, float alpha,
                        const float *a, int64_t lda, int64_t strideA,
                        const float *b, int64_t ldb, int64_t strideB,
                        float beta, float *c, int64_t ldc, int64_t strideC) {
  DDPRT_TRY(prepareGemm());
  if (cublasStatus_t status =
          gemm_.strided(transposeA, transposeB, batch, m, n, k, alpha, a, lda,
                        strideA, b, ldb, strideB, beta, c, ldc, strideC))
    return cublasFailure(status, "cuBLAS gemm");
  return Error::success();
}

Error CudaBackend::randomNormal(ddprt_buffer output, uint64_t seed,
                                uint64_t stream, uint64_t step) {
  DDPRT_TRY(enter());
  CUDA_TRY(cuda::randomNormal(output, seed, stream, step, compute_));
  return Error::success();
}

Error CudaBackend::topK(const ddprt_buffer &input, const ddprt_buffer &values,
                        const ddprt_buffer &indices) {
  DDPRT_TRY(enter());
  CUDA_TRY(cuda::topK(input, values, indices, compute_));
  return Error::success();
}

Error CudaBackend::launchKernel(const void *image, const char *name,
                                const int64_t grid[3], const int64_t block[3],
                                int32_t sharedBytes, void **params) {
  DDPRT_TRY(enter());
  return compiled_.launch(image, name, grid, block, sharedBytes, params,
                          compute_);
}

Error CudaBackend::allocateZeroed(size_t bytes, void **pointer) {
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

void CudaBackend::deallocate(void *pointer) {
  cudaSetDevice(device_);
  cudaFree(pointer);
}

Error CudaBackend::copyToHost(void *host, const void *source, size_t bytes) {
  DDPRT_TRY(synchronize());
  CUDA_TRY(cudaMemcpy(host, source, bytes, cudaMemcpyDeviceToHost));
  return Error::success();
}

Error CudaBackend::copyFromHost(void *destination, const void *host,
                                size_t bytes) {
  DDPRT_TRY(synchronize());
  CUDA_TRY(cudaMemcpyAsync(destination, host, bytes, cudaMemcpyHostToDevice,
                           compute_));
  return synchronize();
}

Error CudaBackend::allocateShared(size_t bytes, void **pointer) {
  DDPRT_TRY(selectDevice());
  CUDA_TRY(
      cudaMallocManaged(pointer, bytes == 0 ? 1 : bytes, cudaMemAttachGlobal));
  return Error::success();
}

void CudaBackend::deallocateShared(void *pointer) {
  cudaSetDevice(device_);
  cudaFree(pointer);
}

Error CudaBackend::allocateDevice(size_t bytes, void **pointer) {
  DDPRT_TRY(enter());
  if (!poolKept_) {
    cudaMemPool_t pool = nullptr;
    CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, device_));
    uint64_t keep = UINT64_MAX;
    CUDA_TRY(
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    poolKept_ = true;
  }
  CUDA_TRY(cudaMallocAsync(pointer, bytes == 0 ? 1 : bytes, compute_));
  return Error::success();
}

Error CudaBackend::deallocateDevice(void *pointer) {
  // (Also after a failure: the step's frees still run.)
  DDPRT_TRY(selectDevice());
  CUDA_TRY(cudaFreeAsync(pointer, compute_));
  return Error::success();
}

Error CudaBackend::copy(void *destination, const void *source, size_t bytes) {
  DDPRT_TRY(enter());
  CUDA_TRY(
      cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, compute_));
  return Error::success();
}

Error CudaBackend::selectDevice() {
  CUDA_TRY(cudaSetDevice(device_));
  return Error::success();
}

Error CudaBackend::enter() {
  DDPRT_TRY(failure());
  return selectDevice();
}

CudaBackend::Split CudaBackend::splitByProjector(const ddprt_matrix *matrices,
                                                 const ddprt_matrix *residuals,
                                                 const ddprt_matrix *factors,
                                                 ddprt_matrix *outputs,
                                                 int count) {
  Split split;
  for (int i = 0; i < count; ++i) {
    bool empty =
        matrices[i].rows == 0 || matrices[i].cols == 0 || factors[i].cols == 0;
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

Error CudaBackend::projection(FusedProjection fused, GemmProjection gemm,
                              const char *what, const ddprt_matrix *matrices,
                              const ddprt_matrix *residuals,
                              const ddprt_matrix *factors,
                              ddprt_matrix *outputs, int count) {
  DDPRT_TRY(enter());
  Split split = splitByProjector(matrices, residuals, factors, outputs, count);
  Group &f = split.fused, &g = split.gemm;
  if (!f.matrices.empty())
    CUDA_TRY(fused(f.matrices.data(), residuals ? f.residuals.data() : nullptr,
                   f.factors.data(), f.outputs.data(), int(f.matrices.size()),
                   scratch_, compute_));
  if (!g.matrices.empty())
    DDPRT_TRY(prepareGemm());
  for (size_t i = 0; i < g.matrices.size(); ++i) {
    if (cublasStatus_t status =
            (gemm_.*gemm)(g.matrices[i], residuals ? &g.residuals[i] : nullptr,
                          g.factors[i], g.outputs[i]))
      return cublasFailure(status, what);
  }
  return Error::success();
}

Error CudaBackend::prepareGemm() {
  if (cublasStatus_t status = gemm_.prepare(compute_))
    return cublasFailure(status, "cuBLAS setup");
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
