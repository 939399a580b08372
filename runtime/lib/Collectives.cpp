//===- Collectives.cpp - MPI between the ranks of a job -------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "Collectives.h"

#include "HostArithmetic.h"
#include "Numeric.h"
#include "Validation.h"

#include <algorithm>

#include <chrono>
#include <cstdio>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <sched.h>
#include <string>
#include <thread>

namespace ddprt {

namespace {
/// The count, what the collective does (`operation`), then each buffer's
/// dtype and size.
std::vector<int64_t> signatureOf(int64_t operation, const ddprt_buffer *buffers,
                                 int count) {
  std::vector<int64_t> signature = {count, operation};
  for (int i = 0; i < count; ++i) {
    signature.push_back(buffers[i].dtype);
    signature.push_back(buffers[i].numel);
  }
  return signature;
}
} // namespace

std::vector<int64_t> bucketSignature(ddprt_reduction reduction,
                                     const ddprt_buffer *buffers, int count,
                                     ddprt_group group) {
  // A rank reducing within its node where the others reduce over the world
  // is a mismatch too.
  return signatureOf(int64_t(reduction) + 16 * int64_t(group), buffers, count);
}

std::vector<int64_t> allgatherSignature(const ddprt_buffer *inputs, int count) {
  const int64_t kAllgather = -1; // no ddprt_reduction
  return signatureOf(kAllgather, inputs, count);
}

Error Collectives::brokenError() const {
  return fail(DDPRT_ERROR_STATE,
              "the communicator failed earlier and is out of step with the "
              "other ranks: " +
                  brokenReason_);
}

void Collectives::markBroken(const std::string &reason) {
  if (broken())
    return;
  brokenReason_ = reason;
  broken_.store(true, std::memory_order_release);
}

Error Collectives::failIfBroken() const {
  return broken() ? brokenError() : Error::success();
}

template <typename Fn>
Error Collectives::overLink(double bytesSent, Fn &&collective) {
  auto begin = std::chrono::steady_clock::now();
  DDPRT_TRY(collective());
  if (!link_.on())
    return Error::success();
  // A link so slow that the collective would outlast the timeout fails as
  // one that did not finish: the hold never outlives the timeout.
  double seconds = link_.seconds(bytesSent);
  if (timeoutSeconds_ > 0 && seconds > timeoutSeconds_) {
    std::this_thread::sleep_until(
        begin + std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::duration<double>(timeoutSeconds_)));
    char message[160];
    std::snprintf(message, sizeof message,
                  "the simulated link holds this collective of %.0f bytes for "
                  "%g s, longer than the timeout (%g s)",
                  bytesSent, seconds, timeoutSeconds_);
    return fail(DDPRT_ERROR_TIMEOUT, message);
  }
  std::this_thread::sleep_until(begin + link_.duration(bytesSent));
  return Error::success();
}

} // namespace ddprt

namespace ddprt {

bool Collectives::joinedByNccl(const ddprt_options &options) {
  return options.join == DDPRT_JOIN_NCCL_COMM ||
         options.join == DDPRT_JOIN_NCCL_UNIQUE_ID;
}

/// A job joined through NCCL has no MPI: its size and this rank are the
/// caller's, and the layout of its nodes is ranks_per_node consecutive
/// ranks (0: one node, as torchrun's single-node jobs are).
Error Collectives::createJoinedByNccl(const ddprt_options &options,
                                      std::unique_ptr<Collectives> self,
                                      std::unique_ptr<Collectives> &result) {
  self->joinedByNccl_ = true;
  self->rank_ = options.join_rank;
  self->size_ = options.join_world_size;
  int perNode =
      options.ranks_per_node > 0 ? options.ranks_per_node : self->size_;
  int node = self->rank_ / perNode;
  self->localRank_ = self->rank_ % perNode;
  self->world_.clear();
  self->nodeRanks_.clear();
  self->leaders_.clear();
  for (int r = 0; r < self->size_; ++r) {
    self->world_.push_back(r);
    if (r / perNode == node)
      self->nodeRanks_.push_back(r);
    if (r % perNode == 0)
      self->leaders_.push_back(r);
  }
  // checkJoin made sure that ranks_per_node divides the size.
  self->nodesAlike_ = true;
  result = std::move(self);
  return Error::success();
}

Error Collectives::failIfJoinedByNccl() const {
  if (!joinedByNccl_ || size_ == 1)
    return Error::success();
  return fail(DDPRT_ERROR_UNSUPPORTED,
              "this job was joined through NCCL and has no MPI: the host's "
              "collectives are not available (the CUDA backend's run on "
              "NCCL)");
}

} // namespace ddprt

