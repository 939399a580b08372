//===- HostFunctions.cpp - what compiled step code calls ------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "HostFunctions.h"

#include "Matmul.h"
#include "Memory.h"
#include "StepSignature.h"

#include "ddprt/ddprt.h"

#include <dlfcn.h>
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

PackedFunction loadStepLibrary(const std::string &directory,
                               const StepSignature &signature,
                               bool synchronizeEveryCall,
                               std::vector<std::string> &errors) {
  std::string path = signature.library.front() == '/'
                         ? signature.library
                         : directory + "/" + signature.library;
  void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *why = dlerror();
    errors.push_back("cannot load '" + path + "': " + (why ? why : "?"));
    return nullptr;
  }
  size_t before = errors.size();
  std::vector<HostFunction> functions = hostFunctions(synchronizeEveryCall);
  for (const std::string &name : signature.hostFunctions) {
    const HostFunction *function = nullptr;
    for (const HostFunction &f : functions)
      if (name == f.name)
        function = &f;
    if (!function) {
      errors.push_back("the step calls '" + name +
                       "', which this host does not provide (a step "
                       "emitted by a newer ddp-run?)");
      continue;
    }
    std::string slotName = std::string(kHostSlotPrefix) + name;
    void **slot = static_cast<void **>(dlsym(library, slotName.c_str()));
    if (!slot) {
      errors.push_back("'" + path + "' has no '" + slotName +
                       "' (not what ddp-run --emit-step wrote for step.json)");
      continue;
    }
    *slot = function->address;
  }
  std::string entryName = "_mlir_" + signature.entry;
  void *entry = dlsym(library, entryName.c_str());
  if (!entry)
    errors.push_back("'" + path + "' has no packed entry '" + entryName + "'");
  return errors.size() == before ? reinterpret_cast<PackedFunction>(entry)
                                 : nullptr;
}

bool isHostFunction(std::string_view name) {
  for (const HostFunction &function : hostFunctions())
    if (name == function.name)
      return true;
  return false;
}

} // namespace stephost
