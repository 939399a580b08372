//===- MemRef.h - the memref descriptors compiled steps take ----*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The one definition of the ranked memref descriptor that the host passes to
// compiled step code and takes back from it, word by word: allocated pointer,
// aligned pointer, offset, sizes[rank], strides[rank] (all 64-bit words).
// The layout is upstream MLIR's StridedMemRefType<T, N>
// (mlir/ExecutionEngine/CRunnerUtils.h), here without MLIR and for a rank
// known only at run time; the compiler side (include/ddp/Target/
// StepCompiler.h) checks its packed entry against it.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_MEMREF_H
#define DDPRT_HOST_MEMREF_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stephost {

// A descriptor word holds a pointer.
static_assert(sizeof(void *) == sizeof(int64_t), "64-bit hosts only");

/// The words of a ranked descriptor: allocated, aligned, offset, sizes,
/// strides.
constexpr size_t descriptorWordCount(size_t rank) { return 3 + 2 * rank; }

/// A ranked descriptor held in `descriptorWordCount(rank)` words.
struct StridedMemRefView {
  const int64_t *words;
  size_t rank;

  void *allocated() const { return reinterpret_cast<void *>(words[0]); }
  void *aligned() const { return reinterpret_cast<void *>(words[1]); }
  int64_t offset() const { return words[2]; }
  const int64_t *sizes() const { return words + 3; }
  const int64_t *strides() const { return words + 3 + rank; }
  /// The first element: the aligned pointer advanced by the offset.
  char *data(size_t elementBytes) const {
    return static_cast<char *>(aligned()) + offset() * int64_t(elementBytes);
  }
};

/// Appends the descriptor of a contiguous row-major buffer (offset 0).
inline void appendDescriptor(std::vector<int64_t> &words, void *allocated,
                             void *aligned, const std::vector<int64_t> &sizes) {
  words.push_back(reinterpret_cast<int64_t>(allocated));
  words.push_back(reinterpret_cast<int64_t>(aligned));
  words.push_back(0);
  words.insert(words.end(), sizes.begin(), sizes.end());
  size_t stridesAt = words.size();
  words.resize(stridesAt + sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    words[stridesAt + d] = stride;
    stride *= sizes[d];
  }
}

/// An unranked descriptor (upstream's UnrankedMemRefType): the rank and a
/// pointer to the ranked descriptor's words.
struct UnrankedMemRef {
  int64_t rank;
  void *descriptor;

  StridedMemRefView ranked() const {
    return {static_cast<const int64_t *>(descriptor), size_t(rank)};
  }
};

} // namespace stephost

#endif // DDPRT_HOST_MEMREF_H