#if defined(DDPRT_HAVE_MPI)

namespace ddprt {

namespace {
void finalizeMpiAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Finalize();
}

/// MPI has no f16/bf16 sum: a user operation adds pairs in f32 and rounds
/// back, as NCCL does.
template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
void narrowSum(void *in, void *inout, int *length, MPI_Datatype *) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *length; ++i)
    b[i] = Store(Load(a[i]) + Load(b[i]));
}

MPI_Datatype mpiType(ddprt_dtype dtype) {
  switch (dtype) {
  case DDPRT_F32:
    return MPI_FLOAT;
  case DDPRT_F64:
    return MPI_DOUBLE;
  case DDPRT_F16:
  case DDPRT_BF16:
    return MPI_UINT16_T;
  case DDPRT_I8:
  case DDPRT_I32:
  case DDPRT_I64: // never summed: the C API keeps them from allreduces
    break;
  }
  return MPI_DATATYPE_NULL;
}
} // namespace

Error Collectives::check(int code, const char *what) {
  if (code == MPI_SUCCESS)
    return Error::success();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  std::string message = std::string(what) + " failed on rank " +
                        std::to_string(rank_) + ": " +
                        std::string(text, length);
  markBroken(message);
  return fail(DDPRT_ERROR_COMMUNICATION, message);
}

Error Collectives::create(const ddprt_options &options,
                          std::unique_ptr<Collectives> &result) {
  std::unique_ptr<Collectives> self(new Collectives());
  self->timeoutSeconds_ = options.timeout_seconds;
  self->checkShapes_ = options.check_shapes != 0;
  self->link_ = SimulatedLink{options.simulated_link_gbps,
                              options.simulated_link_latency_us};
  if (joinedByNccl(options))
    return createJoinedByNccl(options, std::move(self), result);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    return fail(DDPRT_ERROR_STATE, "MPI was already finalized in this process");
  // The job's communicator: the world, or the one the caller made.
  MPI_Comm parent = MPI_COMM_WORLD;
  if (options.join == DDPRT_JOIN_MPI) {
    if (!initialized)
      return invalid("join is DDPRT_JOIN_MPI but MPI is not initialized in "
                     "this process (whoever made the communicator starts "
                     "MPI)");
    parent = *static_cast<const MPI_Comm *>(options.join_handle);
    if (parent == MPI_COMM_NULL)
      return invalid("join is DDPRT_JOIN_MPI but the communicator is "
                     "MPI_COMM_NULL");
  }
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) !=
        MPI_SUCCESS)
      return fail(DDPRT_ERROR_COMMUNICATION, "MPI_Init_thread failed");
    // MPI cannot be initialized twice in a process: finalize it at exit, so
    // that contexts can be created and finalized again in between.
    std::atexit(finalizeMpiAtExit);
  }
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  self->callableFromAnyThread_ = provided >= MPI_THREAD_SERIALIZED;
  // Errors come back as codes (and become ddprt errors) instead of
  // aborting every rank silently. A caller's communicator keeps its own
  // handler: only the duplicate below is the runtime's.
  if (options.join != DDPRT_JOIN_MPI)
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  // Every collective here is nonblocking and waited for within the timeout
  // (a rank that stopped must not hang the others' start).
  MPI_Comm_rank(parent, &self->rank_);
  // What the nonblocking calls write into lives on the heap and is leaked
  // if they time out: MPI may still complete them later (a stopped rank
  // that resumes), and must not write into freed memory or a communicator
  // handle that was never filled in.
  struct Pending {
    MPI_Comm comm = MPI_COMM_NULL;
    uint64_t node = 1469598103934665603ull;
    std::vector<uint64_t> nodes;
  };
  auto pending = std::make_unique<Pending>();
  MpiRequests requests;
  MPI_Request request;
  DDPRT_TRY(self->check(MPI_Comm_idup(parent, &pending->comm, &request),
                        "MPI_Comm_idup"));
  requests.requests.push_back(request);
  if (Error error = self->wait(requests)) {
    (void)pending.release();
    return error;
  }
  self->comm_ = pending->comm;
  MPI_Comm_set_errhandler(self->comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(self->comm_, &self->rank_);
  MPI_Comm_size(self->comm_, &self->size_);
  // The rank among the ranks on this node: those with the same processor
  // name (MPI_Comm_split_type has no nonblocking form).
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int nameLength = 0;
  MPI_Get_processor_name(name, &nameLength);
  for (int i = 0; i < nameLength; ++i) {
    pending->node ^= uint8_t(name[i]);
    pending->node *= 1099511628211ull;
  }
  pending->nodes.resize(size_t(self->size_));
  DDPRT_TRY(self->check(MPI_Iallgather(&pending->node, 1, MPI_UINT64_T,
                                       pending->nodes.data(), 1, MPI_UINT64_T,
                                       self->comm_, &request),
                        "MPI_Iallgather"));
  requests.requests.push_back(request);
  if (Error error = self->wait(requests)) {
    (void)pending.release();
    return error;
  }
  std::vector<uint64_t> &nodes = pending->nodes;
  if (options.ranks_per_node > 0)
    for (int r = 0; r < self->size_; ++r)
      nodes[size_t(r)] = uint64_t(r / options.ranks_per_node);
  self->localRank_ = int(std::count(nodes.begin(), nodes.begin() + self->rank_,
                                    nodes[self->rank_]));
  self->world_.clear();
  self->nodeRanks_.clear();
  self->leaders_.clear();
  for (int r = 0; r < self->size_; ++r) {
    self->world_.push_back(r);
    if (nodes[size_t(r)] == nodes[size_t(self->rank_)])
      self->nodeRanks_.push_back(r);
    if (std::find(nodes.begin(), nodes.begin() + r, nodes[size_t(r)]) ==
        nodes.begin() + r)
      self->leaders_.push_back(r);
  }
  for (int leader : self->leaders_)
    self->nodesAlike_ &=
        std::count(nodes.begin(), nodes.end(), nodes[size_t(leader)]) ==
        std::ptrdiff_t(self->nodeRanks_.size());
  DDPRT_TRY(
      self->check(MPI_Op_create(&narrowSum<halfBitsToFloat, floatToHalfBits>, 1,
                                &self->halfSum_),
                  "MPI_Op_create"));
  DDPRT_TRY(self->check(
      MPI_Op_create(&narrowSum<bfloat16BitsToFloat, floatToBFloat16Bits>, 1,
                    &self->bfloat16Sum_),
      "MPI_Op_create"));
  result = std::move(self);
  return Error::success();
}

