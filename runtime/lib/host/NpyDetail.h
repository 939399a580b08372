//===- NpyDetail.h - what .npy and .npz files share ------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Private to the host library: the reading and writing of one .npy that
// Npy.cpp (files) and Npz.cpp (members of an .npz) share.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_NPYDETAIL_H
#define DDPRT_HOST_NPYDETAIL_H

#include "Npy.h"
#include "WriteAll.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace npy::detail {

/// Where the bytes of one .npy come from: a file, or a member of an .npz.
class Source {
public:
  virtual ~Source() = default;
  /// Reads up to `size` bytes (fewer only at the end); on failure says why.
  bool readUpTo(char *data, size_t size, size_t &got, std::string &why) {
    got = 0;
    while (got < size) {
      int64_t n = readSome(data + got, size - got, why);
      if (n < 0)
        return false;
      if (n == 0)
        break;
      got += size_t(n);
    }
    return true;
  }
  /// The size in bytes, when it is known before reading (a regular file).
  std::optional<uint64_t> size;
  /// Whether it might never end (a pipe, /dev/zero), for the message.
  bool stream = false;

private:
  /// One read of at most `size` bytes: how many came (0 at the end), or -1
  /// with the reason in `why`.
  virtual int64_t readSome(char *data, size_t size, std::string &why) = 0;
};

/// Reads one .npy from `source`: the header first, then exactly the bytes
/// it promises, so that a source that does not end (/dev/zero, a pipe that
/// keeps writing) costs no more memory than its header says, and one of
/// known size that is wrong is refused before its data is read.
/// `cannotRead` prefixes the reason of a failed read.
bool readFrom(Source &source, const std::string &name,
              const std::string &cannotRead, Array &array, std::string &error,
              const HeaderCheck &check);

/// The header of a .npy file holding `array` (magic, version, length,
/// dictionary).
std::string headerBytes(const Array &array);

using stephost::writeAll;

/// Whether `path` exists and is neither a regular file nor a directory: a
/// device (/dev/null), a pipe or a socket, which writers write into rather
/// than replace.
bool isSpecialFile(const std::string &path);

} // namespace npy::detail

#endif // DDPRT_HOST_NPYDETAIL_H
