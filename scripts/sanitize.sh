#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# AddressSanitizer + UndefinedBehaviorSanitizer builds, kept clean: any
# report fails the run (UBSan halts on the first error, LSan reports leaks
# outside MPI's own; see scripts/lsan.supp).
#   scripts/sanitize.sh          the runtime alone (cmake -S runtime): its C
#                                ABI, CPU backend, kernels, .npy reader and
#                                step host, with the GoogleTest suites on 1
#                                and 4 MPI ranks (a few minutes; CI runs it)
#   scripts/sanitize.sh --all    also the compiler and tools (ddp-opt,
#                                ddp-run, ...) in build-sanitize/, and the
#                                whole lit suite with them (a full build,
#                                then about 5 minutes of tests on 2 cores;
#                                memory errors and UB, not leaks: see below;
#                                3 tests are unsupported under ASan)
#   scripts/sanitize.sh --tsan   ThreadSanitizer instead, the runtime alone
#                                (its communication thread against the
#                                caller; Open MPI's own locking suppressed,
#                                see scripts/tsan.supp)
# Set SANITIZE_DIR to change where the builds go (default build-sanitize*).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# intercept_tls_get_addr=0: GCC 12's runtime can take a dynamic TLS block
# (thread_local in a shared library) for a glibc 2.19 one and crash
# LeakSanitizer's tracer at exit; the probe below checks both that this
# cannot happen and that leaks are still found.
export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:abort_on_error=0:intercept_tls_get_addr=0"
export LSAN_OPTIONS="suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# OpenMPI unloads its components at exit, which leaves their frames nameless.
export OMPI_MCA_mca_base_component_disable_dlclose=1

sanitized_cmake() {
  local source=$1 build=$2
  shift 2
  if [ ! -f "$build/build.ninja" ]; then
    cmake -G Ninja -S "$source" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      "-DCMAKE_C_FLAGS=$FLAGS" "-DCMAKE_CXX_FLAGS=$FLAGS" \
      "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" \
      "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined" "$@" >/dev/null
  fi
}

if [ "${1:-}" = "--tsan" ]; then
  TSAN_DIR="${SANITIZE_DIR:-build-sanitize}-tsan-runtime"
  echo "== TSan: the runtime ($TSAN_DIR)"
  export TSAN_OPTIONS="suppressions=$ROOT/scripts/tsan.supp:halt_on_error=0:report_signal_unsafe=0"
  if [ ! -f "$TSAN_DIR/build.ninja" ]; then
    cmake -G Ninja -S runtime -B "$TSAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      "-DCMAKE_C_FLAGS=-fsanitize=thread" "-DCMAKE_CXX_FLAGS=-fsanitize=thread" \
      "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread" \
      "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread" -DDDPRT_ENABLE_CUDA=OFF \
      -DDDPRT_BUILD_BENCHMARKS=OFF >/dev/null
  fi
  cmake --build "$TSAN_DIR"
  (cd "$TSAN_DIR" && ctest --output-on-failure)
  echo "== TSan: clean"
  exit 0
fi

RT_DIR="${SANITIZE_DIR:-build-sanitize}-runtime"
echo "== LeakSanitizer: probe (scripts/lsan-probe.cpp)"
PROBE_DIR="$RT_DIR/lsan-probe"
mkdir -p "$PROBE_DIR"
${CXX:-c++} -g -fsanitize=address -fPIC -shared -DLSAN_PROBE_LIBRARY \
  scripts/lsan-probe.cpp -o "$PROBE_DIR/libprobe.so"
${CXX:-c++} -g -fsanitize=address scripts/lsan-probe.cpp -o "$PROBE_DIR/lsan-probe" -ldl
if ! "$PROBE_DIR/lsan-probe" "$PROBE_DIR/libprobe.so" >"$PROBE_DIR/clean.log" 2>&1; then
  cat "$PROBE_DIR/clean.log" >&2
  echo "sanitize.sh: LeakSanitizer fails on a program with no leak (above); its reports cannot be trusted here" >&2
  exit 1
fi
if "$PROBE_DIR/lsan-probe" "$PROBE_DIR/libprobe.so" leak >"$PROBE_DIR/leak.log" 2>&1 ||
  ! grep -q "Direct leak of 77 byte" "$PROBE_DIR/leak.log"; then
  cat "$PROBE_DIR/leak.log" >&2
  echo "sanitize.sh: LeakSanitizer misses a leak of 77 bytes (above)" >&2
  exit 1
fi
echo "== ASan+UBSan: the runtime ($RT_DIR)"
# The CUDA backend is left out: nvcc's device code is not instrumented and
# there is no GPU here to run it.
sanitized_cmake runtime "$RT_DIR" -DDDPRT_ENABLE_CUDA=OFF
cmake --build "$RT_DIR"
# DDPRT_SANITIZED: the calibration tests check only the simulated link's
# floors here (runtime/test/check_calibrate.py).
(cd "$RT_DIR" && DDPRT_SANITIZED=1 ctest --output-on-failure)

if [ "${1:-}" = "--all" ]; then
  ALL_DIR="${SANITIZE_DIR:-build-sanitize}"
  # Fast unwinding on malloc here: the slow unwinder calls libgcc's
  # _Unwind_Find_FDE, which allocates under its own lock, and the JIT
  # registering its EH frames (ExecutionEngine) then deadlocks in it. Leaks
  # are not checked in this half: every ddp-run process ends with about
  # 117 KB in 3,350 blocks still held by Open MPI and the JIT, which fast
  # unwinding cannot attribute (the runtime half above checks ours).
  # Tests that cap the address space (RLIMIT_AS) cannot run under ASan,
  # which reserves terabytes of shadow memory: DDP_SANITIZED marks them
  # unsupported (lit feature "asan").
  export ASAN_OPTIONS="detect_leaks=0:fast_unwind_on_malloc=1:abort_on_error=0"
  export DDP_SANITIZED=1
  echo "== ASan+UBSan: the compiler, tools and lit suite ($ALL_DIR)"
  sanitized_cmake . "$ALL_DIR" -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit -DDDPRT_ENABLE_CUDA=OFF
  cmake --build "$ALL_DIR" --target check-ddp
fi
echo "== sanitizers: clean"
