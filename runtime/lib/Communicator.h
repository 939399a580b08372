//===- Communicator.h - MPI between the ranks of a job ----------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Rank and world size, collectives that fail within a timeout instead of
// hanging when a rank dies, and a check that all ranks pass the same sizes.
// Built without MPI (DDPRT_HAVE_MPI unset) it is a job of one rank: the GPU
// machines have CUDA and NCCL but no MPI.
// The CPU backend reduces with it; the CUDA backend uses it to broadcast
// NCCL's unique id.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_COMMUNICATOR_H
#define DDPRT_COMMUNICATOR_H

#include "Error.h"
#include "ddprt/ddprt.h"

#if defined(DDPRT_HAVE_MPI)
#include <mpi.h>
#endif

#include <cstdint>
#include <memory>
#include <vector>

namespace ddprt {

#if defined(DDPRT_HAVE_MPI)
/// Nonblocking MPI operations that complete together.
struct MpiRequests {
  std::vector<MPI_Request> requests;
};
#endif

class Communicator {
public:
  /// Initializes MPI unless the host already did (then MPI is finalized at
  /// process exit).
  static Error create(const ddprt_options &options,
                      std::unique_ptr<Communicator> &communicator);
  ~Communicator();
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// The rank among the ranks on this node (shared memory), which picks
  /// this rank's GPU.
  int localRank() const { return localRank_; }

  /// In-place sum over all ranks of `count` elements of `dtype`, then
  /// multiplied by `scale` (one rounding). Large buffers go around a ring
  /// (reduce-scatter, scale the owned chunk, allgather: each element is
  /// reduced once, by one rank, so all ranks get the same bits); small ones
  /// use MPI's allreduce. f16/bf16 are added in f32 and rounded back.
  Error sum(void *data, int64_t count, ddprt_dtype dtype, double scale = 1.0);

  /// Fails with DDPRT_ERROR_MISMATCH unless every rank passes the same
  /// `signature` (one small collective).
  Error checkSameOnAllRanks(const std::vector<int64_t> &signature,
                            const char *what);

  /// Broadcasts `bytes` from rank 0.
  Error broadcast(void *data, int bytes);

  /// After a timeout or an MPI failure the communicator may be out of step
  /// with the other ranks; every later call fails.
  bool broken() const { return broken_; }

private:
  Communicator() = default;
  Error failIfBroken();
#if defined(DDPRT_HAVE_MPI)
  Error check(int code, const char *what);
  Error ringSum(char *data, int64_t count, ddprt_dtype dtype, double scale);
  Error mpiSum(void *data, int64_t count, ddprt_dtype dtype);
  /// Waits for `requests`, failing after the configured timeout.
  Error wait(MpiRequests &requests);

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Op halfSum_ = MPI_OP_NULL, bfloat16Sum_ = MPI_OP_NULL;
  std::vector<char> scratch_;
#endif
  int rank_ = 0, size_ = 1, localRank_ = 0;
  double timeoutSeconds_ = 0.0;
  bool checkShapes_ = true;
  bool broken_ = false;
};

} // namespace ddprt

#endif // DDPRT_COMMUNICATOR_H
