//===- Options.h - ddprt_options read, written and checked ------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The options struct (and the counters struct) is versioned as NCCL's
// ncclConfig_t is (ddprt.h): a caller compiled with an older ddprt.h passes a
// smaller struct, and the runtime reads and writes only the fields that lie
// within its size.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_OPTIONS_H
#define DDPRT_OPTIONS_H

#include "Error.h"

namespace ddprt {

/// Copies the fields of the caller's `given` options (null: none) that lie
/// within its `size` into `options`, which holds the defaults; refuses a
/// size or version this runtime does not know (ddprt.h says which).
Error readOptions(const ddprt_options *given, ddprt_options &options);
/// Copies the fields of `options` that lie within the caller's
/// `given->size` into `given` (ddprt_get_options); refuses a size or
/// version this runtime does not know, as readOptions does.
Error writeOptions(const ddprt_options &options, ddprt_options *given);
/// Copies the fields of `counters` that lie within the caller's
/// `given->size` into `given` (ddprt_get_counters), keeping its size and
/// version; refuses a size or version this runtime does not know.
Error writeCounters(const ddprt_counters &counters, ddprt_counters *given);
/// DDPRT_SIMULATED_LINK, if set and not empty, overrides the simulated
/// link of `options`; a malformed value fails, naming the variable.
Error readSimulatedLinkVariable(ddprt_options &options);
/// DDPRT_RANKS_PER_NODE, if set and not empty, overrides
/// `options.ranks_per_node`; a value that is not a count fails.
Error readRanksPerNodeVariable(ddprt_options &options);
inline constexpr const char *kRanksPerNodeVariable = "DDPRT_RANKS_PER_NODE";
/// The options of ddprt_init: timeout, backend and simulated link.
Error checkOptions(const ddprt_options &options);
/// The fields of joining a job someone else started (ddprt_join_kind),
/// device and stream; checkOptions calls it.
Error checkJoin(const ddprt_options &options);

} // namespace ddprt

#endif // DDPRT_OPTIONS_H
