//===- State.cpp - persistent state owned by a context --------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "State.h"

#include <cstdlib>
#include <memory>
#include <string>

namespace ddprt {

Error getState(ddprt_context &context, const char *name, ddprt_dtype dtype,
               int64_t numel, ddprt_state **state) {
  auto found = context.states.find(name);
  if (found != context.states.end()) {
    ddprt_state &existing = *found->second;
    if (existing.dtype != dtype || existing.numel != numel)
      return fail(DDPRT_ERROR_MISMATCH,
                  std::string("state '") + name + "' exists with " +
                      std::to_string(existing.numel) + " elements of dtype " +
                      std::to_string(existing.dtype));
    *state = &existing;
    return Error::success();
  }
  auto created = std::make_unique<ddprt_state>();
  created->name = name;
  created->dtype = dtype;
  created->numel = numel;
  size_t bytes = size_t(numel) * ddprt_dtype_size(dtype);
  created->onHost = dtype == DDPRT_I64;
  if (created->onHost) {
    created->data = std::calloc(bytes == 0 ? 1 : bytes, 1);
    if (!created->data)
      return fail(DDPRT_ERROR_BACKEND,
                  std::string("state '") + name + "': out of host memory");
  } else {
    DDPRT_TRY(context.backend->allocateZeroed(bytes, &created->data));
  }
  *state = created.get();
  context.states[name] = std::move(created);
  return Error::success();
}

void releaseStates(ddprt_context &context) {
  for (auto &entry : context.states) {
    if (entry.second->onHost)
      std::free(entry.second->data);
    else
      context.backend->deallocate(entry.second->data);
  }
  context.states.clear();
}

} // namespace ddprt
