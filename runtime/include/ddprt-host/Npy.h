//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Reads and writes the NumPy array format (versions 1.0, 2.0 and 3.0):
// little-endian, C order, the element types a step function takes. Every
// malformed file is an error with a message, never a crash. Plain C++17
// (no LLVM): ddp-run and ddprt-step-runner both use it.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_NPY_H
#define DDPRT_HOST_NPY_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace npy {

/// An array: its NumPy type string ("<f4"), shape and raw bytes.
struct Array {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<char> data;

  int64_t numElements() const;
};

/// As NumPy prints a shape: (64, 32), (32,), ().
std::string shapeString(const std::vector<int64_t> &shape);

/// The size of one element of `descr`, or 0 for a type we do not read.
size_t elementSize(std::string_view descr);

/// Parses the bytes of a .npy file (`name` is for messages). On failure
/// returns false and sets `error`.
bool parse(std::string_view bytes, const std::string &name, Array &array,
           std::string &error);

/// Checks an array's type and shape from its header (`header` has no data
/// yet), before the data is read: an array of the wrong size is refused
/// without reading (or allocating) what its header declares.
using HeaderCheck =
    std::function<bool(const Array &header, std::string &error)>;

/// Reads a .npy file ("cannot read 'PATH': REASON" on failure).
bool read(const std::string &path, Array &array, std::string &error,
          const HeaderCheck &check = nullptr);

/// A NumPy .npz archive (np.savez, np.savez_compressed): a zip of .npy
/// files, one per array, named after the array. Read with libzip (stored,
/// deflated and zip64 members); every array is read as a .npy file is, with
/// the same checks.
class Archive {
public:
  Archive() = default;
  Archive(const Archive &) = delete;
  Archive &operator=(const Archive &) = delete;
  ~Archive();
  /// Opens the archive at `path` ("cannot read 'PATH': ..." on failure).
  bool open(const std::string &path, std::string &error);
  /// The arrays' names (members without ".npy"), in the archive's order.
  std::vector<std::string> names() const;
  bool contains(const std::string &name) const;
  /// Reads array `name` ("'PATH' has no array 'NAME'" if absent).
  bool read(const std::string &name, Array &array, std::string &error,
            const HeaderCheck &check = nullptr);

private:
  std::string path;
  void *zip = nullptr;
  /// (array name, member name).
  std::vector<std::pair<std::string, std::string>> members;
};

/// Whether this build reads and writes .npz (it needs libzip).
bool archiveSupported();

/// Writes `arrays` (name, array) as an .npz that np.load reads: one stored
/// member NAME.npy each, through a temporary file renamed into place;
/// creates missing parent directories.
bool writeArchive(
    const std::string &path,
    const std::vector<std::pair<std::string, const Array *>> &arrays,
    std::string &error);

/// Writes `array` as a version 1.0 file (2.0 if the header needs it),
/// through a temporary file renamed into place; creates missing parent
/// directories.
bool write(const std::string &path, const Array &array, std::string &error);

/// Creates `directory` and its missing parents ("" and "." are fine).
bool createDirectories(const std::string &directory, std::string &error);

/// The directory part of `path` ("" if it has none).
std::string parentPath(const std::string &path);

} // namespace npy

#endif // DDPRT_HOST_NPY_H
