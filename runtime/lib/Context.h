//===- Context.h - what a ddprt_context holds -------------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDPRT_CONTEXT_H
#define DDPRT_CONTEXT_H

#include "Backend.h"
#include "Communicator.h"
#include "Error.h"

#include <map>
#include <memory>
#include <string>
#include <unordered_set>

struct ddprt_state {
  std::string name;
  ddprt_dtype dtype;
  int64_t numel;
  void *data;
  /// I64 states (step counters) live in host memory on every backend: the
  /// host reads them to branch (warm-up, first step) without a device copy.
  bool onHost;
};

struct ddprt_request {
  std::unique_ptr<ddprt::Request> backendRequest;
  ddprt_role role;
};

struct ddprt_context {
  ddprt_options options;
  std::unique_ptr<ddprt::Communicator> communicator;
  std::unique_ptr<ddprt::Backend> backend;
  /// Ordered by name, so checkpoints list states the same way every time.
  std::map<std::string, std::unique_ptr<ddprt_state>> states;
  /// Requests started and not yet waited for: ddprt_finalize frees them.
  std::unordered_set<ddprt_request *> requests;
  ddprt_counters counters{};
  /// Mutable: const queries report their argument errors too.
  mutable std::string lastError;
  /// Whether the DDPRT_NONFINITE being reported is this rank's alone (a
  /// state of its own, ddprt_report_nonfinite) rather than one every rank
  /// saw the same (an averaged factor).
  bool nonfiniteThisRankOnly = false;
};

namespace ddprt {

/// Starts `context` with `options` (the defaults if null): checks them,
/// then creates the communicator and the backend. On failure the context
/// is still whole enough to say why and to be destroyed.
Error initContext(ddprt_context &context, const ddprt_options *options);
/// Drains the backend (within the timeout), frees the states and the
/// context.
void destroyContext(ddprt_context *context);

/// The factor a ddprt_world_scale stands for on this context's job.
double worldScale(const ddprt_context &context, ddprt_world_scale factor);

} // namespace ddprt

#endif // DDPRT_CONTEXT_H
