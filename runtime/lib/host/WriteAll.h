//===- WriteAll.h - write a whole buffer to a file descriptor ---*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDPRT_HOST_WRITEALL_H
#define DDPRT_HOST_WRITEALL_H

#include <cerrno>
#include <cstddef>
#include <unistd.h>

namespace stephost {

/// Writes all of `data` to `fd` (retrying short and interrupted writes);
/// false with errno set on failure. Async-signal-safe: the crash handler
/// and the watchdog use it.
inline bool writeAll(int fd, const char *data, size_t size) {
  while (size > 0) {
    ssize_t wrote = ::write(fd, data, size);
    if (wrote < 0 && errno == EINTR)
      continue;
    if (wrote <= 0)
      return false;
    data += wrote;
    size -= size_t(wrote);
  }
  return true;
}

} // namespace stephost

#endif // DDPRT_HOST_WRITEALL_H
