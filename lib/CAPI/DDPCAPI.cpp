//===- DDPCAPI.cpp - C API of the ddp compiler ----------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp-c/DDP.h"
#include "ddp-c/Dialects.h"

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/InitAll.h"
#include "ddp/Target/StepCompiler.h"

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
#include <optional>
#include <string>

namespace {
char *copyOut(const std::string &text) {
  char *result = static_cast<char *>(std::malloc(text.size() + 1));
  if (result)
    std::memcpy(result, text.c_str(), text.size() + 1);
  return result;
}

/// Sets each out-parameter that was given (a copy to free with ddpFree)
/// and returns `ok`.
int finishCall(int ok, const std::string &messages, char **diagnostics,
               const std::string &reports, char **report,
               const std::string &printed, char **output = nullptr) {
  if (output)
    *output = copyOut(printed);
  if (diagnostics)
    *diagnostics = copyOut(messages);
  if (report)
    *report = copyOut(reports);
  return ok;
}

/// One call's compilation: its diagnostics and compression reports
/// collected as text (nothing goes to stdout or stderr), a module parsed
/// and a textual pipeline run on it.
struct Compilation {
  explicit Compilation(mlir::MLIRContext &context)
      : context(context), messageStream(messages),
        handler(&context, [this](mlir::Diagnostic &diagnostic) {
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
        }) {
    ddpRegisterAll();
    // The compression report comes back to the caller, never to stderr.
    context.getOrLoadDialect<mlir::ddp::DDPDialect>()->setReportHandler(
        [this](llvm::StringRef text) { reports += text.str(); });
  }

  /// The parsed module after `pipeline` ("" runs nothing), or null.
  mlir::OwningOpRef<mlir::ModuleOp> parseAndRun(const char *pipeline,
                                                const char *module) {
    mlir::OwningOpRef<mlir::ModuleOp> parsed =
        mlir::parseSourceString<mlir::ModuleOp>(module, &context, "input");
    if (!parsed || !*pipeline)
      return parsed;
    // The pipeline names its anchor ("builtin.module(...)"); the pass
    // manager takes it over.
    std::string pipelineErrors;
    llvm::raw_string_ostream pipelineStream(pipelineErrors);
    mlir::FailureOr<mlir::OpPassManager> passes =
        mlir::parsePassPipeline(pipeline, pipelineStream);
    if (mlir::failed(passes)) {
      messageStream << "invalid pass pipeline '" << pipeline
                    << "': " << pipelineErrors << "\n";
      return nullptr;
    }
    mlir::PassManager pm(&context, passes->getOpAnchorName());
    static_cast<mlir::OpPassManager &>(pm) = std::move(*passes);
    if (mlir::failed(pm.run(*parsed)))
      return nullptr;
    return parsed;
  }

  mlir::MLIRContext &context;
  std::string messages, reports;
  llvm::raw_string_ostream messageStream;
  mlir::ScopedDiagnosticHandler handler;
};
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
  if (!pipeline || !module)
    return finishCall(0,
                      "ddpRunPipeline: the pipeline and the module must "
                      "not be NULL",
                      diagnostics, "", report, "", output);
  mlir::DialectRegistry registry;
  mlir::ddp::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  Compilation compilation(context);
  mlir::OwningOpRef<mlir::ModuleOp> parsed =
      compilation.parseAndRun(pipeline, module);
  std::string printed;
  if (parsed) {
    llvm::raw_string_ostream printStream(printed);
    parsed->print(printStream);
  }
  return finishCall(parsed ? 1 : 0, compilation.messages, diagnostics,
                    compilation.reports, report, printed, output);
}

int ddpCompileStep(const char *pipeline, const char *module, const char *entry,
                   const char *directory, char **diagnostics, char **report) {
  if (!module || !directory || !*directory)
    return finishCall(0,
                      "ddpCompileStep: the module and the directory must "
                      "not be NULL or empty",
                      diagnostics, "", report, "");
  mlir::MLIRContext context(mlir::ddp::makeStepCompilerRegistry());
  context.loadAllAvailableDialects();
  Compilation compilation(context);
  mlir::OwningOpRef<mlir::ModuleOp> parsed =
      compilation.parseAndRun(pipeline ? pipeline : "", module);
  if (!parsed)
    return finishCall(0, compilation.messages, diagnostics, compilation.reports,
                      report, "");
  auto fail = [&](llvm::Error error) {
    llvm::handleAllErrors(std::move(error), [&](const llvm::ErrorInfoBase &e) {
      compilation.messages += "error: " + e.message() + "\n";
    });
    return finishCall(0, compilation.messages, diagnostics, compilation.reports,
                      report, "");
  };
  std::optional<llvm::StringRef> chosen;
  if (entry && *entry)
    chosen = llvm::StringRef(entry);
  llvm::Expected<stephost::StepSignature> signature =
      mlir::ddp::readStepSignature(*parsed, chosen);
  if (!signature)
    return fail(signature.takeError());
  mlir::ddp::StepLibraryOptions options;
  options.directory = directory;
  options.moduleName = "the module";
  if (llvm::Error error =
          mlir::ddp::compileStepLibrary(*parsed, *signature, options))
    return fail(std::move(error));
  return finishCall(1, compilation.messages, diagnostics, compilation.reports,
                    report, "");
}

void ddpFree(char *text) { std::free(text); }

} // extern "C"
