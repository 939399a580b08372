//===- HostFunctions.h - what compiled step code calls ----------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The functions a step compiled from the ddp dialect calls by name, and what
// a host binds them to. The compiled step is called through its packed entry
// `_mlir_<entry>` (MLIR's ExecutionEngine convention): one pointer per
// flattened argument word (each memref descriptor's words, MemRef.h), then
// one pointer to the storage of the returned descriptors.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_HOSTFUNCTIONS_H
#define DDPRT_HOST_HOSTFUNCTIONS_H

#include <string>
#include <string_view>
#include <vector>

namespace stephost {

/// The prefix of the slots through which an ahead-of-time compiled step
/// calls the host functions.
inline constexpr const char *kHostSlotPrefix = "__ddp_host_";

struct HostFunction {
  const char *name;
  void *address;
};

/// Every function compiled step code calls by name, and what it is bound
/// to: the runtime's C ABI; the memref allocation functions
/// (`_mlir_memref_to_llvm_alloc`, `_aligned_alloc`, `_free`: 64-byte
/// aligned host memory on the CPU backend, ddprt_alloc's managed memory on
/// CUDA, so the host code and the runtime share the buffers); `memrefCopy`
/// (strided copies). On CUDA, runtime calls are enqueued: compiled code
/// calls ddprt_host_barrier before host code touches memory after them
/// (ddp-insert-host-barriers places the calls). `synchronizeEveryCall`
/// binds a ddprt_check that waits for the device after every runtime call
/// instead, as steps did before the barriers: for measuring what they save.
std::vector<HostFunction> hostFunctions(bool synchronizeEveryCall = false);
/// Whether compiled code's calls of `name` go to the host (by the list
/// above, independent of the backend).
bool isHostFunction(std::string_view name);

/// The packed entry `_mlir_<entry>(void **)`.
using PackedFunction = void (*)(void **);

struct StepSignature;

/// Loads the library of a step compiled ahead of time (`directory`/
/// `signature.library`, unless that is absolute), fills each slot
/// `__ddp_host_<name>` of the host functions it calls (with
/// hostFunctions(synchronizeEveryCall)) and returns its packed entry. On
/// failure returns null with every problem found in `errors`, one line
/// each. The library stays loaded until the process ends.
PackedFunction loadStepLibrary(const std::string &directory,
                               const StepSignature &signature,
                               bool synchronizeEveryCall,
                               std::vector<std::string> &errors);

} // namespace stephost

#endif // DDPRT_HOST_HOSTFUNCTIONS_H
