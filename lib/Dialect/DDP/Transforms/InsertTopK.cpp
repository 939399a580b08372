//===- InsertTopK.cpp - top-k sparsification with error feedback ----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Top-k sparsification (Aji & Heafield 2017; GRACE's TopKCompressor with
// its residual memory) as a CompressionScheme. Per flat bucket of N
// elements, with k = max(1, floor(N * ratio)):
//
// clang-format off
//   m    = g + e               e: this rank's error, zeros at first
//   v, i = top_k(m)            largest |m| first, ties by index
//   e    = m, zeros at i       m minus what this rank sent
//   V, I = allgather(v, i)     one collective, values and indices
//   sum  = zeros; sum[I[r, j]] += V[r, j], r in rank order, j in order
//   mean = sum / W
// clang-format on
//
// The indices travel as i32 where N fits (half the bytes of PyTorch's
// int64), so each rank sends k values and k indices instead of N values.
// Without error feedback (error-feedback=false), e stays zero and what is
// not selected is dropped. Its cost hook makes it one of ddp-plan's
// choices (`topk`, `topk{ratio=0.001}`).
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/BucketCompression.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/MapVector.h"

#include <cmath>
#include <limits>

namespace mlir::ddp {
#define GEN_PASS_DEF_INSERTTOPK
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

int64_t mlir::ddp::topKCount(int64_t numElements, double ratio) {
  double k = std::floor(double(numElements) * ratio);
  if (!(k >= 1.0))
    return 1;
  return k >= double(numElements) ? numElements : int64_t(k);
}

namespace {
class TopKScheme : public CompressionScheme {
public:
  TopKScheme(double ratio, bool errorFeedback)
      : ratio(ratio), errorFeedback(errorFeedback) {}

  StringRef getName() const override { return "topk"; }

  DictionaryAttr getOptions(MLIRContext *context) const override {
    Builder b(context);
    return b.getDictionaryAttr(
        {b.getNamedAttr("ratio", b.getF64FloatAttr(ratio)),
         b.getNamedAttr("error_feedback", b.getBoolAttr(errorFeedback))});
  }

  FailureOr<Value> reduce(BucketBuilder &b, Value flat) override;

