/*===- Dialects.h - the ddp dialect in upstream's C API ---------*- C -*-===*\
 *
 * Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
 * See LICENSE for license information.
 * SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
 *
 * For hosts of upstream MLIR's C API (mlir-c/IR.h, mlir-c/Pass.h): the ddp
 * dialect's handle, one call that registers what the pipelines need, the
 * passes and pipelines by name, and the compression report delivered to the
 * caller:
 *
 *   MlirDialectRegistry registry = mlirDialectRegistryCreate();
 *   ddpRegisterAllDialects(registry);
 *   MlirContext context = mlirContextCreateWithRegistry(registry, false);
 *   ddpRegisterAllPasses();
 *   ddpContextSetCompressionReportCallback(context, onReport, userData);
 *   ... mlirParsePassPipeline(pm, "builtin.module(ddp-compress{...})", ...)
 *
 * libDDPCAPI.so links libMLIR.so; upstream's C API must come from a library
 * built for the same libMLIR.so (Debian's LLVM 22 ships it as static
 * archives, libMLIRCAPIIR.a and per-dialect ones: link those by path, then
 * libDDPCAPI.so, libMLIR.so and libLLVM.so; test/CMakeLists.txt does). A
 * Python-bindings build includes these sources in its aggregate C API
 * library instead (add_mlir_python_common_capi_library).
 *
\*===----------------------------------------------------------------------===*/

#ifndef DDP_C_DIALECTS_H
#define DDP_C_DIALECTS_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mlirGetDialectHandle__ddp__(): the ddp dialect alone (its bufferization
   models come with ddpRegisterAllDialects). */
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(DDP, ddp);

/* Inserts into `registry` the ddp dialect, the upstream dialects a training
   step is written in (func, arith, math, scf, cf, tensor, linalg, memref,
   bufferization, ml_program, shard, llvm, ub) and every interface model the
   pipelines need (bufferization of all of them): mlir::ddp::
   registerAllDialects. */
MLIR_CAPI_EXPORTED void ddpRegisterAllDialects(MlirDialectRegistry registry);

/* Registers the ddp passes and pipelines (ddp-compress, ddp-lower-to-llvm,
   insert-powersgd, ...) and upstream's transformation passes by name, for
   mlirParsePassPipeline and mlirOpPassManagerAddPipeline. Once per process
   is enough; later calls do nothing. */
MLIR_CAPI_EXPORTED void ddpRegisterAllPasses(void);

/* `ddp-compression-report` without an `output` option, run in `context`,
   hands its table to `callback` (in pieces; `userData` passed through)
   instead of writing to stderr. A NULL callback restores stderr. The
   context must have the ddp dialect registered; it is loaded if it is not. */
MLIR_CAPI_EXPORTED void
ddpContextSetCompressionReportCallback(MlirContext context,
                                       MlirStringCallback callback,
                                       void *userData);

#ifdef __cplusplus
}
#endif

#endif /* DDP_C_DIALECTS_H */
