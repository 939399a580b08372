//===- InsertRuntimeChecks.cpp - run-time checks of a step's own code -----===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A user's code (a hook, a training step) that indexes out of bounds or
// divides by zero would otherwise kill every rank with SIGSEGV or SIGFPE,
// or read garbage silently. Upstream's RuntimeVerifiableOpInterface gives
// the index, slice and shape checks (what generate-runtime-verification
// inserts, with our one-line messages); integer division, which has no
// such model, is checked here.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/RuntimeVerifiableOpInterface.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPINSERTRUNTIMECHECKS
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// Whether `op` divides integers (and then whether signed).
std::optional<bool> integerDivision(Operation *op) {
  if (isa<arith::DivSIOp, arith::RemSIOp, arith::CeilDivSIOp,
          arith::FloorDivSIOp>(op))
    return true;
  if (isa<arith::DivUIOp, arith::RemUIOp, arith::CeilDivUIOp>(op))
    return false;
  return std::nullopt;
}

struct InsertRuntimeChecks
    : public ddp::impl::DDPInsertRuntimeChecksBase<InsertRuntimeChecks> {
  void runOnOperation() override {
    SmallVector<Operation *> checked;
    getOperation().walk([&](Operation *op) {
      if (isa<RuntimeVerifiableOpInterface, tensor::InsertSliceOp,
              tensor::EmptyOp, tensor::CastOp>(op) ||
          integerDivision(op))
        checked.push_back(op);
    });
    for (Operation *op : checked) {
      OpBuilder builder(op);
      if (auto insert = dyn_cast<tensor::InsertSliceOp>(op))
        checkInsertSlice(builder, insert);
      else if (auto cast = dyn_cast<tensor::CastOp>(op))
        checkCast(builder, cast);
      else if (auto empty = dyn_cast<tensor::EmptyOp>(op))
        checkSizes(builder, empty);
      else if (auto verifiable = dyn_cast<RuntimeVerifiableOpInterface>(op))
        verifiable.generateRuntimeVerification(
            builder, op->getLoc(), [](Operation *op, StringRef message) {
              return (op->getName().getStringRef() + ": " + message).str();
            });
      else
        checkDivision(builder, op, *integerDivision(op));
    }
    numChecked += checked.size();
    if (checked.empty())
      markAllAnalysesPreserved();
  }

  /// upstream has no model for tensor.insert_slice (in LLVM 22): the slice
  /// lies within the destination in every dimension (offset >= 0, size
  /// >= 0, and a non-empty slice's last index is below the size).
  static void checkInsertSlice(OpBuilder &builder, tensor::InsertSliceOp op) {
    Location loc = op.getLoc();
    auto index = [&](OpFoldResult value) {
      return getValueOrCreateConstantIndexOp(builder, loc, value);
    };
    auto constant = [&](int64_t value) -> Value {
      return arith::ConstantIndexOp::create(builder, loc, value);
    };
    using P = arith::CmpIPredicate;
    auto cmp = [&](P predicate, Value a, Value b) -> Value {
      return arith::CmpIOp::create(builder, loc, predicate, a, b);
    };
    Value zero = constant(0), one = constant(1);
    Value ok = arith::ConstantOp::create(builder, loc, builder.getBoolAttr(true));
    for (unsigned d = 0, e = op.getDestType().getRank(); d < e; ++d) {
      Value offset = index(op.getMixedOffsets()[d]);
      Value size = index(op.getMixedSizes()[d]);
      Value stride = index(op.getMixedStrides()[d]);
      Value extent = tensor::DimOp::create(builder, loc, op.getDest(), d);
      Value last = arith::AddIOp::create(
          builder, loc, offset,
          arith::MulIOp::create(builder, loc,
                                arith::SubIOp::create(builder, loc, size, one),
                                stride));
      Value inside = arith::AndIOp::create(
          builder, loc,
          arith::AndIOp::create(builder, loc, cmp(P::sge, offset, zero),
                                cmp(P::slt, offset, extent)),
          arith::AndIOp::create(builder, loc, cmp(P::sge, last, zero),
                                cmp(P::slt, last, extent)));
      Value empty = cmp(P::eq, size, zero);
      Value dimOk = arith::AndIOp::create(
          builder, loc, cmp(P::sge, size, zero),
          arith::OrIOp::create(builder, loc, empty, inside));
      ok = arith::AndIOp::create(builder, loc, ok, dimOk);
    }
    cf::AssertOp::create(builder, loc, ok,
                         "tensor.insert_slice: out-of-bounds slice");
  }

  /// A cast to a static size (a hook's bucket is cast to its size) holds
  /// a tensor of that size: the dynamic dimensions it makes static match.
  static void checkCast(OpBuilder &builder, tensor::CastOp op) {
    auto source = dyn_cast<RankedTensorType>(op.getSource().getType());
    auto result = dyn_cast<RankedTensorType>(op.getType());
    if (!source || !result)
      return;
    Location loc = op.getLoc();
    for (unsigned d = 0, e = source.getRank(); d < e; ++d) {
      if (!source.isDynamicDim(d) || result.isDynamicDim(d))
        continue;
      Value size = tensor::DimOp::create(builder, loc, op.getSource(), d);
      Value expected =
          arith::ConstantIndexOp::create(builder, loc, result.getDimSize(d));
      Value ok = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq,
                                       size, expected);
      cf::AssertOp::create(builder, loc, ok,
                           "tensor.cast: dimension " + std::to_string(d) +
                               " is not " +
                               std::to_string(result.getDimSize(d)));
    }
  }

  /// A dynamic size that is negative (from the data) would allocate a
  /// wrapped byte count.
  static void checkSizes(OpBuilder &builder, tensor::EmptyOp op) {
    Location loc = op.getLoc();
    for (Value size : op.getDynamicSizes()) {
      Value zero = arith::ConstantIndexOp::create(builder, loc, 0);
      Value ok = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::sge,
                                       size, zero);
      cf::AssertOp::create(builder, loc, ok, "tensor.empty: negative size");
    }
  }

  /// Asserts that the divisor of `op` is not zero and, if `isSigned`, that
  /// the division is not the minimum by -1 (both trap on x86).
  static void checkDivision(OpBuilder &builder, Operation *op, bool isSigned) {
    Value lhs = op->getOperand(0), rhs = op->getOperand(1);
    Type type = rhs.getType();
    // Scalars only: element-wise division on tensors is a linalg body here.
    if (!type.isIntOrIndex())
      return;
    unsigned width = type.isIndex() ? 64 : type.getIntOrFloatBitWidth();
    APInt divisor;
    bool constant = matchPattern(rhs, m_ConstantInt(&divisor));
    Location loc = op->getLoc();
    std::string name = op->getName().getStringRef().str();
    auto constantOf = [&](const APInt &value) -> Value {
      return arith::ConstantOp::create(builder, loc, type,
                                       builder.getIntegerAttr(type, value));
    };
    if (!constant || divisor.isZero()) {
      Value nonZero =
          arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ne, rhs,
                                constantOf(APInt::getZero(width)));
      cf::AssertOp::create(builder, loc, nonZero,
                           name + ": integer division by zero");
    }
    if (!isSigned || (constant && !divisor.isAllOnes()))
      return;
    Value isMinimum =
        arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, lhs,
                              constantOf(APInt::getSignedMinValue(width)));
    Value byMinusOne =
        arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, rhs,
                              constantOf(APInt::getAllOnes(width)));
    Value overflows =
        arith::AndIOp::create(builder, loc, isMinimum, byMinusOne);
    Value fits = arith::XOrIOp::create(
        builder, loc, overflows,
        arith::ConstantOp::create(builder, loc, builder.getBoolAttr(true)));
    cf::AssertOp::create(builder, loc, fits,
                         name + ": signed integer overflow (the minimum "
                                "divided by -1)");
  }
};

} // namespace
