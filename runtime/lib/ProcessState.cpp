//===- ProcessState.cpp - the current context and error handler -----------===//

#include "ProcessState.h"

#include "Context.h"

#include <cstdio>

namespace ddprt {

namespace {
ddprt_context *current = nullptr;
ddprt_error_handler errorHandler = nullptr;
void *errorHandlerData = nullptr;
} // namespace

void setCurrentContext(ddprt_context *context) { current = context; }

ddprt_context *currentContext() { return current; }

void forgetContext(ddprt_context *context) {
  if (current == context)
    current = nullptr;
}

void setErrorHandler(ddprt_error_handler handler, void *user) {
  errorHandler = handler;
  errorHandlerData = user;
}

void handleFailure(ddprt_context *context, ddprt_status status,
                   const char *where) {
  if (errorHandler) {
    errorHandler(context, status, where, errorHandlerData);
    return;
  }
  std::fprintf(stderr, "ddprt: %s: %s: %s\n", where ? where : "?",
               ddprt_status_string(status),
               context ? context->lastError.c_str() : "no runtime context");
}

} // namespace ddprt
