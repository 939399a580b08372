/* Compresses a gradient-synchronization module through ddp-opt's C API:
 * the pipeline a training stack's own compiler would run, from C.
 *
 * Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
 * See LICENSE for license information.
 * SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
 *
 *   compress "PIPELINE" < step.mlir > compressed.mlir
 *
 * The compression report and any error come back as strings: nothing is
 * printed to stderr by the library. */
#include "ddp-c/DDP.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: compress PIPELINE < step.mlir > out.mlir\n");
    return 2;
  }
  /* The module from stdin. */
  size_t size = 0, capacity = 1 << 16;
  char *module = malloc(capacity);
  if (!module)
    return 1;
  for (size_t n; (n = fread(module + size, 1, capacity - size - 1, stdin)) > 0;) {
    size += n;
    if (size + 1 == capacity) {
      char *larger = realloc(module, capacity *= 2);
      if (!larger) {
        free(module);
        fprintf(stderr, "compress: out of memory reading the module\n");
        return 1;
      }
      module = larger;
    }
  }
  module[size] = '\0';

  char *output = NULL, *diagnostics = NULL, *report = NULL;
  int ok = ddpRunPipelineWithReport(argv[1], module, &output, &diagnostics,
                                    &report);
  if (ok)
    fputs(output, stdout);
  fprintf(stderr, "%s%s", report, diagnostics);
  ddpFree(output);
  ddpFree(diagnostics);
  ddpFree(report);
  free(module);
  return ok ? 0 : 1;
}
