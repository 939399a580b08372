//===- MlirRunnerSupport.cpp - run compiled steps under mlir-runner -------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A step lowered by ddp-lower-to-llvm calls the runtime's C ABI through
// `ddprt_current_context()` and allocates with the memref functions that
// finalize-memref-to-llvm's `use-generic-functions` names, which ddp-run and
// ddprt-step-runner define. Upstream's `mlir-runner` defines neither: load
// this library after libddprt.so,
//
//   mlir-runner step.llvm.mlir -e main -entry-point-result=void
//     -shared-libs=libmlir_runner_utils.so,libmlir_c_runner_utils.so,libddprt.so,libddprt-mlir-runner.so
//
// (one command line)
//
// and it starts a runtime context when it is loaded (the CPU backend; a
// job of one rank, or of every rank under mpirun), makes it current, and
// finalizes it when the process ends. Allocations are host memory.
//
//===----------------------------------------------------------------------===//

#include "ddprt/ddprt.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {
ddprt_context *context = nullptr;

__attribute__((constructor)) void startRuntime() {
  ddprt_options options;
  ddprt_default_options(&options);
  ddprt_status status = ddprt_init(&options, &context);
  if (status != DDPRT_OK) {
    std::fprintf(stderr,
                 "libddprt-mlir-runner: error: cannot start the runtime: "
                 "%s: %s\n",
                 ddprt_status_string(status), ddprt_last_error(context));
    std::exit(1);
  }
  ddprt_set_current_context(context);
}

/// A failed allocation ends the process with a message (ddprt_fail prints
/// it, there being no handler here) instead of returning null, which the
/// compiled code would write through.
void *orFail(void *pointer, size_t bytes) {
  if (pointer)
    return pointer;
  char message[96];
  std::snprintf(message, sizeof message,
                "cannot allocate %zu bytes (out of host memory)", bytes);
  ddprt_fail(context, "a buffer of the step", message);
  // Not exit(): its destructors would finalize the runtime in mid-step.
  std::fflush(nullptr);
  std::_Exit(1);
}

__attribute__((destructor)) void stopRuntime() {
  ddprt_set_current_context(nullptr);
  if (context)
    ddprt_finalize(context);
  context = nullptr;
}
} // namespace

extern "C" {
__attribute__((visibility("default"))) void *
_mlir_memref_to_llvm_alloc(size_t bytes) {
  return orFail(std::malloc(bytes ? bytes : 1), bytes);
}

__attribute__((visibility("default"))) void *
_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t bytes) {
  if (alignment < sizeof(void *))
    alignment = sizeof(void *);
  // aligned_alloc wants a multiple of the alignment.
  if (bytes > SIZE_MAX - alignment)
    return orFail(nullptr, bytes);
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return orFail(std::aligned_alloc(alignment, rounded ? rounded : alignment),
                bytes);
}

__attribute__((visibility("default"))) void
_mlir_memref_to_llvm_free(void *pointer) {
  std::free(pointer);
}
}
