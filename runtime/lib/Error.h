//===- Error.h - status plus message ----------------------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDPRT_ERROR_H
#define DDPRT_ERROR_H

#include "ddprt/ddprt.h"

#include <string>

namespace ddprt {

/// A ddprt_status with the message the C API hands out.
struct Error {
  ddprt_status status = DDPRT_OK;
  std::string message;

  static Error success() { return {}; }
  explicit operator bool() const { return status != DDPRT_OK; }
};

inline Error fail(ddprt_status status, std::string message) {
  return {status, std::move(message)};
}

} // namespace ddprt

/// Returns from the enclosing function if `expr` fails.
#define DDPRT_TRY(expr)                                                        \
  do {                                                                         \
    if (::ddprt::Error ddprtError = (expr))                                    \
      return ddprtError;                                                       \
  } while (false)

#endif // DDPRT_ERROR_H
