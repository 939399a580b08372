//===- ProcessState.cpp - the current context and error handler -----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Process-wide and thread-safe, as ddprt.h promises: the context is an
// atomic pointer (compiled code reads it on whatever thread runs a step;
// finalizing clears it only if it is still the context finalized), and the
// handler and its user pointer change together under a lock that is not
// held while the handler runs (it may stop the process, or set another
// handler).
//
//===----------------------------------------------------------------------===//

#include "ProcessState.h"

#include "Context.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace ddprt {

namespace {
std::atomic<ddprt_context *> current{nullptr};

std::mutex handlerMutex;
ddprt_error_handler errorHandler = nullptr;
void *errorHandlerData = nullptr;
} // namespace

void setCurrentContext(ddprt_context *context) { current.store(context); }

ddprt_context *currentContext() { return current.load(); }

void forgetContext(ddprt_context *context) {
  current.compare_exchange_strong(context, nullptr);
}

void setErrorHandler(ddprt_error_handler handler, void *user) {
  std::lock_guard<std::mutex> lock(handlerMutex);
  errorHandler = handler;
  errorHandlerData = user;
}

void handleFailure(ddprt_context *context, ddprt_status status,
                   const char *where) {
  ddprt_error_handler handler;
  void *user;
  {
    std::lock_guard<std::mutex> lock(handlerMutex);
    handler = errorHandler;
    user = errorHandlerData;
  }
  if (handler) {
    handler(context, status, where, user);
    return;
  }
  std::fprintf(stderr, "ddprt: %s: %s: %s\n", where ? where : "?",
               ddprt_status_string(status),
               context ? context->lastError.c_str() : "no runtime context");
}

} // namespace ddprt
