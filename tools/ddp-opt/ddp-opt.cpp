//===- ddp-opt.cpp - the ddp compiler driver ------------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// An MlirOptMain tool with the ddp dialect, its passes and pipelines, and the
// upstream dialects a training step is written in. Pass plugins
// (--load-pass-plugin=lib.so) use the ddp code of this executable, which
// exports its symbols (CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#include "ddp/InitAll.h"
#include "ddp/TestPasses.h"
#include "ddp/Version.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

/// Loads the pass plugins that --load-pass-plugin names and takes the option
/// out of argv. MlirOptMain would load them while it parses the command line,
/// after it made a flag of every registered pass, so a plugin's passes would
/// be reachable through -p only; and it ignores a plugin it cannot load.
/// Loaded first, a plugin's passes are flags like ours, and a plugin that
/// does not load stops the tool with the loader's reason.
static LogicalResult loadPassPlugins(int &argc, char **argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    StringRef option = argv[i];
    if (option == "--") {
      while (i < argc)
        argv[kept++] = argv[i++];
      break;
    }
    if (!(option.consume_front("--") || option.consume_front("-")) ||
        !option.consume_front("load-pass-plugin") ||
        !(option.empty() || option.starts_with("="))) {
      argv[kept++] = argv[i];
      continue;
    }
    std::string path;
    if (option.consume_front("=")) {
      path = option.str();
    } else if (i + 1 < argc) {
      path = argv[++i];
    } else {
      llvm::errs() << "ddp-opt: --load-pass-plugin needs a file name\n";
      return failure();
    }
    llvm::Expected<PassPlugin> plugin = PassPlugin::load(path);
    if (!plugin) {
      llvm::errs() << "ddp-opt: --load-pass-plugin=" << path << ": "
                   << llvm::toString(plugin.takeError()) << "\n";
      return failure();
    }
    plugin->registerPassRegistryCallbacks();
  }
  argc = kept;
  argv[argc] = nullptr;
  return success();
}

/// The output printer verifies the module again before printing it, unless
/// told the module is verified; with --verify-each (the default) and the
/// input verified when parsed, the pass manager has just done so (at 100k
/// gradients, about 4 s of ddp-lower-to-llvm). Not when IR is printed
/// between passes, where a pass may have left IR that does not verify.
static void assumeOutputVerified(const MlirOptMainConfig &config) {
  auto options = llvm::cl::getRegisteredOptions();
  auto given = [&](StringRef name) {
    auto it = options.find(name);
    return it != options.end() && it->second->getNumOccurrences() > 0;
  };
  auto flag = options.find("mlir-print-assume-verified");
  if (flag == options.end() || flag->second->getNumOccurrences() > 0 ||
      !config.shouldVerifyPasses() || !config.shouldVerifyOnParsing())
    return;
  for (StringRef printing :
       {"mlir-print-ir-before", "mlir-print-ir-after",
        "mlir-print-ir-before-all", "mlir-print-ir-after-all",
        "mlir-print-ir-after-change", "mlir-print-ir-after-failure"})
    if (given(printing))
      return;
  if (auto *assume = dynamic_cast<llvm::cl::opt<bool> *>(flag->second))
    assume->setValue(true);
}

int main(int argc, char **argv) {
  mlir::ddp::setVersionPrinter("ddp-opt");
  mlir::DialectRegistry registry;
  mlir::ddp::registerAllDialects(registry);
  mlir::ddp::registerAllPasses();
  mlir::ddp::test::registerTestPasses();
  if (failed(loadPassPlugins(argc, argv)))
    return 1;
  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "ddp-opt: gradient communication compiler\n", registry);
  assumeOutputVerified(MlirOptMainConfig::createFromCLOptions());
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, input, output, registry));
}
