//===- Memory.h - the buffers compiled steps and the host share -*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One allocator for the buffers a compiled step allocates and frees (its
// memref allocation functions) and for those the step loop hands it (inputs)
// and takes back (results): 64-byte aligned host memory on the CPU backend,
// the runtime's managed memory (ddprt_alloc) on CUDA, so that host code and
// the runtime address the same buffers. Process-wide, as the functions
// compiled code calls are; used from the one thread that runs the steps.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_MEMORY_H
#define DDPRT_HOST_MEMORY_H

#include "MemRef.h"

#include <cstddef>
#include <cstdint>

namespace stephost {

/// Whether buffers are the runtime's managed memory (the CUDA backend)
/// from now on; set when the job starts, before any allocation.
void useSharedBuffers(bool shared);

/// A buffer of at least `bytes` (64-byte aligned), reusing a freed one of
/// the same rounded size; null when out of memory.
void *allocateBuffer(size_t bytes);
/// Keeps the buffer for the next allocation of its size (memory from
/// hostAlignedAlloc's own path is freed).
void releaseBuffer(void *pointer);
/// Gives the cached buffers back (before the runtime that made them ends).
void releaseCachedBuffers();

// The memref allocation functions of code lowered with
// finalize-memref-to-llvm{use-generic-functions}.
void *hostAlloc(size_t bytes);
void *hostAlignedAlloc(size_t alignment, size_t bytes);
void hostFree(void *pointer);

/// MLIR's memrefCopy (CRunnerUtils): element-wise copy between two strided
/// memrefs of the same shape, passed as unranked descriptors.
void hostMemrefCopy(int64_t elementSize, UnrankedMemRef *source,
                    UnrankedMemRef *target);

} // namespace stephost

#endif // DDPRT_HOST_MEMORY_H
