// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A check that LeakSanitizer works in scripts/sanitize.sh's settings before
// the suites rely on it. Built twice: with -DLSAN_PROBE_LIBRARY as a shared
// library whose thread_local variables live in dynamic TLS (as libddprt.so's
// and Open MPI's do), and without as a program that dlopens it.
//   lsan-probe LIBRARY         must exit 0: nothing leaks
//   lsan-probe LIBRARY leak    must fail with LeakSanitizer's report
// GCC 12's sanitizer runtime (Debian 12) can misread a dynamic TLS block
// whose address is 16 bytes past a page as a glibc 2.19 header and crash in
// its tracer at exit; intercept_tls_get_addr=0 avoids that. This probe
// lands on such an address every time, so it fails if the option is lost.
#ifdef LSAN_PROBE_LIBRARY
#include <cstdlib>
#include <string>

thread_local std::string text;
thread_local void *block;

extern "C" void lsanProbeTouchTls() {
  text.assign(300, 'x');
  block = std::malloc(1000);
}
#else
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

void *lostBlock;

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: lsan-probe LIBRARY [leak]\n");
    return 2;
  }
  void *library = dlopen(argv[1], RTLD_NOW);
  if (!library) {
    std::fprintf(stderr, "lsan-probe: %s\n", dlerror());
    return 2;
  }
  auto touch =
      reinterpret_cast<void (*)()>(dlsym(library, "lsanProbeTouchTls"));
  if (!touch) {
    std::fprintf(stderr, "lsan-probe: %s\n", dlerror());
    return 2;
  }
  touch();
  if (argc > 2 && std::strcmp(argv[2], "leak") == 0) {
    lostBlock = std::malloc(77);
    lostBlock = nullptr;
  }
  return 0;
}
#endif
