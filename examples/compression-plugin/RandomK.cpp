//===- RandomK.cpp - random-k sparsification as a ddp-opt pass plugin -----===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A compression scheme written outside ddp-opt's sources and built against
// its installed package only (CMakeLists.txt): random-k sparsification with
// error feedback (Stich, Cordonnier and Jaggi, "Sparsified SGD with Memory",
// NeurIPS 2018), as a CompressionScheme in a pass plugin:
//
//   ddp-opt --load-pass-plugin=DDPRandomK.so \
//           --insert-random-k="ratio=0.01 seed=0" step.mlir
//
// For a bucket of N float32 elements, at step t, every rank computes
//
//   m    = g + e                            e: the bucket's error, 0 at first
//   k    = max(1, ceil(ratio * N)),  s = floor(N / k)
//   o    = splitmix64(seed + b * 2^32 + (t + 1) * 0x9E3779B97F4A7C15) mod N
//   I    = { (o + j * s) mod N : 0 <= j < k }
//   v    = the mean over the ranks of m[I]   (one allreduce of k values)
//   mean = v at I, 0 elsewhere
//   e'   = m with 0 at I
//
// where b is the bucket's index and splitmix64 the finalizer of Steele et
// al.'s SplitMix64. The indices are a function of the seed, the bucket and
// the step only, so every rank picks the same ones without communicating;
// o is uniform enough that each element is picked with probability k / N
// at each step, and what is not sent stays in the error until it is.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/Transforms/BucketCompression.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace mlir;

namespace {

/// `value` as a person would type it (%g).
std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

/// The number of elements sent of a bucket of `n`.
int64_t chosenCount(double ratio, int64_t n) {
  return std::clamp<int64_t>(int64_t(std::ceil(ratio * double(n))), 1, n);
}

class RandomKScheme : public ddp::CompressionScheme {
public:
  RandomKScheme(double ratio, uint64_t seed) : ratio(ratio), seed(seed) {}

  StringRef getName() const override { return "random-k"; }

  std::string whyNot(const ddp::Bucket &bucket) const override {
    if (!bucket.getElementType().isF32())
      return "random-k takes float32 buckets";
    int64_t n = bucket.getNumElements();
    if (chosenCount(ratio, n) < n)
      return "";
    return "it is too small: ratio=" + formatNumber(ratio) + " of " +
           std::to_string(n) + " element(s) sends them all";
  }

  FailureOr<Value> reduce(ddp::BucketBuilder &b, Value flat) override;

