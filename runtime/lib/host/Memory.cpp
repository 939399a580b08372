//===- Memory.cpp - the buffers compiled steps and the host share ---------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "Memory.h"

#include "ddprt/ddprt.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace stephost {

namespace {

/// Whether compiled code's buffers are managed memory (CUDA backend).
bool sharedBuffers = false;

/// Freed buffers by size, for the next allocation of that size. A step
/// allocates the same sizes every time, so from the second step on it takes
/// no fresh pages: each fresh page costs a page fault, and on the 2-core VM
/// the faults of an fp16 step's 150 MB of new buffers made it 14x slower
/// than the same runtime calls on reused buffers (docs/performance.md).
/// The threads of a parallel loop allocate and free their tiles' buffers
/// side by side.
std::mutex blocksMutex;
std::map<void *, size_t> liveBlocks;
std::multimap<size_t, void *> freeBlocks;

} // namespace

void useSharedBuffers(bool shared) { sharedBuffers = shared; }

void *allocateBuffer(size_t bytes) {
  if (bytes > SIZE_MAX - 63)
    return nullptr;
  size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  std::lock_guard<std::mutex> lock(blocksMutex);
  void *pointer = nullptr;
  if (auto reuse = freeBlocks.find(rounded); reuse != freeBlocks.end()) {
    pointer = reuse->second;
    freeBlocks.erase(reuse);
  } else if (!sharedBuffers) {
    pointer = std::aligned_alloc(64, rounded);
  } else if (ddprt_alloc(ddprt_current_context(), rounded, &pointer) !=
             DDPRT_OK) {
    pointer = nullptr;
  }
  if (pointer)
    liveBlocks[pointer] = rounded;
  return pointer;
}

void releaseBuffer(void *pointer) {
  if (!pointer)
    return;
  std::lock_guard<std::mutex> lock(blocksMutex);
  auto live = liveBlocks.find(pointer);
  if (live == liveBlocks.end()) {
    std::free(pointer); // over-aligned host memory (hostAlignedAlloc)
    return;
  }
  freeBlocks.emplace(live->second, pointer);
  liveBlocks.erase(live);
}

void releaseCachedBuffers() {
  std::lock_guard<std::mutex> lock(blocksMutex);
  for (auto &[bytes, pointer] : freeBlocks) {
    if (sharedBuffers)
      ddprt_free(ddprt_current_context(), pointer);
    else
      std::free(pointer);
  }
  freeBlocks.clear();
}

namespace {

/// A step's allocation that failed: compiled code would write through the
/// null pointer (every rank dying in memset), so it is reported as a failed
/// runtime call is (ddprt_fail: the host's handler names the rank and the
/// step, and stops the job) and the process ends here if that returns.
[[noreturn]] void failAllocation(const std::string &message) {
  ddprt_fail(ddprt_current_context(), "a buffer of the step", message.c_str());
  std::fflush(nullptr);
  std::_Exit(1);
}

void *orFail(void *pointer, size_t bytes) {
  if (!pointer)
    failAllocation("cannot allocate " + std::to_string(bytes) + " bytes (" +
                   (sharedBuffers ? "out of device memory"
                                  : "out of host memory") +
                   ")");
  return pointer;
}

} // namespace

void *hostAlloc(size_t bytes) { return orFail(allocateBuffer(bytes), bytes); }

void *hostAlignedAlloc(size_t alignment, size_t bytes) {
  // Both kinds of memory are at least 64-byte aligned (managed memory 256).
  if (alignment <= 64 || (sharedBuffers && alignment <= 256))
    return orFail(allocateBuffer(bytes), bytes);
  if (sharedBuffers || (alignment & (alignment - 1)) != 0)
    failAllocation("cannot allocate " + std::to_string(bytes) +
                   " bytes aligned to " + std::to_string(alignment) +
                   " (64 on the CPU, 256 on a GPU at most; a power of two)");
  if (bytes > SIZE_MAX - alignment)
    return orFail(nullptr, bytes);
  return orFail(std::aligned_alloc(alignment,
                                   (std::max<size_t>(bytes, 1) + alignment -
                                    1) / alignment * alignment),
                bytes);
}

void hostFree(void *pointer) { releaseBuffer(pointer); }

void hostMemrefCopy(int64_t elementSize, UnrankedMemRef *source,
                    UnrankedMemRef *target) {
  struct View {
    char *data;
    const int64_t *sizes, *strides;
  };
  auto view = [&](UnrankedMemRef *memref) {
    StridedMemRefView ranked = memref->ranked();
    return View{ranked.data(size_t(elementSize)), ranked.sizes(),
                ranked.strides()};
  };
  int64_t rank = source->rank;
  View from = view(source), to = view(target);
  for (int64_t d = 0; d < rank; ++d)
    if (from.sizes[d] == 0)
      return;
  if (rank == 0) {
    std::memcpy(to.data, from.data, size_t(elementSize));
    return;
  }
  std::vector<int64_t> index(size_t(rank), 0);
  int64_t fromOffset = 0, toOffset = 0;
  for (;;) {
    std::memcpy(to.data + toOffset * elementSize,
                from.data + fromOffset * elementSize, size_t(elementSize));
    int64_t d = rank - 1;
    for (; d >= 0; --d) {
      if (++index[d] < from.sizes[d]) {
        fromOffset += from.strides[d];
        toOffset += to.strides[d];
        break;
      }
      fromOffset -= from.strides[d] * (from.sizes[d] - 1);
      toOffset -= to.strides[d] * (from.sizes[d] - 1);
      index[d] = 0;
    }
    if (d < 0)
      return;
  }
}

} // namespace stephost
