//===- Communicator.cpp - the communication thread and its queue ----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Who calls MPI, and when. MPI is initialized with MPI_THREAD_SERIALIZED:
// any thread may call it, never two at once. The runtime's collectives
// (allreduces, shape checks, the broadcast of NCCL's id) are work queued on
// the communicator and run in the order they were queued: every rank queues
// the same collectives in the same order (ddprt.h), so every rank runs them
// in the same order, blocking ones (ddprt_allreduce: queue and wait) and
// started ones alike. The communication thread runs the queue; a blocking
// call that finds the queue empty runs its work on the caller's thread at
// once instead (Communicator::run): the thread is idle then, and stays idle
// while the caller, the only one who queues, is busy with it, so the two
// never call MPI at once and the order is the same. Likewise a caller that
// waits for a request runs the queued work the thread has not taken yet, up
// to that request, itself (Communicator::wait): `executing_` says which of
// the two runs the first work, and only one does. MPI's setup and
// teardown (Collectives::create and its destructor) run on the caller's
// thread before the thread starts and after it is joined.
//
// The host's own MPI calls (ddprt-host's agreements on MPI_COMM_WORLD, a
// test's barriers) come from the caller's thread. They do not race with the
// communication thread because that thread calls MPI only while it runs
// work: once the queue is drained (ddprt_synchronize, which the host calls
// before each agreement and at the end of each step) it is idle until the
// caller queues more. They cannot be reordered against the runtime's
// collectives either: those use a communicator of their own (a duplicate of
// MPI_COMM_WORLD), and are all complete when the host's begin.
// One exception: a host that stops the job after a failure (ddp-run's
// MPI_Abort from its error handler) may call MPI while the thread is inside
// it; the job ends either way.
//
// Where MPI was initialized by the host below MPI_THREAD_SERIALIZED, and in
// a job of one rank, there is no thread: the caller runs the queued work
// itself, in order, when it waits (no progress in the background then).
//
// Failures: a collective that times out or fails breaks the collectives
// (Collectives::broken); the work queued after it then fails at once with
// that reason instead of posting collectives the other ranks may never
// match, so no wait hangs behind a failed one. Destroying the communicator
// still completes what is queued (each collective within the timeout, and
// after a failure at once), then joins the thread.
//
//===----------------------------------------------------------------------===//

#include "Communicator.h"

#include <exception>
#include <string>
#include <utility>

namespace ddprt {

class Operation {
public:
  explicit Operation(Communicator::Work work) : work(std::move(work)) {}

  Communicator::Work work;
  /// Guarded by the communicator's mutex.
  bool done = false;
  Error result;
};

Error Communicator::create(const ddprt_options &options,
                           std::unique_ptr<Communicator> &result) {
  std::unique_ptr<Communicator> self(new Communicator());
  DDPRT_TRY(Collectives::create(options, self->collectives_));
  if (self->collectives_->size() > 1 &&
      self->collectives_->callableFromAnyThread())
    self->thread_ =
        std::thread([communicator = self.get()] { communicator->serve(); });
  result = std::move(self);
  return Error::success();
}

Communicator::~Communicator() {
  std::unique_lock<std::mutex> lock(mutex_);
  stopping_ = true;
  if (!thread_.joinable()) {
    while (!queue_.empty())
      runFirst(lock);
    return;
  }
  lock.unlock();
  queued_.notify_all();
  thread_.join();
}

void Communicator::serve() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    queued_.wait(lock, [&] {
      return (stopping_ && !executing_) || (!queue_.empty() && !executing_);
    });
    if (queue_.empty())
      return;
    runFirst(lock);
  }
}

Error Communicator::execute(Work &work) {
  if (collectives_->broken())
    return collectives_->brokenError();
  try {
    return work(*collectives_);
  } catch (const std::exception &exception) {
    // This rank may have skipped a collective the others run.
    Error error = fail(DDPRT_ERROR_BACKEND,
                       std::string("the runtime ran out of resources: ") +
                           exception.what());
    collectives_->markBroken(error.message);
    return error;
  }
}

void Communicator::runFirst(std::unique_lock<std::mutex> &lock) {
  std::shared_ptr<Operation> operation = queue_.front();
  executing_ = true;
  lock.unlock();
  Error result = execute(operation->work);
  // The work holds the caller's buffers: release it here, not whenever the
  // last owner of the operation lets go.
  operation->work = nullptr;
  lock.lock();
  queue_.pop_front();
  executing_ = false;
  operation->result = std::move(result);
  operation->done = true;
  finished_.notify_all();
  queued_.notify_one();
}

std::shared_ptr<Operation> Communicator::start(Work work) {
  auto operation = std::make_shared<Operation>(std::move(work));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(operation);
  }
  queued_.notify_one();
  return operation;
}

Error Communicator::wait(Operation &operation) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Work the thread has not taken yet, up to this operation, the caller
  // runs itself, in order: on an oversubscribed machine the thread may not
  // get a core for milliseconds, and the caller has nothing else to do.
  while (!operation.done) {
    if (!executing_ && !queue_.empty())
      runFirst(lock);
    else
      finished_.wait(lock);
  }
  return operation.result;
}

bool Communicator::completed(const Operation &operation) {
  std::lock_guard<std::mutex> lock(mutex_);
  return operation.done;
}

Error Communicator::run(Work work) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!queue_.empty()) {
    lock.unlock();
    return wait(*start(std::move(work)));
  }
  // Nothing in flight: the thread is idle, and stays so while the caller
  // (who alone queues work) runs this itself, which saves the two thread
  // switches of a handoff (several milliseconds on an oversubscribed
  // machine). The lock orders its MPI calls after the thread's last ones.
  lock.unlock();
  return execute(work);
}

Error Communicator::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (thread_.joinable())
    finished_.wait(lock, [&] { return queue_.empty(); });
  else
    while (!queue_.empty())
      runFirst(lock);
  return collectives_->broken() ? collectives_->brokenError()
                                : Error::success();
}

Error Communicator::checkSameOnAllRanks(const std::vector<int64_t> &signature,
                                        const char *what) {
  return run([&](Collectives &collectives) {
    return collectives.checkSameOnAllRanks(signature, what);
  });
}

Error Communicator::broadcast(void *data, int bytes) {
  return run([&](Collectives &collectives) {
    return collectives.broadcast(data, bytes);
  });
}

} // namespace ddprt
