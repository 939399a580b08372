//===- InsertQuantization.cpp - PyTorch's quantization hooks -------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// quantization_pertensor_hook and quantization_perchannel_hook of PyTorch
// 1.13 (torch/distributed/algorithms/ddp_comm_hooks/quantization_hooks.py)
// as a CompressionScheme. Both are one computation over the bucket seen as
// C channels of K elements: per tensor, C = 1 and K = N; per channel,
// K = bucket_size and the bucket is padded with zeros to C = N / K + 1
// channels (PyTorch pads by K - N % K, a whole channel when K divides N).
// Per channel c, in float32 and in PyTorch's order of operations:
//
//   min, max   = aminmax(x[c, :])                     (MinMaxObserver)
//   min_neg    = min(min, 0); max_pos = max(max, 0)   (_calculate_qparams)
//   scale      = max((max_pos - min_neg) / 255, eps)  eps = 2^-23
//   zero_point = clamp(0 - int(round(min_neg / scale)), 0, 255)
//   q[c, k]    = uint8(clamp(round(x[c, k] / scale) + zero_point, 0, 255))
//
// round is round-half-even (torch.round). The ranks allgather scales, zero
// points and payloads; every rank computes
//
//   mean = (sum over r in rank order, from zeros, of
//           scale_r[c] * (float(q_r[c, k]) - zero_point_r[c]))[:N] / W
//
// PyTorch gathers the scales first and the payload after (two collectives
// in a row); exchange=fused gathers them together, in one. Its cost hook
// makes it one of ddp-plan's choices (`quantize`,
// `quantize{granularity=per-channel}`).
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/BucketCompression.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cfloat>

namespace mlir::ddp {
#define GEN_PASS_DEF_INSERTQUANTIZATION
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {
using utils::IteratorType;

/// What quantization_*_hook computes, for one bucket.
class QuantizationScheme : public CompressionScheme {
public:
  QuantizationScheme(bool perChannel, int64_t channelSize, bool fused)
      : perChannel(perChannel), channelSize(channelSize), fused(fused) {}

  StringRef getName() const override {
    return perChannel ? "quantize-per-channel" : "quantize-per-tensor";
  }

  DictionaryAttr getOptions(MLIRContext *context) const override {
    Builder b(context);
    SmallVector<NamedAttribute> options{b.getNamedAttr(
        "exchange", b.getStringAttr(fused ? "fused" : "pytorch"))};
    if (perChannel)
      options.push_back(
          b.getNamedAttr("channel_size", b.getI64IntegerAttr(channelSize)));
    return b.getDictionaryAttr(options);
  }

  std::string whyNot(const Bucket &bucket) const override {
    if (!bucket.getElementType().isF32())
      return "quantization takes float32 buckets, as PyTorch's hooks do";
    int64_t channels = 0, padded = 0, bytes = 0;
    if (perChannel && (llvm::AddOverflow(bucket.getNumElements() / channelSize,
                                         int64_t(1), channels) ||
                       llvm::MulOverflow(channels, channelSize, padded) ||
                       llvm::MulOverflow(padded, int64_t(4), bytes)))
      return "padded to channels of " + std::to_string(channelSize) +
             " elements it would hold more bytes than a 64-bit count";
    return "";
  }

  FailureOr<Value> reduce(BucketBuilder &b, Value flat) override;

  FailureOr<PlanCost> predict(const MachineProfile &profile,
                              const BucketShape &bucket, int64_t world,
                              std::string &why) const override;

private:
  bool perChannel;
  int64_t channelSize;
  bool fused;
};

Value constantF32(ImplicitLocOpBuilder &b, float value) {
  return arith::ConstantOp::create(b, b.getF32FloatAttr(value));
}

/// A tensor of `shape` and `element`, every element `value`.
Value filled(ImplicitLocOpBuilder &b, ArrayRef<int64_t> shape, Type element,
             TypedAttr value) {
  Value empty = tensor::EmptyOp::create(b, shape, element);
  Value scalar = arith::ConstantOp::create(b, value);
  return linalg::FillOp::create(b, scalar, empty).getResult(0);
}

AffineMap map(MLIRContext *context, unsigned dims, ArrayRef<unsigned> results) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d : results)
    exprs.push_back(getAffineDimExpr(d, context));
  return AffineMap::get(dims, 0, exprs, context);
}
} // namespace

