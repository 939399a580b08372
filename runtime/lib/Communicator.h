//===- Communicator.h - the communication thread and its queue --*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The runtime's collectives (Collectives.h) run on a thread of their own,
// in the order they were queued, so that a started allreduce progresses
// while the caller computes (as gloo's worker threads do). Blocking calls
// queue their work and wait for it. Communicator.cpp says how the host's own
// MPI calls keep out of its way.
// The CPU backend reduces with it; the CUDA backend uses it to broadcast
// NCCL's unique id and to check that ranks pass the same buckets.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_COMMUNICATOR_H
#define DDPRT_COMMUNICATOR_H

#include "Collectives.h"
#include "Error.h"
#include "ddprt/ddprt.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ddprt {

/// Work queued on a communicator and, once done, its outcome.
class Operation;

class Communicator {
public:
  /// Collective work: runs on the communication thread with the
  /// collectives, which only it may call.
  using Work = std::function<Error(Collectives &)>;

  /// Starts MPI (Collectives::create) and the communication thread.
  static Error create(const ddprt_options &options,
                      std::unique_ptr<Communicator> &communicator);
  /// Completes the work still queued (each collective within the timeout)
  /// and joins the thread.
  ~Communicator();
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  int rank() const { return collectives_->rank(); }
  int size() const { return collectives_->size(); }
  int localRank() const { return collectives_->localRank(); }
  int nodeCount() const { return collectives_->nodeCount(); }
  int ranksOnNode() const { return int(collectives_->nodeRanks().size()); }
  bool nodesAlike() const { return collectives_->nodesAlike(); }
  /// Whether the job was joined through NCCL (no MPI: the host's
  /// collectives are unavailable; Collectives::create).
  bool joinedByNccl() const { return collectives_->joinedByNccl(); }
  /// Whether queued work progresses on a thread of its own (else it runs
  /// on the caller's thread, in wait: a job of one rank, or MPI
  /// initialized by the host below MPI_THREAD_SERIALIZED).
  bool progressesInBackground() const { return thread_.joinable(); }

  /// Queues `work` after everything queued before it. Once the
  /// collectives are broken, work is not run: it fails with the reason.
  std::shared_ptr<Operation> start(Work work);
  /// Waits until `operation` is done (the work queued before it first) and
  /// returns what its work returned.
  Error wait(Operation &operation);
  /// Whether `operation` is done; never waits or makes progress.
  bool completed(const Operation &operation);
  /// start + wait; with nothing queued, `work` runs on the caller's thread
  /// at once (the same order, without a handoff to the thread).
  Error run(Work work);
  /// Waits until everything queued so far is done; fails if the
  /// collectives are broken.
  Error drain();

  /// Blocking, through the queue: Collectives::checkSameOnAllRanks and
  /// Collectives::broadcast.
  Error checkSameOnAllRanks(const std::vector<int64_t> &signature,
                            const char *what);
  Error broadcast(void *data, int bytes);

private:
  Communicator() = default;
  /// The communication thread: runs queued work until stopped and the
  /// queue is empty.
  void serve();
  /// Runs `work` unless the collectives are broken; an exception (out of
  /// memory) becomes an error and breaks them.
  Error execute(Work &work);
  /// Runs the first queued work (unlocking `lock` meanwhile) and marks it
  /// done.
  void runFirst(std::unique_lock<std::mutex> &lock);

  std::unique_ptr<Collectives> collectives_;
  std::mutex mutex_;
  /// Signalled when work is queued or the thread must stop.
  std::condition_variable queued_;
  /// Signalled when work is done.
  std::condition_variable finished_;
  std::deque<std::shared_ptr<Operation>> queue_;
  bool stopping_ = false;
  /// Whether a thread (the communication thread, or a caller in wait) is
  /// running the first queued work: the other may not take it.
  bool executing_ = false;
  std::thread thread_;
};

} // namespace ddprt

#endif // DDPRT_COMMUNICATOR_H
