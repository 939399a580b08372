/*===- DDP.h - C API of the ddp compiler ------------------------*- C -*-===*\
 *
 * Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
 * See LICENSE for license information.
 * SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
 *
 * For hosts that are not C++ (Python through ctypes, Rust, Go, ...): run a
 * pass pipeline over a module given as text and get the result or the
 * diagnostics, as text.
 *
 *   char *output = NULL, *diagnostics = NULL, *report = NULL;
 *   int ok = ddpRunPipelineWithReport("builtin.module(insert-powersgd{rank=2},"
 *                           "ddp-compression-report)",
 *                           moduleText, &output, &diagnostics, &report);
 *   ...
 *   ddpFree(output);
 *   ddpFree(diagnostics);
 *   ddpFree(report);
 *
 * Hosts of upstream's C API use ddp-c/Dialects.h instead.
 *
\*===----------------------------------------------------------------------===*/

#ifndef DDP_C_DDP_H
#define DDP_C_DDP_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* Registers the ddp passes and pipelines (and the upstream transformation
   passes) by name, once per process; ddpRunPipeline calls it itself. */
void ddpRegisterAll(void);

/* Parses `module` (MLIR text), runs `pipeline` (textual pass pipeline, e.g.
   "builtin.module(ddp-compress{powersgd-rank=2},ddp-compression-report)")
   and returns 1 with the printed result in *output, or 0 with the error in
   *diagnostics. Remarks and warnings go to *diagnostics in either case, and
   the table of every ddp-compression-report without an `output` option to
   *report: nothing is written to the process's stdout or stderr, with one
   exception: a pass option's value that LLVM's option parser cannot read
   (rank=two) is described by that parser on stderr, and *diagnostics says
   which pass's option value was invalid. An unknown option's message names
   the nearest valid one. Each of
   the three pointers may be NULL; those given are set (possibly to an empty
   string) and must be freed with ddpFree. Thread-safe: every call has its
   own MLIRContext. */
int ddpRunPipelineWithReport(const char *pipeline, const char *module,
                             char **output, char **diagnostics,
                             char **report);

/* ddpRunPipelineWithReport without the report (it is dropped, not
   printed). */
int ddpRunPipeline(const char *pipeline, const char *module, char **output,
                   char **diagnostics);

/* Compiles a training step for the runtime, as `ddp-run --emit-step=DIR`
   does: parses `module` (MLIR text), runs `pipeline` on it (NULL or "":
   none; e.g. "builtin.module(ddp-compress{powersgd-rank=2})"), lowers the
   function `entry` (NULL or "": the module's only public function that
   synchronizes gradients) and writes `directory`/libstep.so and
   `directory`/step.json (created if missing), which the runtime's
   ddprt_step_load (ddprt-host/ddprt_step.h) loads into a process that
   has a runtime context. Returns 1, or 0 with the error in *diagnostics;
   the pipeline's compression reports go to *report. Both may be NULL;
   those given are set and must be freed with ddpFree. Thread-safe as
   ddpRunPipelineWithReport is. */
int ddpCompileStep(const char *pipeline, const char *module, const char *entry,
                   const char *directory, char **diagnostics, char **report);

/* Frees a string returned by this API (NULL is fine). */
void ddpFree(char *text);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* DDP_C_DDP_H */