FailureOr<Value> QuantizationScheme::reduce(BucketBuilder &b, Value flat) {
  MLIRContext *context = b.getContext();
  Type f32 = b.getF32Type();
  Type i8 = b.getI8Type();
  int64_t n = b.getBucket().getNumElements();
  // C channels of K elements.
  int64_t k = perChannel ? channelSize : n;
  int64_t c = perChannel ? n / k + 1 : 1;
  int64_t padded = c * k;

  Value x = flat;
  if (padded != n) {
    Value zeros = filled(b, {padded}, f32, b.getF32FloatAttr(0.0f));
    x = tensor::InsertSliceOp::create(
        b, flat, zeros, ArrayRef<OpFoldResult>{b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(n)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  }
  auto channelsType = RankedTensorType::get({c, k}, f32);
  x = tensor::ExpandShapeOp::create(b, channelsType, x,
                                    ArrayRef<ReassociationIndices>{{0, 1}});

  // min and max per channel (torch.aminmax: NaN propagates).
  Value minInit = filled(b, {c}, f32, b.getF32FloatAttr(INFINITY));
  Value maxInit = filled(b, {c}, f32, b.getF32FloatAttr(-INFINITY));
  auto minmax = linalg::GenericOp::create(
      b, TypeRange{minInit.getType(), maxInit.getType()}, ValueRange{x},
      ValueRange{minInit, maxInit},
      ArrayRef<AffineMap>{map(context, 2, {0, 1}), map(context, 2, {0}),
                          map(context, 2, {0})},
      ArrayRef<IteratorType>{IteratorType::parallel, IteratorType::reduction},
      [](OpBuilder &nb, Location loc, ValueRange args) {
        Value lo = arith::MinimumFOp::create(nb, loc, args[1], args[0]);
        Value hi = arith::MaximumFOp::create(nb, loc, args[2], args[0]);
        linalg::YieldOp::create(nb, loc, ValueRange{lo, hi});
      });

  // Scale and zero point per channel (_calculate_qparams, quint8 0..255).
  Value empty = tensor::EmptyOp::create(b, ArrayRef<int64_t>{c}, f32);
  auto qparams = linalg::GenericOp::create(
      b, TypeRange{empty.getType(), empty.getType()}, minmax.getResults(),
      ValueRange{empty, empty}, SmallVector<AffineMap>(4, map(context, 1, {0})),
      ArrayRef<IteratorType>{IteratorType::parallel},
      [](OpBuilder &nb, Location loc, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, nb);
        Value zero = constantF32(ib, 0.0f);
        Value minNeg = arith::MinimumFOp::create(ib, args[0], zero);
        Value maxPos = arith::MaximumFOp::create(ib, args[1], zero);
        Value range = arith::SubFOp::create(ib, maxPos, minNeg);
        Value scale = arith::DivFOp::create(ib, range, constantF32(ib, 255.0f));
        scale =
            arith::MaximumFOp::create(ib, scale, constantF32(ib, FLT_EPSILON));
        Value steps = math::RoundEvenOp::create(
            ib, arith::DivFOp::create(ib, minNeg, scale));
        Type i32 = ib.getI32Type();
        Value point = arith::SubIOp::create(
            ib, arith::ConstantOp::create(ib, ib.getI32IntegerAttr(0)),
            arith::FPToSIOp::create(ib, i32, steps));
        point = arith::MaxSIOp::create(
            ib, point, arith::ConstantOp::create(ib, ib.getI32IntegerAttr(0)));
        point = arith::MinSIOp::create(
            ib, point,
            arith::ConstantOp::create(ib, ib.getI32IntegerAttr(255)));
        Value pointF = arith::SIToFPOp::create(ib, ib.getF32Type(), point);
        linalg::YieldOp::create(ib, ValueRange{scale, pointF});
      });
  Value scale = qparams.getResult(0);
  Value zeroPoint = qparams.getResult(1);

  // The payload: round(x / scale) + zero_point, clamped to 0..255, uint8.
  Value payloadInit = tensor::EmptyOp::create(b, ArrayRef<int64_t>{c, k}, i8);
  auto quantize = linalg::GenericOp::create(
      b, TypeRange{payloadInit.getType()}, ValueRange{x, scale, zeroPoint},
      ValueRange{payloadInit},
      ArrayRef<AffineMap>{map(context, 2, {0, 1}), map(context, 2, {0}),
                          map(context, 2, {0}), map(context, 2, {0, 1})},
      ArrayRef<IteratorType>{IteratorType::parallel, IteratorType::parallel},
      [](OpBuilder &nb, Location loc, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, nb);
        Value y = math::RoundEvenOp::create(
            ib, arith::DivFOp::create(ib, args[0], args[1]));
        y = arith::AddFOp::create(ib, y, args[2]);
        y = arith::MaximumFOp::create(ib, y, constantF32(ib, 0.0f));
        y = arith::MinimumFOp::create(ib, y, constantF32(ib, 255.0f));
        linalg::YieldOp::create(
            ib, ValueRange{arith::FPToUIOp::create(ib, ib.getI8Type(), y)});
      });
  Value payload = quantize.getResult(0);

  // The exchange.
  SmallVector<Value> gathered;
  auto gather = [&](ArrayRef<Value> values) {
    auto op = AllGatherOp::create(b, values, CommRole::compressed);
    llvm::append_range(gathered, op.getResults());
  };
  if (fused) {
    gather({scale, zeroPoint, payload});
  } else {
    gather({scale, zeroPoint});
    gather({payload});
  }

  // Dequantize every rank's payload and add them up in rank order: the
  // rank loop is the outermost.
  Value sum = filled(b, {c, k}, f32, b.getF32FloatAttr(0.0f));
  auto dequantize = linalg::GenericOp::create(
      b, TypeRange{sum.getType()},
      ValueRange{gathered[2], gathered[0], gathered[1]}, ValueRange{sum},
      ArrayRef<AffineMap>{map(context, 3, {0, 1, 2}), map(context, 3, {0, 1}),
                          map(context, 3, {0, 1}), map(context, 3, {1, 2})},
      ArrayRef<IteratorType>{IteratorType::reduction, IteratorType::parallel,
                             IteratorType::parallel},
      [](OpBuilder &nb, Location loc, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, nb);
        Value q = arith::UIToFPOp::create(ib, ib.getF32Type(), args[0]);
        Value value = arith::MulFOp::create(
            ib, args[1], arith::SubFOp::create(ib, q, args[2]));
        linalg::YieldOp::create(
            ib, ValueRange{arith::AddFOp::create(ib, args[3], value)});
      });

  // Divided by the world size, in the channels' shape (the division reads
  // the sum where it was written, so that the lowering computes both tile
  // by tile), then flat again, without the padding.
  Value ranks = tensor::DimOp::create(b, gathered[2], 0);
  Value world = arith::SIToFPOp::create(
      b, f32, arith::IndexCastOp::create(b, b.getI64Type(), ranks));
  Value meanInit = tensor::EmptyOp::create(b, ArrayRef<int64_t>{c, k}, f32);
  auto mean = linalg::GenericOp::create(
      b, TypeRange{meanInit.getType()}, ValueRange{dequantize.getResult(0)},
      ValueRange{meanInit}, SmallVector<AffineMap>(2, map(context, 2, {0, 1})),
      ArrayRef<IteratorType>{IteratorType::parallel, IteratorType::parallel},
      [&](OpBuilder &nb, Location loc, ValueRange args) {
        linalg::YieldOp::create(
            nb, loc,
            ValueRange{arith::DivFOp::create(nb, loc, args[0], world)});
      });
  Value result = tensor::CollapseShapeOp::create(
      b, RankedTensorType::get({padded}, f32), mean.getResult(0),
      ArrayRef<ReassociationIndices>{{0, 1}});
  if (padded != n)
    result = tensor::ExtractSliceOp::create(
        b, result, ArrayRef<OpFoldResult>{b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(n)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  return result;
}

FailureOr<PlanCost> QuantizationScheme::predict(const MachineProfile &profile,
                                                const BucketShape &bucket,
                                                int64_t world,
                                                std::string &why) const {
  PlanCost cost;
  int64_t n = 0;
  for (RankedTensorType type : bucket.tensors) {
    if (type.getElementType().isF32()) {
      n += type.getNumElements();
      continue;
    }
    // Left a plain allreduce (whyNot).
    double bytes = double(tensorBytes(type));
    cost.linkSeconds +=
        profile.allreduceSeconds(type.getElementType(), bytes, world);
    cost.bytes += bytes;
  }
  cost.compressesNothing = n == 0;
  if (n > 0) {
    // C channels of K elements, K = n per tensor; a byte per element and a
    // scale and zero point (f32) per channel, gathered from every rank.
    double channels = perChannel ? double(n / channelSize + 1) : 1.0;
    double padded = perChannel ? channels * double(channelSize) : double(n);
    double header = channels * 8.0;
    std::optional<double> link =
        fused ? profile.allgatherSeconds(header + padded, world)
              : profile.allgatherSeconds(header, world);
    if (!link) {
      why = "the profile has no allgather_i8 (ddprt-calibrate measures it "
            "with the link)";
      return failure();
    }
    if (!fused)
      *link += *profile.allgatherSeconds(padded, world);
    cost.linkSeconds += *link;
    cost.bytes += header + padded;
    // Compiled code only, at the rate of an elementwise pass: the min and
    // max, the quantization, the dequantized sum over W payloads and the
    // division by W.
    cost.computeSeconds = profile.elementwiseSeconds(
        "scale_f32", 2.0 * double(n) + double(world + 1) * padded);
  }
  cost.seconds = cost.linkSeconds + cost.computeSeconds;
  return cost;
}

namespace {
struct InsertQuantizationPass
    : public PassWithOptionNames<
          ddp::impl::InsertQuantizationBase<InsertQuantizationPass>> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<std::unique_ptr<CompressionScheme>> scheme =
        makeScheme(module, getArgument());
    if (failed(scheme) ||
        failed(applyCompressionScheme(module, **scheme, BucketFilter{buckets},
                                      getArgument(), numBuckets)))
      return signalPassFailure();
  }

  /// The scheme these options make, after checking them; errors start with
  /// `what`.
  FailureOr<std::unique_ptr<CompressionScheme>> makeScheme(ModuleOp module,
                                                           StringRef what) {
    if (channelSize <= 0) {
      emitPassError(module, what)
          << "channel-size=" << int64_t(channelSize) << " must be positive";
      return failure();
    }
    return std::unique_ptr<CompressionScheme>(
        std::make_unique<QuantizationScheme>(
            granularity == QuantizationGranularity::perChannel, channelSize,
            exchange == QuantizationExchange::fused));
  }

  /// ddp-plan's way in: the options, and no bucket filter.
  FailureOr<std::unique_ptr<CompressionScheme>>
  makePlannedScheme(ModuleOp module, StringRef options) {
    // Errors say what is wrong with the options; the caller says who asked.
    if (failed(initializeOptions(options, [&](const Twine &message) {
          return emitError(module.getLoc()) << message;
        })))
      return failure();
    if (!buckets.empty()) {
      emitError(module.getLoc()) << "buckets= does not apply to a choice of "
                                    "ddp-plan (use its never= option)";
      return failure();
    }
    return makeScheme(module, /*what=*/"");
  }
};
} // namespace

FailureOr<std::unique_ptr<CompressionScheme>>
mlir::ddp::makeQuantizationScheme(ModuleOp module, StringRef options) {
  return InsertQuantizationPass().makePlannedScheme(module, options);
}
