//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//
//
// Reads and writes the NumPy array format (versions 1.0, 2.0 and 3.0):
// little-endian, C order, the element types a step function takes. Every
// malformed file is an error with a message, never a crash.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_TOOLS_DDP_RUN_NPY_H
#define DDP_TOOLS_DDP_RUN_NPY_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace npy {

/// An array: its NumPy type string ("<f4"), shape and raw bytes.
struct Array {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<char> data;

  int64_t numElements() const;
};

/// The size of one element of `descr`, or 0 for a type we do not read.
size_t elementSize(llvm::StringRef descr);

/// Parses the bytes of a .npy file (`name` is for messages).
llvm::Expected<Array> parse(llvm::StringRef bytes, llvm::StringRef name);

/// Reads a .npy file.
llvm::Expected<Array> read(llvm::StringRef path);

/// Writes `array` as a version 1.0 file (2.0 if the header needs it),
/// through a temporary file renamed into place; creates missing parent
/// directories.
llvm::Error write(llvm::StringRef path, const Array &array);

} // namespace npy

#endif // DDP_TOOLS_DDP_RUN_NPY_H
