//===- HostFunctions.cpp - what compiled step code calls ------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "HostFunctions.h"

#include "Matmul.h"
#include "Memory.h"

#include "ddprt/ddprt.h"

#include <string_view>

namespace stephost {

namespace {

/// --sync-every-call: ddprt_check that first waits for the device.
void synchronizeAndCheck(ddprt_context *context, ddprt_status status,
                         const char *where) {
  if (status == DDPRT_OK)
    status = ddprt_synchronize(context);
  ddprt_check(context, status, where);
}

template <typename F> void *address(F *function) {
  return reinterpret_cast<void *>(function);
}

} // namespace

std::vector<HostFunction> hostFunctions(bool synchronizeEveryCall) {
  std::vector<HostFunction> functions = {
  // The runtime's entry points, as the lowering declares them.
#define DDPRT_HOST_FUNCTION(name) {#name, address(&name)},
      DDPRT_FOR_EACH_STEP_FUNCTION(DDPRT_HOST_FUNCTION)
#undef DDPRT_HOST_FUNCTION
          {"_mlir_memref_to_llvm_alloc", address(&hostAlloc)},
      {"_mlir_memref_to_llvm_aligned_alloc", address(&hostAlignedAlloc)},
      {"_mlir_memref_to_llvm_free", address(&hostFree)},
      // memref.copy of strided views.
      {"memrefCopy", address(&hostMemrefCopy)},
      // The step's f32 contractions.
      {"ddprt_step_matmul_f32", address(&hostMatmulF32)},
  };
  if (synchronizeEveryCall)
    for (HostFunction &function : functions)
      if (std::string_view(function.name) == "ddprt_check")
        function.address = address(&synchronizeAndCheck);
  return functions;
}

bool isHostFunction(std::string_view name) {
  for (const HostFunction &function : hostFunctions())
    if (name == function.name)
      return true;
  return false;
}

} // namespace stephost
