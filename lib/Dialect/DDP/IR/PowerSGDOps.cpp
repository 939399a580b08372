//===- PowerSGDOps.cpp - PowerSGD's ops: shapes and verifiers -------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The multi-tensor PowerSGD ops (ddp.add_residual, ddp.project,
// ddp.backproject, ddp.orthogonalize, ddp.reconstruct and their fused forms
// with the residual) infer their result types from their operands' matrix
// shapes; their buffer forms (BufferOps.cpp) check against the same
// inference (OpVerification.h).
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/IR/DDP.h"

#include "OpVerification.h"

#include "mlir/IR/BuiltinTypes.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ddp;
using namespace mlir::ddp::detail;

/// At least one `lhs` tensor, and each `rhs` of its `lhs`'s type.
static LogicalResult verifyTypesEqual(Operation *op, TypeRange lhs,
                                      TypeRange rhs, StringRef lhsName,
                                      StringRef rhsName) {
  if (failed(verifyNonEmpty(op, lhs.size())) ||
      failed(verifySameCount(op, lhs.size(), rhs.size(), lhsName, rhsName)))
    return failure();
  for (auto [i, types] : llvm::enumerate(llvm::zip(lhs, rhs)))
    if (std::get<0>(types) != std::get<1>(types))
      return op->emitOpError()
             << rhsName << " #" << i << " has type " << std::get<1>(types)
             << " but must have the type of " << lhsName << " #" << i << ", "
             << std::get<0>(types);
  return success();
}

/// The result types of an op whose results have its inputs' types.
static LogicalResult inputTypes(ValueRange inputs,
                                SmallVectorImpl<Type> &results) {
  llvm::append_range(results, inputs.getTypes());
  return success();
}

//===----------------------------------------------------------------------===//
// Matrix shape inference for the PowerSGD ops
//===----------------------------------------------------------------------===//

namespace {
/// One tensor of a multi-tensor PowerSGD op, as a 2-D float matrix.
struct Matrix {
  int64_t rows, cols;
  Type elementType;
};
} // namespace

static Matrix asMatrix(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return {tensor.getDimSize(0), tensor.getDimSize(1), tensor.getElementType()};
}

static RankedTensorType matrixType(int64_t rows, int64_t cols, Type element) {
  return RankedTensorType::get({rows, cols}, element);
}

/// The operand groups of the PowerSGD ops are only guaranteed to be 2-D
/// static float tensors after the ODS constraints ran; inference also runs
/// while parsing, before them, so it checks what it relies on.
static LogicalResult checkMatrices(std::optional<Location> loc,
                                   StringRef opName, TypeRange types) {
  for (Type type : types) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || tensor.getRank() != 2 || !tensor.hasStaticShape() ||
        !isComputeElementType(tensor.getElementType()))
      return emitOptionalError(
          loc, "'", opName, "' op expects statically shaped 2-D tensors of ",
          computeElementTypeNames(type.getContext()), ", got ", type);
  }
  return success();
}

static LogicalResult checkPairs(std::optional<Location> loc, StringRef opName,
                                TypeRange lhs, TypeRange rhs, StringRef lhsName,
                                StringRef rhsName) {
  if (failed(checkMatrices(loc, opName, lhs)) ||
      failed(checkMatrices(loc, opName, rhs)))
    return failure();
  if (lhs.empty())
    return emitOptionalError(loc, "'", opName,
                             "' op needs at least one tensor");
  if (lhs.size() != rhs.size())
    return emitOptionalError(loc, "'", opName, "' op has ", lhs.size(), " ",
                             lhsName, " but ", rhs.size(), " ", rhsName,
                             "; each tensor needs one of each");
  return success();
}

static LogicalResult checkElementTypes(std::optional<Location> loc,
                                       StringRef opName, unsigned index,
                                       Matrix a, Matrix b) {
  if (a.elementType == b.elementType)
    return success();
  return emitOptionalError(loc, "'", opName, "' op tensor #", index,
                           " mixes element types ", a.elementType, " and ",
                           b.elementType);
}

