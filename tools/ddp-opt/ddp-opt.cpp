//===- ddp-opt.cpp - the ddp compiler driver ------------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// An MlirOptMain tool with the ddp dialect, its passes and pipelines, and the
// upstream dialects a training step is written in.
//
//===----------------------------------------------------------------------===//

#include "ddp/InitAll.h"
#include "ddp/TestPasses.h"
#include "ddp/Version.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::ddp::setVersionPrinter("ddp-opt");
  mlir::DialectRegistry registry;
  mlir::ddp::registerAllDialects(registry);
  mlir::ddp::registerAllPasses();
  mlir::ddp::test::registerTestPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "ddp-opt: gradient communication compiler\n", registry));
}
