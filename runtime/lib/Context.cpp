//===- Context.cpp - starting and ending a ddprt_context ------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "Context.h"

#include "Options.h"
#include "ProcessState.h"
#include "State.h"
#include "Status.h"
#include "Validation.h"

namespace ddprt {

Error initContext(ddprt_context &context, const ddprt_options *options) {
  DDPRT_TRY(readOptions(options, context.options));
  DDPRT_TRY(readSimulatedLinkVariable(context.options));
  DDPRT_TRY(readRanksPerNodeVariable(context.options));
  const ddprt_options &opts = context.options;
  DDPRT_TRY(checkOptions(opts));
  DDPRT_TRY(guarded(
      [&] { return Communicator::create(opts, context.communicator); }));
#if defined(DDPRT_HAVE_CUDA)
  if (opts.backend == DDPRT_BACKEND_CUDA)
    return guarded([&] {
      return createCudaBackend(*context.communicator, opts, context.backend);
    });
#endif
  context.backend = createCpuBackend(*context.communicator);
  return Error::success();
}

ddprt_status report(ddprt_context *context, const Error &error) {
  if (context)
    context->lastError = error ? error.message : std::string();
  return error.status;
}

void destroyContext(ddprt_context *context) {
  // Freeing device memory waits for the device: first let the backend
  // drain it, within the timeout.
  if (context->backend)
    context->backend->shutdown();
  for (ddprt_request *request : context->requests)
    delete request;
  context->requests.clear();
  releaseStates(*context);
  forgetContext(context);
  context->backend.reset();
  context->communicator.reset();
  delete context;
}

double worldScale(const ddprt_context &context, ddprt_world_scale factor) {
  int world = context.communicator->size();
  switch (factor) {
  case DDPRT_SCALE_NONE:
    return 1.0;
  case DDPRT_SCALE_INVERSE_WORLD_SIZE:
    return 1.0 / world;
  case DDPRT_SCALE_WORLD_SIZE:
    return double(world);
  case DDPRT_SCALE_INVERSE_NODE_COUNT:
    return 1.0 / context.communicator->nodeCount();
  case DDPRT_SCALE_NODE_COUNT:
    return double(context.communicator->nodeCount());
  }
  return 0.0;
}

} // namespace ddprt