/// P_i = M_i Q_i (transposeMatrix = false) or Q_i = M_i^T P_i (true).
LogicalResult mlir::ddp::detail::inferProjection(
    std::optional<Location> loc, StringRef opName, TypeRange matrices,
    TypeRange factors, bool transposeMatrix, SmallVectorImpl<Type> &results) {
  if (failed(checkPairs(loc, opName, matrices, factors, "matrices", "factors")))
    return failure();
  for (auto [i, pair] : llvm::enumerate(llvm::zip(matrices, factors))) {
    Matrix m = asMatrix(std::get<0>(pair));
    Matrix f = asMatrix(std::get<1>(pair));
    if (failed(checkElementTypes(loc, opName, i, m, f)))
      return failure();
    int64_t inner = transposeMatrix ? m.rows : m.cols;
    int64_t outer = transposeMatrix ? m.cols : m.rows;
    if (f.rows != inner)
      return emitOptionalError(loc, "'", opName, "' op tensor #", i,
                               ": factor has ", f.rows, " rows but the matrix",
                               transposeMatrix ? " (transposed)" : "", " has ",
                               inner, " columns");
    results.push_back(matrixType(outer, f.cols, m.elementType));
  }
  return success();
}

/// Checks that the residuals have the matrices' types.
LogicalResult mlir::ddp::detail::checkResiduals(std::optional<Location> loc,
                                                StringRef opName,
                                                TypeRange matrices,
                                                TypeRange residuals) {
  if (failed(checkPairs(loc, opName, matrices, residuals, "matrices",
                        "residuals")))
    return failure();
  for (auto [i, pair] : llvm::enumerate(llvm::zip(matrices, residuals)))
    if (std::get<0>(pair) != std::get<1>(pair))
      return emitOptionalError(loc, "'", opName, "' op residual #", i,
                               " has type ", std::get<1>(pair),
                               " but its matrix has type ", std::get<0>(pair));
  return success();
}

/// M_hat_i = P_i Q_i^T.
LogicalResult mlir::ddp::detail::inferReconstruction(
    std::optional<Location> loc, StringRef opName, TypeRange ps, TypeRange qs,
    SmallVectorImpl<Type> &results) {
  if (failed(checkPairs(loc, opName, ps, qs, "P factors", "Q factors")))
    return failure();
  for (auto [i, pair] : llvm::enumerate(llvm::zip(ps, qs))) {
    Matrix p = asMatrix(std::get<0>(pair));
    Matrix q = asMatrix(std::get<1>(pair));
    if (failed(checkElementTypes(loc, opName, i, p, q)))
      return failure();
    if (p.cols != q.cols)
      return emitOptionalError(loc, "'", opName, "' op tensor #", i,
                               ": P has rank ", p.cols, " but Q has rank ",
                               q.cols);
    results.push_back(matrixType(p.rows, q.rows, p.elementType));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// PowerSGD ops
//===----------------------------------------------------------------------===//

/// The verifier of an op whose result types are inferred from its operands:
/// the inference's own checks, with its one precise message. (Without it,
/// InferTypeOpInterface's verifier runs the same inference and adds "failed
/// to infer returned types" after that message.)
template <typename OpT> static LogicalResult verifyByInference(OpT op) {
  SmallVector<Type> expected;
  return OpT::inferReturnTypes(op->getContext(), op.getLoc(),
                               typename OpT::Adaptor(op), expected);
}

LogicalResult AddResidualOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location>,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  return inputTypes(adaptor.getInputs(), results);
}

LogicalResult AddResidualOp::verify() {
  return verifyTypesEqual(*this, getInputs().getTypes(),
                          getResiduals().getTypes(), "input", "residual");
}

/// A projection's types, as inferred, and its scheme: fp16 and bf16 name
/// a narrowing cast's compression, never a projection's.
template <typename OpTy> static LogicalResult verifyProjection(OpTy op) {
  if (failed(verifyByInference(op)))
    return failure();
  CompressionAttr scheme = op.getSchemeAttr();
  if (scheme && getNarrowingSchemeType(op.getContext(), scheme.getScheme()))
    return op.emitOpError() << "scheme " << scheme
                            << " names a narrowing cast's compression, not "
                               "a projection's";
  return success();
}

LogicalResult ProjectOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  return inferProjection(loc, getOperationName(), adaptor.getMatrices(),
                         adaptor.getFactors(), /*transposeMatrix=*/false,
                         results);
}

