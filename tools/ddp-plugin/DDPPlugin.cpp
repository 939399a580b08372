//===- DDPPlugin.cpp - ddp as an mlir-opt plugin --------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One shared library that upstream mlir-opt loads as both a dialect and a
// pass plugin:
//
//   mlir-opt --load-dialect-plugin=DDPPlugin.so \
//            --load-pass-plugin=DDPPlugin.so \
//            -p 'builtin.module(insert-powersgd{rank=2})' model.mlir
//
// It links against the same shared libMLIR.so as mlir-opt, so the dialect
// and passes share one MLIR with the host.
//
//===----------------------------------------------------------------------===//

#include "ddp/Conversion/DDPToLLVM/DDPToLLVM.h"
#include "ddp/Conversion/Passes.h"
#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/Transforms/BufferizableOpInterfaceImpl.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Pipelines/Pipelines.h"
#include "ddp/Transforms/Passes.h"

#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"

using namespace mlir;

extern "C" LLVM_ATTRIBUTE_WEAK DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "DDP", LLVM_VERSION_STRING,
          [](DialectRegistry *registry) {
            // The dialect, its bufferization models and its lowering for
            // convert-to-llvm (mlir-opt registers the upstream dialects'
            // own), so that one-shot-bufferize, convert-to-llvm and
            // ddp-lower-to-llvm work as they do in ddp-opt.
            registry->insert<ddp::DDPDialect>();
            ddp::registerBufferizableOpInterfaceExternalModels(*registry);
            ddp::registerConvertDDPToLLVMInterface(*registry);
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "DDPPasses", LLVM_VERSION_STRING, []() {
            ddp::registerDDPPasses();
            ddp::registerScaleTransformsPasses();
            ddp::registerDDPConversionPasses();
            ddp::registerPipelines();
          }};
}
