//===- DDP.h - ddp dialect --------------------------------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The ddp dialect: its ops, types, attributes and enums.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_IR_DDP_H
#define DDP_DIALECT_DDP_IR_DDP_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <functional>

#include "ddp/Dialect/DDP/IR/DDPEnums.h.inc"

// Before the dialect: its discardable attributes (ddp.planned) use them.
#define GET_ATTRDEF_CLASSES
#include "ddp/Dialect/DDP/IR/DDPAttrs.h.inc"

#include "ddp/Dialect/DDP/IR/DDPOpsDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "ddp/Dialect/DDP/IR/DDPOpsTypes.h.inc"

namespace mlir::ddp {
/// The side-effect resource of persistent `ddp.state` buffers.
struct StateResource : public SideEffects::Resource::Base<StateResource> {
  StringRef getName() final { return "ddp.state"; }
};

/// Whether `type` is laid out row-major without gaps (any offset): what the
/// runtime can take as a pointer and a size.
bool isContiguousBuffer(MemRefType type);
/// Whether the runtime computes with and communicates `type` (collectives,
/// compression kernels): its float types, from ddprt.h's list.
bool isComputeElementType(Type type);
/// Whether a ddp.state may hold `type`: the compute types, and the i64 of
/// step counters.
bool isStateElementType(Type type);
/// The compute element types, as a message lists them ("f32, f16, bf16 or
/// f64").
std::string computeElementTypeNames(MLIRContext *context);
/// The type the built-in narrowing compressions send ("fp16": f16, "bf16":
/// bf16: the `scheme` of their ddp.cast), or null for any other name.
FloatType getNarrowingSchemeType(MLIRContext *context, StringRef scheme);
/// The inverse: "fp16" for f16, "bf16" for bf16, "" for any other type.
StringRef getNarrowingSchemeName(FloatType type);
} // namespace mlir::ddp

namespace mlir::ddp::detail {
/// MultiTensorOpInterface's verifier: every operand group holds N values
/// (an optional one none) and the results are whole groups of N.
LogicalResult verifyMultiTensorOp(Operation *op);
} // namespace mlir::ddp::detail

#include "ddp/Dialect/DDP/IR/DDPInterfaces.h.inc"

#define GET_OP_CLASSES
#include "ddp/Dialect/DDP/IR/DDPOps.h.inc"

#endif // DDP_DIALECT_DDP_IR_DDP_H
