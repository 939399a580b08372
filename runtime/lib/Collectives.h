//===- Collectives.h - MPI between the ranks of a job -----------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Rank and world size, collectives that fail within a timeout instead of
// hanging when a rank dies, and a check that all ranks pass the same sizes.
// Built without MPI (DDPRT_HAVE_MPI unset) it is a job of one rank: the GPU
// machines have CUDA and NCCL but no MPI.
//
// One thread at a time calls these: the communicator's thread, which runs
// them in the order they were queued (Communicator.h).
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_COLLECTIVES_H
#define DDPRT_COLLECTIVES_H

#include "Error.h"
#include "SimulatedLink.h"
#include "ddprt/ddprt.h"

#if defined(DDPRT_HAVE_MPI)
#include <mpi.h>
#endif

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ddprt {

#if defined(DDPRT_HAVE_MPI)
/// Nonblocking MPI operations that complete together.
struct MpiRequests {
  std::vector<MPI_Request> requests;
};
#endif

/// What every rank must pass alike to an allreduce of `buffers`: their
/// count, the reduction and group, and each buffer's dtype and size.
std::vector<int64_t> bucketSignature(ddprt_reduction reduction,
                                     const ddprt_buffer *buffers, int count,
                                     ddprt_group group = DDPRT_GROUP_WORLD);
/// The same for an allgather of `inputs`, with a code no reduction has in
/// the reduction's place: a rank that allgathers where the others allreduce
/// a bucket of the same sizes is a mismatch too.
std::vector<int64_t> allgatherSignature(const ddprt_buffer *inputs, int count);

class Collectives {
public:
  /// Initializes MPI unless the host already did (then MPI is finalized at
  /// process exit), and works on a duplicate of MPI_COMM_WORLD or of the
  /// caller's communicator (DDPRT_JOIN_MPI). A job joined through NCCL
  /// (DDPRT_JOIN_NCCL_*) touches no MPI: rank and size are the caller's,
  /// and the host collectives below fail on more than one rank.
  static Error create(const ddprt_options &options,
                      std::unique_ptr<Collectives> &collectives);
  /// Whether `options` join a job through NCCL.
  static bool joinedByNccl(const ddprt_options &options);
  bool joinedByNccl() const { return joinedByNccl_; }
  ~Collectives();
  Collectives(const Collectives &) = delete;
  Collectives &operator=(const Collectives &) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// The rank among the ranks on this node (shared memory), which picks
  /// this rank's GPU.
  int localRank() const { return localRank_; }
  /// The number of nodes, and the world ranks of this rank's node in rank
  /// order (its first is the node's leader across nodes).
  int nodeCount() const { return int(leaders_.size()); }
  const std::vector<int> &nodeRanks() const { return nodeRanks_; }
  /// Whether every node has as many ranks.
  bool nodesAlike() const { return nodesAlike_; }
  /// How many ranks a collective over `group` joins (what a mean divides
  /// by): the world, this node's ranks, or the nodes.
  int members(ddprt_group group) const {
    return group == DDPRT_GROUP_NODE           ? int(nodeRanks_.size())
           : group == DDPRT_GROUP_ACROSS_NODES ? nodeCount()
                                               : size_;
  }
  /// Whether a thread other than the one that initialized MPI may call it
  /// (MPI_THREAD_SERIALIZED or more was provided).
  bool callableFromAnyThread() const { return callableFromAnyThread_; }

  /// In-place sum over all ranks of `count` elements of `dtype`, then
  /// multiplied by `scale` (one rounding). Large buffers go around a ring
  /// (reduce-scatter, scale the owned chunk, allgather: each element is
  /// reduced once, by one rank, so all ranks get the same bits); small ones
  /// use MPI's allreduce. f16/bf16 are added in f32 and rounded back.
  Error sum(void *data, int64_t count, ddprt_dtype dtype, double scale = 1.0);
  /// The same over the ranks of `group` (ddprt_group): within the node
  /// around a ring of its ranks (not held by the simulated link: shared
  /// memory); across nodes around a ring of the nodes' leaders, then sent
  /// by each leader to the rest of its node.
  Error sum(ddprt_group group, void *data, int64_t count, ddprt_dtype dtype,
            double scale);

  /// Every rank's `bytes` bytes at `send` into `received`, rank-major (rank
  /// r's at r * bytes; size() * bytes in all), in one MPI_Iallgather (in
  /// pieces MPI's int counts can hold beyond 1 GiB). `send` must not
  /// overlap `received`.
  Error gather(const void *send, int64_t bytes, void *received);

  /// Fails with DDPRT_ERROR_MISMATCH unless every rank passes the same
  /// `signature` (one small collective).
  Error checkSameOnAllRanks(const std::vector<int64_t> &signature,
                            const char *what);

  /// Broadcasts `bytes` from rank 0.
  Error broadcast(void *data, int bytes);

  /// After a timeout or an MPI failure the collectives may be out of step
  /// with the other ranks; every later call fails, saying why (brokenError).
  /// Read from any thread.
  bool broken() const { return broken_.load(std::memory_order_acquire); }
  Error brokenError() const;
  /// Marks the collectives broken for `reason` (the first reason stays).
  void markBroken(const std::string &reason);

private:
  Collectives() = default;
  static Error createJoinedByNccl(const ddprt_options &options,
                                  std::unique_ptr<Collectives> self,
                                  std::unique_ptr<Collectives> &result);
  Error failIfBroken() const;
  Error failIfJoinedByNccl() const;
  /// Runs `collective`, then holds until the simulated link (if on) would
  /// have carried `bytesSent` bytes of this rank (SimulatedLink.h).
  template <typename Fn> Error overLink(double bytesSent, Fn &&collective);
#if defined(DDPRT_HAVE_MPI)
  Error check(int code, const char *what);
  /// Around `ring` (world ranks, this rank among them).
  Error ringSum(const std::vector<int> &ring, char *data, int64_t count,
                ddprt_dtype dtype, double scale);
  /// `bytes` at `data` from `ranks`' first to the others.
  Error broadcastFromFirst(const std::vector<int> &ranks, char *data,
                           int64_t bytes);
  Error mpiSum(void *data, int64_t count, ddprt_dtype dtype);
  /// Waits for `requests`, failing after the configured timeout.
  Error wait(MpiRequests &requests);

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Op halfSum_ = MPI_OP_NULL, bfloat16Sum_ = MPI_OP_NULL;
  std::vector<char> scratch_;
#endif
  int rank_ = 0, size_ = 1, localRank_ = 0;
  /// Every world rank; this node's ranks; each node's first rank.
  std::vector<int> world_{0}, nodeRanks_{0}, leaders_{0};
  bool nodesAlike_ = true;
  bool joinedByNccl_ = false;
  bool callableFromAnyThread_ = false;
  double timeoutSeconds_ = 0.0;
  bool checkShapes_ = true;
  SimulatedLink link_;
  /// Written once, before broken_ is set.
  std::string brokenReason_;
  std::atomic<bool> broken_{false};
};

} // namespace ddprt

#endif // DDPRT_COLLECTIVES_H
