//===- Counters.h - what the C ABI counts -----------------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The counters ddprt_get_counters hands out: collectives, elements and
// bytes per role, elements before and after compression (as PowerSGD's
// compression_stats() counts them), and seconds per phase.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_COUNTERS_H
#define DDPRT_COUNTERS_H

#include "Context.h"
#include "Status.h"

#include <chrono>

namespace ddprt {

/// Adds the time a call took to a phase.
class PhaseTimer {
public:
  PhaseTimer(ddprt_context *context, ddprt_phase phase)
      : context_(context), phase_(phase),
        start_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer() {
    context_->counters.seconds[phase_] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
            .count();
  }

private:
  ddprt_context *context_;
  ddprt_phase phase_;
  std::chrono::steady_clock::time_point start_;
};

/// Runs a backend call guarded (Status.h) and adds its time to `phase`.
template <typename Fn>
Error timed(ddprt_context *context, ddprt_phase phase, Fn &&fn) {
  PhaseTimer timer(context, phase);
  return guarded(std::forward<Fn>(fn));
}

/// Counts a collective of `role` over the (validated) bucket: an
/// allreduce's buffers, or the inputs of an allgather (what this rank
/// contributes, not the world size times it that it receives).
void countCollective(ddprt_counters &counters, ddprt_role role,
                     const ddprt_buffer *buffers, int count);
/// Counts the gradients a projection compresses (before compression).
void countProjection(ddprt_counters &counters, const ddprt_matrix *matrices,
                     int count);

} // namespace ddprt

#endif // DDPRT_COUNTERS_H
