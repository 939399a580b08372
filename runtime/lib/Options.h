//===- Options.h - ddprt_options read, written and checked ------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The options struct is versioned as NCCL's ncclConfig_t is (ddprt.h): a
// caller compiled with an older ddprt.h passes a smaller struct, and the
// runtime reads and writes only the fields that lie within its size.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_OPTIONS_H
#define DDPRT_OPTIONS_H

#include "Error.h"

#include <cstddef>
#include <string>

namespace ddprt {

/// The check of a struct the caller fills with its size and version
/// (ddprt_options, ddprt_counters): refuses a size larger than this
/// runtime's (`ownSize`) or none it knows (`knownSize` false), and a
/// version newer than this runtime's or older than `firstVersion`, saying
/// how to fill it (`fill`). `what` names it in messages ("options").
Error checkCallerStruct(const char *what, const char *type, size_t size,
                        bool knownSize, size_t ownSize, unsigned version,
                        unsigned firstVersion, const std::string &fill);

/// Copies the fields of the caller's `given` options (null: none) that lie
/// within its `size` into `options`, which holds the defaults; refuses a
/// size or version this runtime does not know (ddprt.h says which).
Error readOptions(const ddprt_options *given, ddprt_options &options);
/// Copies the fields of `options` that lie within the caller's
/// `given->size` into `given` (ddprt_get_options); refuses a size or
/// version this runtime does not know, as readOptions does.
Error writeOptions(const ddprt_options &options, ddprt_options *given);
/// DDPRT_SIMULATED_LINK, if set and not empty, overrides the simulated
/// link of `options`; a malformed value fails, naming the variable.
Error readSimulatedLinkVariable(ddprt_options &options);
/// The options of ddprt_init: timeout, backend and simulated link.
Error checkOptions(const ddprt_options &options);

} // namespace ddprt

#endif // DDPRT_OPTIONS_H
