//===- OpVerification.h - Checks the ddp ops' verifiers share ---*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Private to the dialect's IR library: the checks and type inferences that
// the tensor ops (DDPOps.cpp) and their buffer forms (BufferOps.cpp) both
// use, so that an op and its buffer form refuse the same input with the
// same message.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_LIB_DIALECT_DDP_IR_OPVERIFICATION_H
#define DDP_LIB_DIALECT_DDP_IR_OPVERIFICATION_H

#include "mlir/IR/BuiltinTypeInterfaces.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

#include <optional>

namespace mlir::ddp::detail {

/// Checks that two operand groups of a multi-tensor op pair up one to one.
LogicalResult verifySameCount(Operation *op, size_t lhs, size_t rhs,
                              StringRef lhsName, StringRef rhsName);
/// Checks that a multi-tensor op has at least one tensor.
LogicalResult verifyNonEmpty(Operation *op, size_t count);
/// Checks an op whose outputs pair up one to one with its inputs: at least
/// one input, as many `outputsName` as inputs, and `check` on each pair (its
/// index, the input's type, the output's type).
LogicalResult
verifyPairs(Operation *op, TypeRange inputs, TypeRange outputs,
            StringRef outputsName,
            function_ref<LogicalResult(size_t, ShapedType, ShapedType)> check);
/// A cast's check of one pair: the shape is kept ("<noun> #i has type ...").
LogicalResult verifyCastKeepsShape(Operation *op, StringRef noun, size_t i,
                                   ShapedType from, ShapedType to);
/// An allreduce's inputs: at least one, each with a countable size.
LogicalResult verifyAllReduceInputs(Operation *op, TypeRange inputs);

/// An orthogonalization of `count` tensors: at least one, and an epsilon
/// that is finite and non-negative.
LogicalResult verifyOrthogonalize(Operation *op, size_t count, double epsilon);
/// PowerSGD's projections: P_i = M_i Q_i (transposeMatrix = false) or
/// Q_i = M_i^T P_i (true); the inferred types go to `results`.
LogicalResult inferProjection(std::optional<Location> loc, StringRef opName,
                              TypeRange matrices, TypeRange factors,
                              bool transposeMatrix,
                              SmallVectorImpl<Type> &results);
/// Checks that the residuals have the matrices' types.
LogicalResult checkResiduals(std::optional<Location> loc, StringRef opName,
                             TypeRange matrices, TypeRange residuals);
/// PowerSGD's reconstruction M_hat_i = P_i Q_i^T.
LogicalResult inferReconstruction(std::optional<Location> loc, StringRef opName,
                                  TypeRange ps, TypeRange qs,
                                  SmallVectorImpl<Type> &results);

} // namespace mlir::ddp::detail

#endif // DDP_LIB_DIALECT_DDP_IR_OPVERIFICATION_H
