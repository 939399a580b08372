//===- MatmulsToRuntime.cpp - f32 contractions as calls of the runtime's BLAS //
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Each f32 contraction on buffers with one M, N and K dimension (and at most
// one batch dimension) becomes a call of ddprt_step_matmul_f32 on views of
// its operands in the order [batch,] M x K, K x N, M x N. The host function
// (runtime/lib/host/Matmul.cpp) hands them to ddprt_gemm.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Contractions.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPMATMULSTORUNTIME
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

constexpr llvm::StringLiteral kMatmulFunction = "ddprt_step_matmul_f32";

/// The loops of a contraction on buffers the runtime computes, or nothing.
std::optional<BlasContraction> matchMatmul(linalg::LinalgOp op) {
  if (!op.hasPureBufferSemantics() || op->getNumResults() != 0)
    return std::nullopt;
  return matchBlasContraction(op);
}

/// The permutation that orders `operand`'s dimensions as the loops
/// `order`, or nothing if its map is no permutation of them.
std::optional<AffineMap> permutationFor(linalg::LinalgOp op,
                                        OpOperand &operand,
                                        ArrayRef<unsigned> order) {
  AffineMap map = op.getMatchingIndexingMap(&operand);
  if (map.getNumResults() != order.size())
    return std::nullopt;
  SmallVector<unsigned> positions;
  for (unsigned loop : order) {
    std::optional<unsigned> position =
        map.getResultPosition(getAffineDimExpr(loop, op->getContext()));
    if (!position)
      return std::nullopt;
    positions.push_back(*position);
  }
  return AffineMap::getPermutationMap(positions, op->getContext());
}

/// `value` viewed through `permutation` (memref.transpose unless it is the
/// identity), as an unranked memref.
Value runtimeView(OpBuilder &builder, Location loc, Value value,
                  AffineMap permutation) {
  if (!permutation.isIdentity())
    value = memref::TransposeOp::create(builder, loc, value,
                                        AffineMapAttr::get(permutation));
  auto unranked = UnrankedMemRefType::get(
      builder.getF32Type(), cast<MemRefType>(value.getType()).getMemorySpace());
  return memref::CastOp::create(builder, loc, unranked, value);
}

struct MatmulsToRuntime
    : public ddp::impl::DDPMatmulsToRuntimeBase<MatmulsToRuntime> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<linalg::LinalgOp, BlasContraction>> matches;
    module.walk([&](linalg::LinalgOp op) {
      if (std::optional<BlasContraction> dims = matchMatmul(op))
        matches.push_back({op, *dims});
    });
    if (matches.empty())
      return markAllAnalysesPreserved();

    OpBuilder builder(&getContext());
    auto unranked = UnrankedMemRefType::get(builder.getF32Type(), nullptr);
    auto type = builder.getFunctionType({unranked, unranked, unranked}, {});
    auto callee = module.lookupSymbol<func::FuncOp>(kMatmulFunction);
    if (callee && callee.getFunctionType() != type) {
      callee.emitError() << "@" << kMatmulFunction
                         << " is the runtime's; this module declares it as "
                         << callee.getFunctionType();
      return signalPassFailure();
    }
    if (!callee) {
      builder.setInsertionPointToStart(module.getBody());
      callee = func::FuncOp::create(builder, module.getLoc(), kMatmulFunction,
                                    type);
      callee.setPrivate();
    }

    for (auto &[op, dims] : matches) {
      SmallVector<unsigned, 3> a, b, c;
      if (dims.batch) {
        a.push_back(*dims.batch);
        b.push_back(*dims.batch);
        c.push_back(*dims.batch);
      }
      a.append({dims.m, dims.k});
      b.append({dims.k, dims.n});
      c.append({dims.m, dims.n});
      OpOperand *operands[] = {op.getDpsInputOperand(0),
                               op.getDpsInputOperand(1),
                               op.getDpsInitOperand(0)};
      ArrayRef<unsigned> orders[] = {a, b, c};
      SmallVector<AffineMap, 3> permutations;
      for (int i = 0; i < 3; ++i)
        if (std::optional<AffineMap> permutation =
                permutationFor(op, *operands[i], orders[i]))
          permutations.push_back(*permutation);
      // inferContractionDims makes each map a permutation of its loops;
      // anything else is left to the loops.
      if (permutations.size() != 3)
        continue;
      builder.setInsertionPoint(op);
      Location loc = op.getLoc();
      SmallVector<Value, 3> views;
      for (int i = 0; i < 3; ++i)
        views.push_back(
            runtimeView(builder, loc, operands[i]->get(), permutations[i]));
      func::CallOp::create(builder, loc, callee, ValueRange(views));
      op->erase();
      ++numCalls;
    }
  }
};

} // namespace