  FailureOr<PlanCost> predict(const MachineProfile &profile,
                              const BucketShape &bucket, int64_t world,
                              std::string &why) const override;

private:
  double ratio;
  bool errorFeedback;
};

/// `tensor` with the elements at `indices` (1-D, k of them) replaced by
/// `value`, in index order.
Value setAt(ImplicitLocOpBuilder &b, Value tensor, Value indices, Value value) {
  Value zero = arith::ConstantIndexOp::create(b, 0);
  Value one = arith::ConstantIndexOp::create(b, 1);
  Value count = tensor::DimOp::create(b, indices, 0);
  auto loop = scf::ForOp::create(
      b, zero, count, one, ValueRange{tensor},
      [&](OpBuilder &nb, Location loc, Value j, ValueRange carried) {
        ImplicitLocOpBuilder ib(loc, nb);
        Value at = arith::IndexCastOp::create(
            ib, ib.getIndexType(),
            tensor::ExtractOp::create(ib, indices, ValueRange{j}));
        Value updated =
            tensor::InsertOp::create(ib, value, carried[0], ValueRange{at});
        scf::YieldOp::create(ib, updated);
      });
  return loop.getResult(0);
}

/// `sum` (1-D) plus, for each row r of `values` and `indices` (W x k) in
/// order and each j in order, values[r, j] at indices[r, j].
Value scatterAdd(ImplicitLocOpBuilder &b, Value sum, Value values,
                 Value indices) {
  Value zero = arith::ConstantIndexOp::create(b, 0);
  Value one = arith::ConstantIndexOp::create(b, 1);
  Value ranks = tensor::DimOp::create(b, values, 0);
  Value count = tensor::DimOp::create(b, values, 1);
  auto outer = scf::ForOp::create(
      b, zero, ranks, one, ValueRange{sum},
      [&](OpBuilder &ob, Location loc, Value r, ValueRange outerCarried) {
        auto inner = scf::ForOp::create(
            ob, loc, zero, count, one, ValueRange{outerCarried[0]},
            [&](OpBuilder &nb, Location loc, Value j, ValueRange carried) {
              ImplicitLocOpBuilder ib(loc, nb);
              Value at = arith::IndexCastOp::create(
                  ib, ib.getIndexType(),
                  tensor::ExtractOp::create(ib, indices, ValueRange{r, j}));
              Value add =
                  tensor::ExtractOp::create(ib, values, ValueRange{r, j});
              Value old =
                  tensor::ExtractOp::create(ib, carried[0], ValueRange{at});
              Value updated = tensor::InsertOp::create(
                  ib, arith::AddFOp::create(ib, old, add), carried[0],
                  ValueRange{at});
              scf::YieldOp::create(ib, updated);
            });
        scf::YieldOp::create(ob, loc, inner.getResults());
      });
  return outer.getResult(0);
}
} // namespace

FailureOr<Value> TopKScheme::reduce(BucketBuilder &b, Value flat) {
  MLIRContext *context = b.getContext();
  auto flatType = cast<RankedTensorType>(flat.getType());
  Type element = flatType.getElementType();
  int64_t n = flatType.getNumElements();
  int64_t k = topKCount(n, ratio);
  Type indexType = n - 1 <= std::numeric_limits<int32_t>::max()
                       ? b.getI32Type()
                       : b.getI64Type();

  // m = g + e.
  Value m = flat;
  FlatSymbolRefAttr error;
  if (errorFeedback) {
    error = b.getState("ddp.topk_error", flatType);
    Value e = StateLoadOp::create(b, flatType, error);
    m = arith::AddFOp::create(b, flat, e);
  }

  auto top = TopKOp::create(b, RankedTensorType::get({k}, element),
                            RankedTensorType::get({k}, indexType), m);

  // e = m - what was sent: m with zeros where it was selected.
  if (errorFeedback) {
    Value zero = arith::ConstantOp::create(b, b.getFloatAttr(element, 0.0));
    Value rest = setAt(b, m, top.getIndices(), zero);
    StateStoreOp::create(b, rest, error);
  }

  // Every rank's values and indices, in one collective.
  auto gather = AllGatherOp::create(
      b, ValueRange{top.getValues(), top.getIndices()}, CommRole::compressed);

  // Their sum, rank by rank from zeros, then divided by the world size.
  Value empty = tensor::EmptyOp::create(b, flatType.getShape(), element);
  Value zeros = linalg::FillOp::create(
                    b,
                    arith::ConstantOp::create(b, b.getFloatAttr(element, 0.0))
                        .getResult(),
                    empty)
                    .getResult(0);
  Value sum = scatterAdd(b, zeros, gather.getResult(0), gather.getResult(1));
  Value ranks = tensor::DimOp::create(b, gather.getResult(0), 0);
  Value world = arith::SIToFPOp::create(
      b, element, arith::IndexCastOp::create(b, b.getI64Type(), ranks));
  AffineMap identity = AffineMap::getMultiDimIdentityMap(1, context);
  auto mean = linalg::GenericOp::create(
      b, TypeRange{flatType}, ValueRange{sum},
      ValueRange{tensor::EmptyOp::create(b, flatType.getShape(), element)},
      ArrayRef<AffineMap>{identity, identity},
      ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
      [&](OpBuilder &nb, Location loc, ValueRange args) {
        linalg::YieldOp::create(
            nb, loc,
            ValueRange{arith::DivFOp::create(nb, loc, args[0], world)});
      });
  return mean.getResult(0);
}

FailureOr<PlanCost> TopKScheme::predict(const MachineProfile &profile,
                                        const BucketShape &bucket,
                                        int64_t world, std::string &why) const {
  // One flat bucket per element type, as applyCompressionScheme makes them.
  llvm::MapVector<Type, int64_t> sizes;
  for (RankedTensorType type : bucket.tensors)
    sizes[type.getElementType()] += type.getNumElements();
  PlanCost cost;
  for (auto [element, n] : sizes) {
    int64_t k = topKCount(n, ratio);
    double indexBytes = n - 1 <= std::numeric_limits<int32_t>::max() ? 4 : 8;
    double sent =
        double(k) * (double(element.getIntOrFloatBitWidth()) / 8 + indexBytes);
    std::optional<double> link = profile.allgatherSeconds(sent, world);
    if (!link) {
      why = "the profile has no allgather_i8 (ddprt-calibrate measures it "
            "with the link)";
      return failure();
    }
    std::optional<double> select =
        profile.measuredElementwiseSeconds("top_k_f32", double(n));
    if (!select) {
      why = "the profile has no top_k_f32 kernel time (ddprt-calibrate "
            "measures it; --kernels-only on the machine that computes)";
      return failure();
    }
    // The compiled code around the selection, at the rate of an elementwise
    // pass (a lower bound: the scatter's accesses are random): the zeros
    // and the division by W over the bucket, the scatter of W k values,
    // and with error feedback m = g + e and the new residual.
    double passes = 2.0 * double(n) + double(world) * double(k) +
                    (errorFeedback ? 2.0 * double(n) + double(k) : 0.0);
    double compute = *select + profile.elementwiseSeconds("scale_f32", passes);
    cost.linkSeconds += *link;
    cost.computeSeconds += compute;
    cost.seconds += *link + compute;
    cost.bytes += sent;
  }
  return cost;
}

/// The fraction's check, in the pass and in makeTopKScheme.
static LogicalResult checkRatio(ModuleOp module, StringRef passName,
                                double ratio) {
  if (ratio > 0.0 && ratio <= 1.0)
    return success();
  return emitPassError(module, passName)
         << "ratio=" << formatNumber(ratio)
         << " must be in (0, 1]: the fraction of each bucket's elements "
            "each rank sends";
}

namespace {
struct InsertTopKPass
    : public PassWithOptionNames<ddp::impl::InsertTopKBase<InsertTopKPass>> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkRatio(module, getArgument(), ratio)))
      return signalPassFailure();
    TopKScheme scheme(ratio, errorFeedback);
    if (failed(applyCompressionScheme(module, scheme, BucketFilter{buckets},
                                      getArgument(), numBuckets)))
      return signalPassFailure();
  }

  /// The scheme these options make (ddp-plan's way in); errors start with
  /// `what`.
  FailureOr<std::unique_ptr<CompressionScheme>> makeScheme(ModuleOp module,
                                                           StringRef what) {
    if (!buckets.empty()) {
      emitPassError(module, what)
          << "buckets= does not apply to a choice of ddp-plan (use its "
             "never= option)";
      return failure();
    }
    if (failed(checkRatio(module, what, ratio)))
      return failure();
    return std::unique_ptr<CompressionScheme>(
        std::make_unique<TopKScheme>(ratio, errorFeedback));
  }
};
} // namespace

FailureOr<std::unique_ptr<CompressionScheme>>
mlir::ddp::makeTopKScheme(ModuleOp module, StringRef options) {
  // Errors say what is wrong with the options; the caller says who asked.
  InsertTopKPass pass;
  if (failed(pass.initializeOptions(options, [&](const Twine &message) {
        return emitError(module.getLoc()) << message;
      })))
    return failure();
  return pass.makeScheme(module, /*what=*/"");
}
