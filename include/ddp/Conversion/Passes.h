//===- Passes.h - conversions into and out of ddp ---------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDP_CONVERSION_PASSES_H
#define DDP_CONVERSION_PASSES_H

#include "ddp/Conversion/ShardToDDP/ShardToDDP.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ddp {

#define GEN_PASS_DECL
#include "ddp/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ddp/Conversion/Passes.h.inc"

} // namespace mlir::ddp

#endif // DDP_CONVERSION_PASSES_H
