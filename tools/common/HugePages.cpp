//===- HugePages.cpp - tcmalloc's memory from transparent huge pages ------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Linked into the tools that use tcmalloc (ddp_link_allocator). Lowering a
// step with thousands of gradients touches hundreds of megabytes of fresh
// memory, one 4 KiB page fault at a time (130,000 faults at 10k gradients,
// each a VM exit on a virtual machine), and walks millions of small objects
// spread over as many pages (TLB misses). Where the kernel gives transparent
// huge pages on request (/sys/kernel/mm/transparent_hugepage/enabled:
// madvise or always), tcmalloc's memory is taken from 2 MiB-aligned regions
// marked MADV_HUGEPAGE instead: 50 times fewer faults, and 10% off the
// lowering (docs/performance.md). tcmalloc still returns freed memory with
// MADV_DONTNEED, as it does for its own mappings.
//
// DDP_HUGE_PAGES=0 in the environment keeps tcmalloc's own system
// allocator (1 or unset: huge pages; anything else is warned about).
//
//===----------------------------------------------------------------------===//

#include <gperftools/malloc_extension.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

namespace {

constexpr size_t kHugePage = size_t(2) << 20;
// Address space reserved at a time (pages are only backed once touched).
constexpr size_t kRegion = size_t(64) << 20;

size_t roundUp(size_t value, size_t to) { return (value + to - 1) / to * to; }

/// Hands tcmalloc's page heap consecutive pieces of huge-page regions. The
/// page heap calls it under its own lock, and never gives memory back
/// through it, so a bump pointer is all it needs; it must not allocate.
class HugePageAllocator : public SysAllocator {
public:
  explicit HugePageAllocator(SysAllocator *fallback) : fallback(fallback) {}

  void *Alloc(size_t size, size_t *actualSize, size_t alignment) override {
    if (size == 0 || size > (size_t(1) << 48))
      return fallback->Alloc(size, actualSize, alignment);
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    if (alignment < page)
      alignment = page;
    if (alignment > kHugePage || (alignment & (alignment - 1)) != 0)
      return fallback->Alloc(size, actualSize, alignment);
    size = roundUp(size, page);
    uintptr_t start = roundUp(next, alignment);
    if (next == 0 || start + size > end) {
      // A new region, of the request's size where that is larger.
      size_t length = roundUp(size > kRegion ? size : kRegion, kHugePage);
      char *region = map(length);
      if (!region)
        return fallback->Alloc(size, actualSize, alignment);
      next = uintptr_t(region);
      end = next + length;
      start = next;
    }
    next = start + size;
    if (actualSize)
      *actualSize = size;
    return reinterpret_cast<void *>(start);
  }

private:
  /// `length` bytes (a multiple of 2 MiB) at a 2 MiB boundary, marked for
  /// huge pages; null if the kernel would not commit them. The mapping is
  /// accounted as malloc's own are (no MAP_NORESERVE): a request the
  /// kernel's overcommit policy refuses (larger than memory and swap, say)
  /// fails here, and malloc returns null, instead of being reserved and
  /// then ending the process, or another, in the OOM killer once touched.
  static char *map(size_t length) {
    size_t reserved = length + kHugePage;
    void *raw = mmap(nullptr, reserved, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
      return nullptr;
    uintptr_t base = uintptr_t(raw);
    uintptr_t aligned = roundUp(base, kHugePage);
    // The unaligned head and tail go back.
    if (aligned > base)
      munmap(raw, aligned - base);
    if (uintptr_t tail = base + reserved - (aligned + length))
      munmap(reinterpret_cast<void *>(aligned + length), tail);
    // Without huge pages the memory is still good, in 4 KiB pages.
    (void)madvise(reinterpret_cast<void *>(aligned), length, MADV_HUGEPAGE);
    return reinterpret_cast<char *>(aligned);
  }

  SysAllocator *fallback;
  uintptr_t next = 0, end = 0;
};

struct Install {
  Install() {
    const char *setting = std::getenv("DDP_HUGE_PAGES");
    if (setting && std::strcmp(setting, "0") == 0)
      return;
    if (setting && std::strcmp(setting, "1") != 0)
      std::fprintf(stderr,
                   "warning: DDP_HUGE_PAGES='%s' is neither 0 nor 1; huge "
                   "pages stay on\n",
                   setting);
    MallocExtension *extension = MallocExtension::instance();
    SysAllocator *fallback = extension->GetSystemAllocator();
    if (!fallback)
      return;
    // Never freed: tcmalloc uses it until the process ends.
    static HugePageAllocator allocator(fallback);
    extension->SetSystemAllocator(&allocator);
  }
} install;

} // namespace
