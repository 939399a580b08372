//===- HostFunctions.cpp - what compiled step code calls ------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "HostFunctions.h"

#include "Matmul.h"
#include "Memory.h"

#include "ddprt/ddprt.h"

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
  return {
      {"ddprt_current_context", address(&ddprt_current_context)},
      {"ddprt_check", synchronizeEveryCall ? address(&synchronizeAndCheck)
                                           : address(&ddprt_check)},
      {"ddprt_fail", address(&ddprt_fail)},
      {"ddprt_report_nonfinite", address(&ddprt_report_nonfinite)},
      {"ddprt_host_barrier", address(&ddprt_host_barrier)},
      {"ddprt_allreduce", address(&ddprt_allreduce)},
      {"ddprt_allreduce_start", address(&ddprt_allreduce_start)},
      {"ddprt_wait", address(&ddprt_wait)},
      {"ddprt_scale", address(&ddprt_scale)},
      {"ddprt_cast", address(&ddprt_cast)},
      {"ddprt_copy", address(&ddprt_copy)},
      {"ddprt_project", address(&ddprt_project)},
      {"ddprt_backproject", address(&ddprt_backproject)},
      {"ddprt_orthogonalize", address(&ddprt_orthogonalize)},
      {"ddprt_reconstruct", address(&ddprt_reconstruct)},
      {"ddprt_random_normal", address(&ddprt_random_normal)},
      {"ddprt_top_k", address(&ddprt_top_k)},
      {"ddprt_count_uncompressed", address(&ddprt_count_uncompressed)},
      {"ddprt_state_get", address(&ddprt_state_get)},
      {"ddprt_state_data", address(&ddprt_state_data)},
      {"_mlir_memref_to_llvm_alloc", address(&hostAlloc)},
      {"_mlir_memref_to_llvm_aligned_alloc", address(&hostAlignedAlloc)},
      {"_mlir_memref_to_llvm_free", address(&hostFree)},
      // memref.copy of strided views.
      {"memrefCopy", address(&hostMemrefCopy)},
      // The step's f32 contractions.
      {"ddprt_step_matmul_f32", address(&hostMatmulF32)},
  };
}

bool isHostFunction(std::string_view name) {
  for (const HostFunction &function : hostFunctions())
    if (name == function.name)
      return true;
  return false;
}

} // namespace stephost
