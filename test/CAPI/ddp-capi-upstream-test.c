/* A host of upstream MLIR's C API that loads ddp: the registry from
 *
 * Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
 * See LICENSE for license information.
 * SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
   ddpRegisterAllDialects, a module with ddp ops parsed and printed, the
   compression pipeline and the report through the C API's pass manager
   (the report comes back through a callback; nothing goes to stderr), then
   the lowering to the LLVM dialect. */
#include "ddp-c/Dialects.h"

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include <stdio.h>
#include <string.h>

static void print(MlirStringRef text, void *userData) {
  fwrite(text.data, 1, text.length, (FILE *)userData);
}

static void prefixed(MlirStringRef text, void *userData) {
  printf("%s%.*s", (const char *)userData, (int)text.length, text.data);
}

static char pipelineError[] = "pipeline error: ";
static char reportPrefix[] = "report: ";

static int run(MlirContext context, MlirModule module, const char *pipeline) {
  MlirPassManager pm = mlirPassManagerCreateOnOperation(
      context, mlirStringRefCreateFromCString("builtin.module"));
  MlirLogicalResult parsed = mlirParsePassPipeline(
      mlirPassManagerGetAsOpPassManager(pm),
      mlirStringRefCreateFromCString(pipeline), prefixed,
      pipelineError);
  int ok = mlirLogicalResultIsSuccess(parsed) &&
           mlirLogicalResultIsSuccess(
               mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module)));
  mlirPassManagerDestroy(pm);
  printf("%s: %s\n", pipeline, ok ? "ok" : "failed");
  return ok;
}

int main(void) {
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  ddpRegisterAllDialects(registry);
  MlirContext context = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  MlirStringRef name = mlirDialectHandleGetNamespace(mlirGetDialectHandle__ddp__());
  printf("dialect: %.*s\n", (int)name.length, name.data);
  ddpRegisterAllPasses();
  ddpContextSetCompressionReportCallback(context, prefixed, reportPrefix);

  MlirModule module = mlirModuleCreateParse(
      context,
      mlirStringRefCreateFromCString(
          "func.func @step(%w: tensor<64x32xf32> loc(\"fc.weight\"), "
          "%b: tensor<64xf32> loc(\"fc.bias\")) -> (tensor<64x32xf32>, "
          "tensor<64xf32>) {\n"
          "  %0 = ddp.allreduce mean %w : tensor<64x32xf32>\n"
          "  %1 = ddp.allreduce mean %b : tensor<64xf32>\n"
          "  return %0, %1 : tensor<64x32xf32>, tensor<64xf32>\n"
          "}\n"));
  if (mlirModuleIsNull(module)) {
    printf("parse failed\n");
    return 1;
  }
  int ok = run(context, module,
               "builtin.module(ddp-compress{powersgd-rank=2 start-iter=0},"
               "ddp-compression-report)");
  mlirOperationPrint(mlirModuleGetOperation(module), print, stdout);
  printf("\n");
  ok = ok && run(context, module, "builtin.module(ddp-lower-to-llvm)");
  mlirOperationPrint(mlirModuleGetOperation(module), print, stdout);
  printf("\n");
  ok = ok && !run(context, module, "builtin.module(no-such-pass)");
  mlirModuleDestroy(module);
  mlirContextDestroy(context);
  return ok ? 0 : 1;
}
