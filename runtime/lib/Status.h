//===- Status.h - errors across the C ABI -----------------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What every C entry point does with the Error its work returns: record its
// message on the context and hand back its status (report), and never let
// an exception (out of memory) escape (guarded).
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_STATUS_H
#define DDPRT_STATUS_H

#include "Error.h"

#include <exception>
#include <string>

namespace ddprt {

/// Records `error` on the context, if there is one (clears it on success),
/// and returns its status.
ddprt_status report(ddprt_context *context, const Error &error);

/// Runs a backend call; an exception (out of memory) becomes an error, so
/// nothing escapes the C ABI.
template <typename Fn> Error guarded(Fn &&fn) {
  try {
    return fn();
  } catch (const std::exception &exception) {
    return fail(DDPRT_ERROR_BACKEND,
                std::string("the runtime ran out of resources: ") +
                    exception.what());
  }
}

} // namespace ddprt

#endif // DDPRT_STATUS_H
