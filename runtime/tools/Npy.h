//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//
//
// Reads and writes the NumPy array format (versions 1.0, 2.0 and 3.0):
// little-endian, C order, the element types a step function takes. Every
// malformed file is an error with a message, never a crash. Plain C++17
// (no LLVM): ddp-run and ddprt-step-runner both use it.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_TOOLS_NPY_H
#define DDPRT_TOOLS_NPY_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
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

/// Reads a .npy file ("cannot read 'PATH': REASON" on failure).
bool read(const std::string &path, Array &array, std::string &error);

/// Writes `array` as a version 1.0 file (2.0 if the header needs it),
/// through a temporary file renamed into place; creates missing parent
/// directories.
bool write(const std::string &path, const Array &array, std::string &error);

/// Creates `directory` and its missing parents ("" and "." are fine).
bool createDirectories(const std::string &directory, std::string &error);

/// The directory part of `path` ("" if it has none).
std::string parentPath(const std::string &path);

} // namespace npy

#endif // DDPRT_TOOLS_NPY_H