LogicalResult ProjectOp::verify() { return verifyProjection(*this); }

LogicalResult BackprojectOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  return inferProjection(loc, getOperationName(), adaptor.getMatrices(),
                         adaptor.getFactors(), /*transposeMatrix=*/true,
                         results);
}

LogicalResult BackprojectOp::verify() { return verifyProjection(*this); }

LogicalResult
OrthogonalizeOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  return inputTypes(adaptor.getInputs(), results);
}

LogicalResult mlir::ddp::detail::verifyOrthogonalize(Operation *op,
                                                     size_t count,
                                                     double epsilon) {
  if (failed(verifyNonEmpty(op, count)))
    return failure();
  if (!(epsilon >= 0.0) || std::isinf(epsilon))
    return op->emitOpError()
           << "epsilon must be finite and non-negative, got " << epsilon;
  return success();
}

LogicalResult OrthogonalizeOp::verify() {
  return verifyOrthogonalize(*this, getInputs().size(),
                             getEpsilon().convertToDouble());
}

LogicalResult ReconstructOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  return inferReconstruction(loc, getOperationName(), adaptor.getPs(),
                             adaptor.getQs(), results);
}

LogicalResult ReconstructOp::verify() { return verifyByInference(*this); }

LogicalResult
UpdateResidualOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                   Adaptor adaptor,
                                   SmallVectorImpl<Type> &results) {
  return inputTypes(adaptor.getInputs(), results);
}

LogicalResult UpdateResidualOp::verify() {
  return verifyTypesEqual(*this, getInputs().getTypes(),
                          getReconstructions().getTypes(), "input",
                          "reconstruction");
}

LogicalResult
ProjectResidualOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                    Adaptor adaptor,
                                    SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  if (failed(checkResiduals(loc, name, adaptor.getMatrices(),
                            adaptor.getResiduals())))
    return failure();
  return inferProjection(loc, name, adaptor.getMatrices(), adaptor.getFactors(),
                         /*transposeMatrix=*/false, results);
}

LogicalResult ProjectResidualOp::verify() { return verifyProjection(*this); }

LogicalResult BackprojectResidualOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  if (failed(checkResiduals(loc, name, adaptor.getMatrices(),
                            adaptor.getResiduals())))
    return failure();
  return inferProjection(loc, name, adaptor.getMatrices(), adaptor.getFactors(),
                         /*transposeMatrix=*/true, results);
}

LogicalResult BackprojectResidualOp::verify() {
  return verifyProjection(*this);
}

LogicalResult ReconstructResidualOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  if (failed(checkResiduals(loc, name, adaptor.getMatrices(),
                            adaptor.getResiduals())))
    return failure();
  SmallVector<Type> reconstructions;
  if (failed(inferReconstruction(loc, name, adaptor.getPs(), adaptor.getQs(),
                                 reconstructions)))
    return failure();
  if (reconstructions.size() != adaptor.getMatrices().size())
    return emitOptionalError(loc, "'", name, "' op has ",
                             reconstructions.size(), " factor pairs but ",
                             adaptor.getMatrices().size(), " matrices");
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(reconstructions, adaptor.getMatrices())))
    if (std::get<0>(pair) != std::get<1>(pair).getType())
      return emitOptionalError(loc, "'", name, "' op tensor #", i,
                               ": P * Q^T has type ", std::get<0>(pair),
                               " but the matrix has type ",
                               std::get<1>(pair).getType());
  results.append(reconstructions);
  results.append(reconstructions);
  return success();
}

LogicalResult ReconstructResidualOp::verify() {
  return verifyByInference(*this);
}
