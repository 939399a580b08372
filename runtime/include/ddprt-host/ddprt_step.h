/*===- ddprt_step.h - run a compiled step from any language ------*- C -*-===*\
 *
 * Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
 * See LICENSE for license information.
 * SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
 *
 * A step compiled ahead of time (`ddp-run --emit-step=DIR`, or
 * ddpCompileStep of the compiler's C API: DIR/step.json and the library it
 * names), loaded into a process that already has a runtime context (a
 * framework's training loop, through ctypes), and run on the caller's
 * memory:
 *
 *   ddprt_step *step = NULL;
 *   char message[1024];
 *   if (ddprt_step_load("DIR", &step, message, sizeof message) != DDPRT_OK)
 *     ... message says why ...
 *   void *arguments[] = {grad0, grad1};   // contiguous, row-major
 *   void *results[] = {grad0, grad1};     // may be the arguments
 *   ddprt_step_run(step, context, arguments, results, message,
 *                  sizeof message);
 *
 * The shapes and element types are step.json's: the caller's buffers must
 * hold them (the library's signature is the caller's contract; the loader
 * checks only the counts). Steps with dynamic sizes are not loaded.
 *
\*===----------------------------------------------------------------------===*/

#ifndef DDPRT_STEP_H
#define DDPRT_STEP_H

#include "ddprt/ddprt.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

typedef struct ddprt_step ddprt_step;

/* Loads DIR/step.json and its library, binding the functions compiled code
   calls. On failure *step is NULL and `message` (NUL-terminated, cut at
   `message_size`; may be NULL) says why. The library stays loaded until
   the process ends; ddprt_step_free frees the rest. */
ddprt_status ddprt_step_load(const char *directory, ddprt_step **step,
                             char *message, size_t message_size);
/* Frees the step, and the buffers it keeps for the context it last ran on
   (on CUDA, the managed copies of its arguments): call it, or
   ddprt_step_release_buffers, before ddprt_finalize of that context. */
void ddprt_step_free(ddprt_step *step);
/* Frees those buffers and keeps the step: the next run allocates them
   again (on the context it runs on). */
void ddprt_step_release_buffers(ddprt_step *step);

/* The step's arguments and results (step.json). */
int ddprt_step_argument_count(const ddprt_step *step);
int ddprt_step_result_count(const ddprt_step *step);

/* Runs the step once on `context` (made current for the call; the one it
   was before is restored): arguments[i] is argument i's data, results[j]
   where result j is copied to (it may be an argument's data: results are
   copied after the step has read every argument). The arguments are the
   step's to overwrite (a compiled step averages a gradient in its own
   buffer, and computes result j into argument j's buffer where it can):
   when results[j] is arguments[j], nothing is copied. A runtime call that
   fails inside the step makes this return its status, with the op, its
   source location and the runtime's message in `message`; the results are
   then not written. Not reentrant: one step runs at a time in a
   process (compiled code reports failures to one process-wide handler).
   On the CUDA backend the buffers are device memory, read and written on
   the runtime's stream (the caller's, if ddprt_options.stream gave one):
   what the caller enqueued on another stream must be complete before the
   call (wait for an event recorded after it); when the call returns, the
   results are in the caller's buffers. */
ddprt_status ddprt_step_run(ddprt_step *step, ddprt_context *context,
                            void *const *arguments, void *const *results,
                            char *message, size_t message_size);

/* Sets the threads of `context`'s compute (BLAS, ddprt_set_compute_threads)
   and of compiled steps' parallel loops (OpenMP); threads <= 0: what
   ddp-run uses, the cores this process may run on divided by the ranks on
   its node (Open MPI's, MPICH's or PMI's local size; else the world size),
   less one for the communication thread. Returns the number set. */
int ddprt_step_set_threads(ddprt_context *context, int threads);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* DDPRT_STEP_H */