  /// The cost hook that makes random-k one of ddp-plan's choices: one
  /// allreduce of k values per float32 bucket and about four elementwise
  /// passes over it (m = g + e, the gather of m[I], the mean and the
  /// error); what it leaves plain (other element types, a bucket too small
  /// to sparsify) is one plain allreduce.
  FailureOr<ddp::PlanCost> predict(const ddp::MachineProfile &profile,
                                   const ddp::BucketShape &bucket,
                                   int64_t world,
                                   std::string &why) const override {
    ddp::PlanCost cost;
    int64_t n = 0;
    for (RankedTensorType type : bucket.tensors) {
      if (type.getElementType().isF32()) {
        n += type.getNumElements();
        continue;
      }
      double bytes = double(type.getNumElements()) *
                     double(type.getElementTypeBitWidth()) / 8.0;
      cost.linkSeconds +=
          profile.allreduceSeconds(type.getElementType(), bytes, world);
      cost.bytes += bytes;
    }
    int64_t k = n > 0 ? chosenCount(ratio, n) : 0;
    cost.compressesNothing = k == n;
    Type f32 = Float32Type::get(bucket.tensors.front().getContext());
    cost.linkSeconds += profile.allreduceSeconds(f32, double(k) * 4.0, world);
    cost.bytes += double(k) * 4.0;
    if (!cost.compressesNothing)
      cost.computeSeconds =
          profile.elementwiseSeconds("scale_f32", 4.0 * double(n));
    cost.seconds = cost.linkSeconds + cost.computeSeconds;
    return cost;
  }

private:
  double ratio;
  uint64_t seed;
};

FailureOr<Value> RandomKScheme::reduce(ddp::BucketBuilder &b, Value flat) {
  const ddp::Bucket &bucket = b.getBucket();
  RankedTensorType flatType = bucket.flatType;
  int64_t n = bucket.getNumElements();
  int64_t k = chosenCount(ratio, n);
  Type i64 = b.getI64Type();
  Type f32 = b.getF32Type();
  auto constantI64 = [&](uint64_t value) -> Value {
    return arith::ConstantOp::create(b, b.getI64IntegerAttr(int64_t(value)));
  };
  auto constantIndex = [&](int64_t value) -> Value {
    return arith::ConstantIndexOp::create(b, value);
  };

  // m = g + e, with the bucket's own error state.
  FlatSymbolRefAttr errorState = b.getState("random_k.error", flatType);
  Value error = ddp::StateLoadOp::create(b, flatType, errorState);
  Value m = arith::AddFOp::create(b, flat, error);

  // The bucket's step counter: t here, t + 1 for the next step.
  FlatSymbolRefAttr stepState = b.getState("random_k.step", i64);
  Value step = ddp::StateLoadOp::create(b, i64, stepState);
  Value next = arith::AddIOp::create(b, step, constantI64(1));
  ddp::StateStoreOp::create(b, next, stepState);

  // The offset o: splitmix64 in i64 arithmetic (wrapping, as in C).
  Value z = arith::AddIOp::create(
      b, constantI64(seed + (uint64_t(bucket.index) << 32)),
      arith::MulIOp::create(b, next, constantI64(0x9E3779B97F4A7C15ULL)));
  auto xorShift = [&](Value x, int64_t shift) -> Value {
    return arith::XOrIOp::create(
        b, x, arith::ShRUIOp::create(b, x, constantI64(shift)));
  };
  z = arith::MulIOp::create(b, xorShift(z, 30),
                            constantI64(0xBF58476D1CE4E5B9ULL));
  z = arith::MulIOp::create(b, xorShift(z, 27),
                            constantI64(0x94D049BB133111EBULL));
  z = xorShift(z, 31);
  Value offset = arith::IndexCastUIOp::create(
      b, b.getIndexType(), arith::RemUIOp::create(b, z, constantI64(n)));
  Value size = constantIndex(n);
  Value stride = constantIndex(n / k);
  Value count = constantIndex(k);
  Value zeroIndex = constantIndex(0);

  // m[I]: element j is m[(o + j * s) mod N].
  Value picked = tensor::GenerateOp::create(
      b, RankedTensorType::get({k}, f32), ValueRange(),
      [&](OpBuilder &nested, Location loc, ValueRange indices) {
        ImplicitLocOpBuilder ib(loc, nested);
        Value at = arith::RemUIOp::create(
            ib,
            arith::AddIOp::create(
                ib, offset, arith::MulIOp::create(ib, indices[0], stride)),
            size);
        tensor::YieldOp::create(
            ib, tensor::ExtractOp::create(ib, m, ValueRange{at}).getResult());
      });

  // The ranks' mean of the k values: all that is sent.
  Value averaged =
      ddp::AllReduceOp::create(b, ddp::ReductionKind::mean, ValueRange(picked),
                               ddp::CommRole::compressed)
          .getResult(0);

  // Element i was picked when d = (i - o) mod N is j * s with j < k: the
  // mean is v[j] there and 0 elsewhere, the error 0 there and m elsewhere.
  AffineMap identity = b.getMultiDimIdentityMap(1);
  Value meanInit = tensor::EmptyOp::create(b, flatType.getShape(), f32);
  Value errorInit = tensor::EmptyOp::create(b, flatType.getShape(), f32);
  auto spread = linalg::GenericOp::create(
      b, TypeRange{flatType, flatType}, ValueRange{m},
      ValueRange{meanInit, errorInit},
      ArrayRef<AffineMap>{identity, identity, identity},
      ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
      [&](OpBuilder &nested, Location loc, ValueRange args) {
        ImplicitLocOpBuilder ib(loc, nested);
        Value i = linalg::IndexOp::create(ib, 0);
        Value d = arith::RemUIOp::create(
            ib,
            arith::SubIOp::create(ib, arith::AddIOp::create(ib, i, size),
                                  offset),
            size);
        Value j = arith::DivUIOp::create(ib, d, stride);
        Value onStride = arith::CmpIOp::create(
            ib, arith::CmpIPredicate::eq, arith::RemUIOp::create(ib, d, stride),
            zeroIndex);
        Value inRange =
            arith::CmpIOp::create(ib, arith::CmpIPredicate::ult, j, count);
        Value chosen = arith::AndIOp::create(ib, onStride, inRange);
        Value at = arith::SelectOp::create(ib, chosen, j, zeroIndex);
        Value value = tensor::ExtractOp::create(ib, averaged, ValueRange{at});
        Value zero = arith::ConstantOp::create(ib, ib.getF32FloatAttr(0.0f));
        linalg::YieldOp::create(
            ib, ValueRange{arith::SelectOp::create(ib, chosen, value, zero),
                           arith::SelectOp::create(ib, chosen, zero, args[0])});
      });
  ddp::StateStoreOp::create(b, spread.getResult(1), errorState);
  return spread.getResult(0);
}

struct InsertRandomKPass
    : public PassWrapper<InsertRandomKPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(InsertRandomKPass)

