//===- ddp-test-huge-pages.cpp - is tcmalloc's memory in huge pages? ------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Linked as ddp-opt is (ddp_link_allocator): allocates many small objects,
// as a lowering does, checks that they hold what was written, and prints
// whether the process's anonymous memory has huge pages
// (/proc/self/smaps_rollup) and the tcmalloc system allocator in use.
// With an argument, it first asks malloc for that many bytes, without
// touching them, and prints whether they were given: memory the kernel
// would not commit must be refused, not reserved and then lost to the OOM
// killer once touched.
//
//===----------------------------------------------------------------------===//

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char **argv) {
  if (argc > 1) {
    size_t bytes = std::strtoull(argv[1], nullptr, 10);
    void *memory = std::malloc(bytes);
    std::printf("%zu bytes: %s\n", bytes, memory ? "given" : "refused");
    std::free(memory);
  }
  // 96 MiB in 64-byte objects.
  constexpr size_t kObjects = (size_t(96) << 20) / 64;
  std::vector<char *> objects(kObjects);
  for (size_t i = 0; i < kObjects; ++i) {
    objects[i] = static_cast<char *>(std::malloc(64));
    std::memset(objects[i], int(i & 0x7f), 64);
  }
  size_t wrong = 0;
  for (size_t i = 0; i < kObjects; ++i)
    wrong += objects[i][63] != char(i & 0x7f);

  long hugeKiB = -1;
  if (FILE *rollup = std::fopen("/proc/self/smaps_rollup", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, rollup))
      if (std::sscanf(line, "AnonHugePages: %ld kB", &hugeKiB) == 1)
        break;
    std::fclose(rollup);
  }
  for (char *object : objects)
    std::free(object);
  std::printf("objects: %zu, wrong: %zu\n", kObjects, wrong);
  std::printf("huge pages: %s\n", hugeKiB < 0     ? "unknown"
                                  : hugeKiB >= 2048 ? "yes"
                                                    : "no");
  return wrong == 0 ? 0 : 1;
}
