//===- BranchTensorSelects.cpp - whole-tensor selects as scf.if -----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPBRANCHTENSORSELECTS
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;

namespace {

/// `value` for a branch to yield: a splat constant as a fill made there.
Value materialize(OpBuilder &builder, Location loc, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  SplatElementsAttr splat;
  if (!type.hasStaticShape() || !matchPattern(value, m_Constant(&splat)))
    return value;
  Value scalar = arith::ConstantOp::create(
      builder, loc, cast<TypedAttr>(splat.getSplatValue<Attribute>()));
  Value empty = tensor::EmptyOp::create(builder, loc, type.getShape(),
                                        type.getElementType());
  return linalg::FillOp::create(builder, loc, scalar, empty).getResult(0);
}

struct BranchTensorSelects
    : public ddp::impl::DDPBranchTensorSelectsBase<BranchTensorSelects> {
  void runOnOperation() override {
    SmallVector<arith::SelectOp> selects;
    getOperation().walk([&](arith::SelectOp select) {
      if (select.getCondition().getType().isInteger(1) &&
          isa<RankedTensorType>(select.getType()))
        selects.push_back(select);
    });
    if (selects.empty())
      return markAllAnalysesPreserved();
    OpBuilder builder(&getContext());
    for (arith::SelectOp select : selects) {
      Location loc = select.getLoc();
      builder.setInsertionPoint(select);
      auto branch = scf::IfOp::create(
          builder, loc, select.getCondition(),
          [&](OpBuilder &b, Location l) {
            scf::YieldOp::create(b, l,
                                 materialize(b, l, select.getTrueValue()));
          },
          [&](OpBuilder &b, Location l) {
            scf::YieldOp::create(b, l,
                                 materialize(b, l, select.getFalseValue()));
          });
      Value values[] = {select.getTrueValue(), select.getFalseValue()};
      select.replaceAllUsesWith(branch.getResult(0));
      select.erase();
      // A constant now made in its branch: no global of its size either.
      for (Value value : values)
        if (auto constant = value.getDefiningOp<arith::ConstantOp>())
          if (constant->use_empty())
            constant->erase();
      ++numBranched;
    }
  }
};

} // namespace