Collectives::~Collectives() {
  if (joinedByNccl_)
    return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  if (halfSum_ != MPI_OP_NULL)
    MPI_Op_free(&halfSum_);
  if (bfloat16Sum_ != MPI_OP_NULL)
    MPI_Op_free(&bfloat16Sum_);
  if (comm_ != MPI_COMM_NULL)
    MPI_Comm_free(&comm_);
}

Error Collectives::sum(void *data, int64_t count, ddprt_dtype dtype,
                       double scale) {
  DDPRT_TRY(failIfJoinedByNccl());
  DDPRT_TRY(failIfBroken());
  if (size_ == 1 || count == 0) {
    if (scale != 1.0)
      scaleHost(scale, ddprt_buffer{data, dtype, count});
    return Error::success();
  }
  int64_t bytes = count * int64_t(ddprt_dtype_size(dtype));
  return overLink(2.0 * (size_ - 1) / size_ * double(bytes), [&] {
    // Below this the ring's 2(W-1) latency steps cost more than they save.
    const int64_t kRingBytes = 256 * 1024;
    if (bytes >= kRingBytes && count >= size_)
      return ringSum(world_, static_cast<char *>(data), count, dtype, scale);
    DDPRT_TRY(mpiSum(data, count, dtype));
    if (scale != 1.0)
      scaleHost(scale, ddprt_buffer{data, dtype, count});
    return Error::success();
  });
}

Error Collectives::mpiSum(void *data, int64_t count, ddprt_dtype dtype) {
  MPI_Datatype type = mpiType(dtype);
  MPI_Op op = dtype == DDPRT_F16    ? halfSum_
              : dtype == DDPRT_BF16 ? bfloat16Sum_
                                    : MPI_SUM;
  size_t elementSize = ddprt_dtype_size(dtype);
  char *bytes = static_cast<char *>(data);
  MpiRequests requests;
  for (int64_t offset = 0; offset < count; offset += INT_MAX) {
    int chunk = int(std::min<int64_t>(INT_MAX, count - offset));
    MPI_Request request;
    DDPRT_TRY(check(MPI_Iallreduce(MPI_IN_PLACE, bytes + offset * elementSize,
                                   chunk, type, op, comm_, &request),
                    "MPI_Iallreduce"));
    requests.requests.push_back(request);
  }
  return wait(requests);
}

