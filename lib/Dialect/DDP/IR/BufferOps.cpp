//===- BufferOps.cpp - Verifiers of the ddp ops on buffers ----------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The buffer forms of the ddp ops (what bufferization makes of them) are
// checked against their tensor forms' rules: the same counts and inferred
// types (OpVerification.h), on contiguous memrefs of those types.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/IR/DDP.h"

#include "OpVerification.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::ddp;
using namespace mlir::ddp::detail;

bool mlir::ddp::isContiguousBuffer(MemRefType type) {
  if (type.getLayout().isIdentity())
    return true;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return false;
  // Innermost first: each stride must be the product of the sizes inside
  // it. A dimension of size 1 may have any stride.
  int64_t expected = 1;
  for (int64_t i = type.getRank() - 1; i >= 0; --i) {
    int64_t size = type.getDimSize(i);
    if (size == 1)
      continue;
    if (strides[i] != expected)
      return false;
    if (ShapedType::isDynamic(size))
      return i == 0 || llvm::all_of(type.getShape().take_front(i),
                                    [](int64_t d) { return d == 1; });
    expected *= size;
  }
  return true;
}

/// The tensor type a buffer stands for, so that the buffer ops reuse the
/// shape rules of the tensor ops.
static SmallVector<Type> asTensorTypes(TypeRange types) {
  SmallVector<Type> tensors;
  for (Type type : types) {
    auto memref = cast<MemRefType>(type);
    tensors.push_back(
        RankedTensorType::get(memref.getShape(), memref.getElementType()));
  }
  return tensors;
}

/// Checks that `outputs` have the shapes and element types of `expected`.
static LogicalResult verifyOutputs(Operation *op, ArrayRef<Type> expected,
                                   TypeRange outputs) {
  if (failed(verifySameCount(op, expected.size(), outputs.size(), "tensors",
                             "outputs")))
    return failure();
  for (auto [i, pair] : llvm::enumerate(llvm::zip(expected, outputs))) {
    auto want = cast<ShapedType>(std::get<0>(pair));
    auto got = cast<ShapedType>(std::get<1>(pair));
    if (want.getShape() != got.getShape() ||
        want.getElementType() != got.getElementType())
      return op->emitOpError() << "output #" << i << " has type " << got
                               << " but must hold a " << want;
  }
  return success();
}

LogicalResult BufferAllReduceOp::verify() {
  return verifyAllReduceInputs(*this, getBuffers().getTypes());
}

LogicalResult BufferAllReduceStartOp::verify() {
  if (failed(verifyAllReduceInputs(*this, getBuffers().getTypes())))
    return failure();
  ArrayRef<Type> carried = getRequest().getType().getTypes();
  if (TypeRange(carried) != getBuffers().getTypes())
    return emitOpError("request type must list the types of the buffers");
  return success();
}

LogicalResult BufferScaleOp::verify() {
  return verifyNonEmpty(*this, getBuffers().size());
}

LogicalResult BufferCastOp::verify() {
  return verifyPairs(*this, getInputs().getTypes(), getOutputs().getTypes(),
                     "outputs", [&](size_t i, ShapedType from, ShapedType to) {
                       return verifyCastKeepsShape(*this, "output", i, from,
                                                   to);
                     });
}

LogicalResult BufferAllGatherOp::verify() {
  auto check = [&](size_t i, ShapedType from, ShapedType to) -> LogicalResult {
    // Rank-major: a leading dimension of ranks, then the input's shape.
    bool matches =
        to.getElementType() == from.getElementType() &&
        to.getRank() == from.getRank() + 1 &&
        llvm::all_of(llvm::seq<int64_t>(0, from.getRank()), [&](int64_t d) {
          int64_t a = from.getDimSize(d);
          int64_t b = to.getDimSize(d + 1);
          return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
        });
    if (!matches)
      return emitOpError() << "output #" << i << " has type " << to
                           << " but gathering " << from
                           << " needs a leading dimension of ranks, then its "
                              "shape and element type";
    return success();
  };
  return verifyPairs(*this, getInputs().getTypes(), getOutputs().getTypes(),
                     "outputs", check);
}

LogicalResult BufferProjectOp::verify() {
  StringRef name = getOperationName();
  SmallVector<Type> matrices = asTensorTypes(getMatrices().getTypes());
  if (!getResiduals().empty() &&
      failed(checkResiduals(getLoc(), name, matrices,
                            asTensorTypes(getResiduals().getTypes()))))
    return failure();
  SmallVector<Type> expected;
  if (failed(inferProjection(getLoc(), name, matrices,
                             asTensorTypes(getFactors().getTypes()),
                             getTransposed(), expected)))
    return failure();
  return verifyOutputs(*this, expected, getOutputs().getTypes());
}

LogicalResult BufferOrthogonalizeOp::verify() {
  return verifyOrthogonalize(*this, getBuffers().size(),
                             getEpsilon().convertToDouble());
}

LogicalResult BufferReconstructOp::verify() {
  StringRef name = getOperationName();
  SmallVector<Type> expected;
  if (failed(inferReconstruction(getLoc(), name,
                                 asTensorTypes(getPs().getTypes()),
                                 asTensorTypes(getQs().getTypes()), expected)))
    return failure();
  if (failed(verifyOutputs(*this, expected, getOutputs().getTypes())))
    return failure();
  if (getMatrices().empty() && getResiduals().empty())
    return success();
  SmallVector<Type> matrices = asTensorTypes(getMatrices().getTypes());
  if (failed(checkResiduals(getLoc(), name, matrices,
                            asTensorTypes(getResiduals().getTypes()))))
    return failure();
  return verifyOutputs(*this, expected, getMatrices().getTypes());
}

LogicalResult
BufferStateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto state =
      symbolTable.lookupNearestSymbolFrom<StateOp>(*this, getStateAttr());
  if (!state)
    return emitOpError() << "'" << getState()
                         << "' does not name a 'ddp.state'";
  MemRefType buffer = getBuffer().getType();
  if (!buffer.getLayout().isIdentity())
    return emitOpError() << "a state's buffer has the identity layout, not "
                         << buffer.getLayout();
  Type stateType = state.getType();
  auto tensor = dyn_cast<RankedTensorType>(stateType);
  bool matches =
      tensor ? buffer.getShape() == tensor.getShape() &&
                   buffer.getElementType() == tensor.getElementType()
             : buffer.getRank() == 0 && buffer.getElementType() == stateType;
  if (!matches)
    return emitOpError() << "type " << buffer << " does not hold the state '"
                         << getState() << "' of type " << stateType;
  return success();
}

LogicalResult BufferCopyOp::verify() {
  if (failed(verifyNonEmpty(*this, getSources().size())))
    return failure();
  return verifyOutputs(*this, llvm::to_vector(getSources().getTypes()),
                       getDestinations().getTypes());
}
