/* A C host of the ddp compiler: runs a pipeline through the C API, then an
 *
 * Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
 * See LICENSE for license information.
 * SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
   invalid module and an invalid pipeline, and prints what comes back. */
#include "ddp-c/DDP.h"

#include <stdio.h>

static const char *kModule =
    "func.func @step(%w: tensor<64x32xf32>) -> tensor<64x32xf32> {\n"
    "  %0 = ddp.allreduce mean %w : tensor<64x32xf32>\n"
    "  return %0 : tensor<64x32xf32>\n"
    "}\n";

static int run(const char *pipeline, const char *module) {
  char *output = NULL, *diagnostics = NULL, *report = NULL;
  int ok = ddpRunPipelineWithReport(pipeline, module, &output, &diagnostics,
                                    &report);
  printf("ok=%d\n--- output\n%s\n--- diagnostics\n%s\n--- report\n%s\n", ok,
         output, diagnostics, report);
  ddpFree(output);
  ddpFree(diagnostics);
  ddpFree(report);
  return ok;
}

int main(void) {
  int good = run("builtin.module(insert-powersgd{rank=2 start-iter=0},"
                 "ddp-compression-report)",
                 kModule);
  int badModule = run("builtin.module(insert-powersgd)", "func.func @f(");
  int badPipeline = run("builtin.module(insert-powersgd{rank=0})", kModule);
  int unknownPass = run("builtin.module(no-such-pass)", kModule);
  /* Unknown options of a pipeline and of a pass: the cause comes back. */
  int unknownPipelineOption =
      run("builtin.module(ddp-compress{rnak=2})", kModule);
  int unknownPassOption =
      run("builtin.module(insert-powersgd{matrix-aproximation-rank=2})",
          kModule);
  /* PyTorch's names work through the C API too. */
  int pytorchNames =
      run("builtin.module(ddp-compress{matrix-approximation-rank=2 "
          "start-powersgd-iter=0})",
          kModule);
  /* The function without the report: the report is dropped, not printed. */
  char *output = NULL, *diagnostics = NULL;
  int legacy = ddpRunPipeline("builtin.module(insert-powersgd{rank=2 "
                              "start-iter=0},ddp-compression-report)",
                              kModule, &output, &diagnostics);
  printf("legacy ok=%d\n", legacy);
  ddpFree(output);
  ddpFree(diagnostics);
  return good && !badModule && !badPipeline && !unknownPass &&
                 !unknownPipelineOption && !unknownPassOption &&
                 pytorchNames && legacy
             ? 0
             : 1;
}