Error Collectives::sum(ddprt_group group, void *data, int64_t count,
                       ddprt_dtype dtype, double scale) {
  DDPRT_TRY(failIfJoinedByNccl());
  if (group == DDPRT_GROUP_WORLD)
    return sum(data, count, dtype, scale);
  DDPRT_TRY(failIfBroken());
  char *bytes = static_cast<char *>(data);
  auto scaleOnly = [&] {
    if (scale != 1.0 && count > 0)
      scaleHost(scale, ddprt_buffer{data, dtype, count});
    return Error::success();
  };
  if (group == DDPRT_GROUP_NODE)
    return nodeRanks_.size() == 1 || count == 0
               ? scaleOnly()
               : ringSum(nodeRanks_, bytes, count, dtype, scale);
  if (count == 0)
    return Error::success();
  if (rank_ == nodeRanks_.front()) {
    if (leaders_.size() == 1) {
      DDPRT_TRY(scaleOnly());
    } else {
      int64_t size = count * int64_t(ddprt_dtype_size(dtype));
      int nodes = int(leaders_.size());
      DDPRT_TRY(overLink(2.0 * (nodes - 1) / nodes * double(size), [&] {
        return ringSum(leaders_, bytes, count, dtype, scale);
      }));
    }
  }
  if (nodeRanks_.size() == 1)
    return Error::success();
  return broadcastFromFirst(nodeRanks_, bytes,
                            count * int64_t(ddprt_dtype_size(dtype)));
}

Error Collectives::wait(MpiRequests &requests) {
  if (requests.requests.empty())
    return Error::success();
  if (timeoutSeconds_ <= 0.0) {
    int code = MPI_Waitall(int(requests.requests.size()),
                           requests.requests.data(), MPI_STATUSES_IGNORE);
    requests.requests.clear();
    return check(code, "MPI_Waitall");
  }
  auto start = std::chrono::steady_clock::now();
  while (true) {
    int done = 0;
    DDPRT_TRY(
        check(MPI_Testall(int(requests.requests.size()),
                          requests.requests.data(), &done, MPI_STATUSES_IGNORE),
              "MPI_Testall"));
    if (done) {
      requests.requests.clear();
      return Error::success();
    }
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (waited > timeoutSeconds_) {
      std::string message = "a collective did not complete within " +
                            std::to_string(timeoutSeconds_) + " s on rank " +
                            std::to_string(rank_) +
                            " (a rank may have died or stopped calling the "
                            "runtime)";
      markBroken(message);
      return fail(DDPRT_ERROR_TIMEOUT, message);
    }
    // Spin while a collective is likely to finish soon, then sleep a
    // little, so that waiting ranks on an oversubscribed machine leave the
    // CPU to the rank they wait for.
    if (waited < 0.01)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

Error Collectives::gather(const void *send, int64_t bytes, void *received) {
  DDPRT_TRY(failIfJoinedByNccl());
  DDPRT_TRY(failIfBroken());
  if (bytes == 0)
    return Error::success();
  if (size_ == 1) {
    std::memcpy(received, send, size_t(bytes));
    return Error::success();
  }
  // A ring allgather sends the W - 1 other ranks' blocks on: (W - 1) B.
  return overLink(double(size_ - 1) * double(bytes), [&] {
    // Each piece of a rank's block lands `bytes` apart from the same piece
    // of the next rank's: a contiguous type of the piece's size whose extent
    // is the whole block. With one piece (up to 1 GiB) that is the block
    // itself.
    const int64_t kPiece = int64_t(1) << 30;
    const char *from = static_cast<const char *>(send);
    char *to = static_cast<char *>(received);
    MpiRequests requests;
    for (int64_t offset = 0; offset < bytes; offset += kPiece) {
      int piece = int(std::min(kPiece, bytes - offset));
      MPI_Datatype block = MPI_DATATYPE_NULL, strided = MPI_DATATYPE_NULL;
      DDPRT_TRY(check(MPI_Type_contiguous(piece, MPI_BYTE, &block),
                      "MPI_Type_contiguous"));
      int created =
          MPI_Type_create_resized(block, 0, MPI_Aint(bytes), &strided);
      MPI_Type_free(&block);
      DDPRT_TRY(check(created, "MPI_Type_create_resized"));
      int code = MPI_Type_commit(&strided);
      MPI_Request request;
      if (code == MPI_SUCCESS)
        code = MPI_Iallgather(from + offset, piece, MPI_BYTE, to + offset, 1,
                              strided, comm_, &request);
      // Freeing a type does not affect pending operations that use it.
      MPI_Type_free(&strided);
      DDPRT_TRY(check(code, "MPI_Iallgather"));
      requests.requests.push_back(request);
    }
    return wait(requests);
  });
}

Error Collectives::checkSameOnAllRanks(const std::vector<int64_t> &signature,
                                       const char *what) {
  DDPRT_TRY(failIfJoinedByNccl());
  DDPRT_TRY(failIfBroken());
  if (!checkShapes_ || size_ == 1)
    return Error::success();
  // A fixed-size digest, so that the collective itself matches even when the
  // ranks' signatures differ in length: the length, the sum, and a 64-bit
  // FNV-1a hash split in two. One MAX over (x, -x) gives every rank both the
  // maximum and the minimum of each.
  uint64_t hash = 1469598103934665603ull;
  int64_t total = 0;
  for (int64_t value : signature) {
    total = int64_t(uint64_t(total) + uint64_t(value)); // a digest: wraps
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= uint8_t(uint64_t(value) >> (8 * byte));
      hash *= 1099511628211ull;
    }
  }
  const int64_t digest[4] = {int64_t(signature.size()), total,
                             int64_t(hash >> 32), int64_t(hash & 0xffffffffu)};
  int64_t both[8];
  for (int i = 0; i < 4; ++i) {
    both[i] = digest[i];
    both[4 + i] = -digest[i];
  }
  DDPRT_TRY(overLink(2.0 * (size_ - 1) / size_ * sizeof both, [&] {
    MpiRequests requests;
    MPI_Request request;
    DDPRT_TRY(check(MPI_Iallreduce(MPI_IN_PLACE, both, 8, MPI_INT64_T, MPI_MAX,
                                   comm_, &request),
                    "MPI_Iallreduce"));
    requests.requests.push_back(request);
    return wait(requests);
  }));
  for (int i = 0; i < 4; ++i)
    if (both[i] != -both[4 + i])
      return fail(DDPRT_ERROR_MISMATCH, std::string(what) +
                                            ": ranks passed different tensor "
                                            "counts, sizes or types (rank " +
                                            std::to_string(rank_) + " passed " +
                                            std::to_string(digest[0] / 2 - 1) +
                                            " tensors of " +
                                            std::to_string(digest[1]) +
                                            " summed sizes and dtype codes)");
  return Error::success();
}

Error Collectives::broadcast(void *data, int bytes) {
  DDPRT_TRY(failIfJoinedByNccl());
  DDPRT_TRY(failIfBroken());
  if (size_ == 1)
    return Error::success();
  return overLink(double(bytes), [&] {
    MpiRequests requests;
    MPI_Request request;
    DDPRT_TRY(check(MPI_Ibcast(data, bytes, MPI_BYTE, 0, comm_, &request),
                    "MPI_Ibcast"));
    requests.requests.push_back(request);
    return wait(requests);
  });
}

} // namespace ddprt

