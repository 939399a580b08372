//===- DDPCAPI.cpp - C API of the ddp compiler ----------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp-c/DDP.h"
#include "ddp-c/Dialects.h"

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/InitAll.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {
char *copyOut(const std::string &text) {
  char *result = static_cast<char *>(std::malloc(text.size() + 1));
  if (result)
    std::memcpy(result, text.c_str(), text.size() + 1);
  return result;
}
} // namespace

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(DDP, ddp, mlir::ddp::DDPDialect)

extern "C" {

void ddpRegisterAll(void) {
  static std::once_flag once;
  std::call_once(once, [] { mlir::ddp::registerAllPasses(); });
}

void ddpRegisterAllPasses(void) { ddpRegisterAll(); }

void ddpRegisterAllDialects(MlirDialectRegistry registry) {
  mlir::ddp::registerAllDialects(*unwrap(registry));
}

void ddpContextSetCompressionReportCallback(MlirContext context,
                                            MlirStringCallback callback,
                                            void *userData) {
  auto *dialect = unwrap(context)->getOrLoadDialect<mlir::ddp::DDPDialect>();
  if (!dialect)
    return;
  if (!callback) {
    dialect->setReportHandler(nullptr);
    return;
  }
  dialect->setReportHandler([callback, userData](llvm::StringRef text) {
    callback(wrap(text), userData);
  });
}

int ddpRunPipeline(const char *pipeline, const char *module, char **output,
                   char **diagnostics) {
  return ddpRunPipelineWithReport(pipeline, module, output, diagnostics,
                                  nullptr);
}

int ddpRunPipelineWithReport(const char *pipeline, const char *module,
                             char **output, char **diagnostics, char **report) {
  std::string printed, messages, reports;
  auto finish = [&](int ok) {
    if (output)
      *output = copyOut(printed);
    if (diagnostics)
      *diagnostics = copyOut(messages);
    if (report)
      *report = copyOut(reports);
    return ok;
  };
  if (!pipeline || !module)
    return messages = "ddpRunPipeline: the pipeline and the module must not "
                      "be NULL",
           finish(0);
  ddpRegisterAll();

  mlir::DialectRegistry registry;
  mlir::ddp::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  // The compression report comes back to the caller, never to stderr.
  context.getOrLoadDialect<mlir::ddp::DDPDialect>()->setReportHandler(
      [&](llvm::StringRef text) { reports += text.str(); });
  llvm::raw_string_ostream messageStream(messages);
  mlir::ScopedDiagnosticHandler handler(
      &context, [&](mlir::Diagnostic &diagnostic) {
        messageStream << diagnostic.getLocation() << ": ";
        switch (diagnostic.getSeverity()) {
        case mlir::DiagnosticSeverity::Error:
          messageStream << "error: ";
          break;
        case mlir::DiagnosticSeverity::Warning:
          messageStream << "warning: ";
          break;
        case mlir::DiagnosticSeverity::Remark:
          messageStream << "remark: ";
          break;
        case mlir::DiagnosticSeverity::Note:
          messageStream << "note: ";
          break;
        }
        messageStream << diagnostic << "\n";
        return mlir::success();
      });

  mlir::OwningOpRef<mlir::ModuleOp> parsed =
      mlir::parseSourceString<mlir::ModuleOp>(module, &context, "input");
  if (!parsed)
    return finish(0);
  // The pipeline names its anchor ("builtin.module(...)"); the pass manager
  // takes it over.
  std::string pipelineErrors;
  llvm::raw_string_ostream pipelineStream(pipelineErrors);
  mlir::FailureOr<mlir::OpPassManager> passes =
      mlir::parsePassPipeline(pipeline, pipelineStream);
  if (mlir::failed(passes)) {
    messageStream << "invalid pass pipeline '" << pipeline
                  << "': " << pipelineErrors << "\n";
    return finish(0);
  }
  mlir::PassManager pm(&context, passes->getOpAnchorName());
  static_cast<mlir::OpPassManager &>(pm) = std::move(*passes);
  if (mlir::failed(pm.run(*parsed)))
    return finish(0);
  llvm::raw_string_ostream printStream(printed);
  parsed->print(printStream);
  return finish(1);
}

void ddpFree(char *text) { std::free(text); }

} // extern "C"
