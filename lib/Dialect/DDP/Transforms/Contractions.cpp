//===- Contractions.cpp - the matmuls the runtime's BLAS computes ---------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Dialect/DDP/Transforms/Contractions.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::ddp;

std::optional<BlasContraction>
mlir::ddp::matchBlasContraction(linalg::LinalgOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return std::nullopt;
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<ShapedType>(operand.get().getType());
    if (!type || !type.getElementType().isF32())
      return std::nullopt;
  }
  if (!linalg::isaContractionOpInterface(op))
    return std::nullopt;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || dims->m.size() != 1 || dims->n.size() != 1 ||
      dims->k.size() != 1 || dims->batch.size() > 1 ||
      op.getNumLoops() != 3 + dims->batch.size())
    return std::nullopt;
  BlasContraction result{std::nullopt, dims->m[0], dims->n[0], dims->k[0]};
  if (!dims->batch.empty())
    result.batch = dims->batch[0];
  return result;
}