#else // !DDPRT_HAVE_MPI: a job of one rank.

namespace ddprt {

Error Collectives::create(const ddprt_options &options,
                          std::unique_ptr<Collectives> &result) {
  std::unique_ptr<Collectives> self(new Collectives());
  self->timeoutSeconds_ = options.timeout_seconds;
  self->checkShapes_ = options.check_shapes != 0;
  if (joinedByNccl(options))
    return createJoinedByNccl(options, std::move(self), result);
  result = std::move(self);
  return Error::success();
}

Collectives::~Collectives() = default;

Error Collectives::sum(void *data, int64_t count, ddprt_dtype dtype,
                       double scale) {
  DDPRT_TRY(failIfJoinedByNccl());
  DDPRT_TRY(failIfBroken());
  if (scale != 1.0)
    scaleHost(scale, ddprt_buffer{data, dtype, count});
  return Error::success();
}

Error Collectives::sum(ddprt_group, void *data, int64_t count,
                       ddprt_dtype dtype, double scale) {
  return sum(data, count, dtype, scale);
}

Error Collectives::gather(const void *send, int64_t bytes, void *received) {
  DDPRT_TRY(failIfJoinedByNccl());
  DDPRT_TRY(failIfBroken());
  if (bytes > 0)
    std::memcpy(received, send, size_t(bytes));
  return Error::success();
}

Error Collectives::checkSameOnAllRanks(const std::vector<int64_t> &,
                                       const char *) {
  return failIfJoinedByNccl();
}

Error Collectives::broadcast(void *, int) { return failIfJoinedByNccl(); }

} // namespace ddprt

#endif // DDPRT_HAVE_MPI
