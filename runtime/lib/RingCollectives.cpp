//===- RingCollectives.cpp - point-to-point algorithms over MPI ----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The collectives ddprt runs itself over MPI point-to-point messages rather
// than as one MPI call: the ring allreduce (a reduce-scatter, then an
// allgather of the reduced chunks; what a world sum with a simulated link
// and the cross-node sum among node leaders use) and the broadcast from a
// node's first rank to the others (the last stage of a two-level sum).
// Messages are cut into pieces MPI's int counts can hold.
//
//===----------------------------------------------------------------------===//

#include "Collectives.h"

#include "HostArithmetic.h"

#if defined(DDPRT_HAVE_MPI)

#include <algorithm>
#include <functional>

namespace ddprt {

namespace {
using Checker = std::function<Error(int, const char *)>;

/// Posts a send (or a receive) of `bytes` at `data` to (from) `peer`, in
/// pieces MPI's int counts can hold; the other side posts the same pieces.
Error post(MPI_Comm comm, bool isSend, char *data, int64_t bytes, int peer,
           MpiRequests &requests, const Checker &check) {
  const int64_t kPiece = int64_t(1) << 30;
  for (int64_t offset = 0; offset < bytes; offset += kPiece) {
    int count = int(std::min(kPiece, bytes - offset));
    MPI_Request request;
    DDPRT_TRY(isSend ? check(MPI_Isend(data + offset, count, MPI_BYTE, peer, 0,
                                       comm, &request),
                             "MPI_Isend")
                     : check(MPI_Irecv(data + offset, count, MPI_BYTE, peer, 0,
                                       comm, &request),
                             "MPI_Irecv"));
    requests.requests.push_back(request);
  }
  return Error::success();
}

/// Posts a send of `sendBytes` to `to` and a receive of `recvBytes` from
/// `from`, in pieces MPI's int counts can hold.
Error exchange(MPI_Comm comm, const char *send, int64_t sendBytes, int to,
               char *recv, int64_t recvBytes, int from, MpiRequests &requests,
               const Checker &check) {
  DDPRT_TRY(post(comm, true, const_cast<char *>(send), sendBytes, to, requests,
                 check));
  return post(comm, false, recv, recvBytes, from, requests, check);
}
} // namespace

Error Collectives::broadcastFromFirst(const std::vector<int> &ranks, char *data,
                                      int64_t bytes) {
  auto checker = [this](int code, const char *what) {
    return check(code, what);
  };
  MpiRequests requests;
  if (rank_ != ranks.front())
    DDPRT_TRY(
        post(comm_, false, data, bytes, ranks.front(), requests, checker));
  else
    for (size_t i = 1; i < ranks.size(); ++i)
      DDPRT_TRY(post(comm_, true, data, bytes, ranks[i], requests, checker));
  return wait(requests);
}

Error Collectives::ringSum(const std::vector<int> &ring, char *data,
                           int64_t count, ddprt_dtype dtype, double scale) {
  const int64_t elementSize = int64_t(ddprt_dtype_size(dtype));
  const int world = int(ring.size());
  const int position =
      int(std::find(ring.begin(), ring.end(), rank_) - ring.begin());
  auto chunkBegin = [&](int chunk) {
    int64_t base = count / world, extra = count % world;
    return chunk * base + std::min<int64_t>(chunk, extra);
  };
  auto chunkSize = [&](int chunk) {
    return chunkBegin(chunk + 1) - chunkBegin(chunk);
  };
  auto checker = [this](int code, const char *what) {
    return check(code, what);
  };
  int right = ring[size_t((position + 1) % world)],
      left = ring[size_t((position + world - 1) % world)];
  scratch_.resize(size_t(chunkSize(0) * elementSize));
  // Reduce-scatter: after W-1 steps this rank holds chunk (position+1) % W.
  for (int step = 0; step < world - 1; ++step) {
    int sendChunk = (position - step + world) % world;
    int recvChunk = (position - step - 1 + world) % world;
    MpiRequests requests;
    DDPRT_TRY(exchange(comm_, data + chunkBegin(sendChunk) * elementSize,
                       chunkSize(sendChunk) * elementSize, right,
                       scratch_.data(), chunkSize(recvChunk) * elementSize,
                       left, requests, checker));
    DDPRT_TRY(wait(requests));
    accumulateHost(ddprt_buffer{data + chunkBegin(recvChunk) * elementSize,
                                dtype, chunkSize(recvChunk)},
                   scratch_.data());
  }
  int owned = (position + 1) % world;
  if (scale != 1.0)
    scaleHost(scale, ddprt_buffer{data + chunkBegin(owned) * elementSize, dtype,
                                  chunkSize(owned)});
  // Allgather the reduced chunks.
  for (int step = 0; step < world - 1; ++step) {
    int sendChunk = (position - step + 1 + world) % world;
    int recvChunk = (position - step + world) % world;
    MpiRequests requests;
    DDPRT_TRY(exchange(comm_, data + chunkBegin(sendChunk) * elementSize,
                       chunkSize(sendChunk) * elementSize, right,
                       data + chunkBegin(recvChunk) * elementSize,
                       chunkSize(recvChunk) * elementSize, left, requests,
                       checker));
    DDPRT_TRY(wait(requests));
  }
  return Error::success();
}

} // namespace ddprt

#endif // DDPRT_HAVE_MPI
