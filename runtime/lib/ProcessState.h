//===- ProcessState.h - the current context and error handler ---*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Code lowered from the ddp dialect takes no context argument: it calls
// ddprt_current_context() and reports failures through ddprt_check to the
// host's error handler. Both are kept per process, not per context or per
// thread, and are safe to set and read from any thread (ddprt.h says why).
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_PROCESSSTATE_H
#define DDPRT_PROCESSSTATE_H

#include "ddprt/ddprt.h"

namespace ddprt {

void setCurrentContext(ddprt_context *context);
ddprt_context *currentContext();
/// Clears the current context if it is `context` (being finalized).
void forgetContext(ddprt_context *context);

void setErrorHandler(ddprt_error_handler handler, void *user);
/// ddprt_check of a failure: the handler, or a line on stderr without one.
void handleFailure(ddprt_context *context, ddprt_status status,
                   const char *where);

} // namespace ddprt

#endif // DDPRT_PROCESSSTATE_H