  InsertRandomKPass() = default;
  InsertRandomKPass(const InsertRandomKPass &other) : PassWrapper(other) {}

  StringRef getArgument() const final { return "insert-random-k"; }
  StringRef getDescription() const final {
    return "Send a fraction (ratio) of each float32 gradient bucket: the "
           "same pseudo-random elements on every rank, the rest kept as "
           "error feedback (random-k; a pass plugin)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<ddp::DDPDialect, arith::ArithDialect, linalg::LinalgDialect,
                    tensor::TensorDialect>();
  }

  /// Fails, with an error, where the ratio is not in (0, 1].
  LogicalResult checkRatio(ModuleOp module) {
    if (ratio > 0.0 && ratio <= 1.0)
      return success();
    return emitError(module.getLoc())
           << getArgument() << ": ratio must be in (0, 1], got "
           << formatNumber(ratio);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkRatio(module)))
      return signalPassFailure();
    RandomKScheme scheme(ratio, seed);
    FailureOr<unsigned> count = ddp::applyCompressionScheme(
        module, scheme, ddp::BucketFilter{buckets}, getArgument());
    if (failed(count))
      return signalPassFailure();
    numBuckets += *count;
  }

  Option<double> ratio{*this, "ratio",
                       llvm::cl::desc("Fraction of each bucket's elements "
                                      "sent, in (0, 1] (default: 0.01)"),
                       llvm::cl::init(0.01)};
  Option<uint64_t> seed{*this, "seed",
                        llvm::cl::desc("Seed of the elements' choice, the "
                                       "same on every rank (default: 0)"),
                        llvm::cl::init(0)};
  Option<std::string> buckets{
      *this, "buckets",
      llvm::cl::desc("Only buckets with a gradient whose name matches this "
                     "regular expression (default: every bucket)"),
      llvm::cl::init("")};
  Statistic numBuckets{this, "num-buckets", "Buckets sent as random-k"};
};

/// ddp-plan's `random-k{ratio=0.25 seed=5}`: the scheme from the pass's
/// own options.
FailureOr<std::unique_ptr<ddp::CompressionScheme>>
makeRandomKScheme(ModuleOp module, StringRef options) {
  InsertRandomKPass pass;
  if (failed(pass.initializeOptions(options,
                                    [&](const Twine &message) {
                                      return emitError(module.getLoc())
                                             << "random-k: " << message;
                                    })) ||
      failed(pass.checkRatio(module)))
    return failure();
  return std::unique_ptr<ddp::CompressionScheme>(
      std::make_unique<RandomKScheme>(pass.ratio, pass.seed));
}

} // namespace

/// What ddp-opt --load-pass-plugin calls: registers the pass, and the
/// scheme as one of ddp-plan's choices.
extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "DDPRandomK", LLVM_VERSION_STRING, []() {
            PassRegistration<InsertRandomKPass>();
            ddp::registerPlannableScheme("random-k", makeRandomKScheme);
          }};
}
