//===- CostModel.h - predicted cost of a bucket's communication -*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What ddp-plan decides with: a machine profile (the JSON ddprt-calibrate
// writes: collectives fitted to latency + ring factor * bytes / bandwidth,
// with the measured points; kernel times per shape) and the time each way
// of sending a bucket is predicted to take with it. The model and where it
// is wrong are in docs/cost-model.md.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_TRANSFORMS_COSTMODEL_H
#define DDP_DIALECT_DDP_TRANSFORMS_COSTMODEL_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <optional>
#include <string>

namespace mlir::ddp {

/// One collective of the profile: `latency + ringFactor(W) * bytes /
/// bandwidth`, and the points it was fitted to (bytes, seconds) at the
/// profile's world size.
struct CollectiveCost {
  double latencySeconds = 0.0;
  /// The link's bandwidth in bytes per second (the ring factor undone).
  double bytesPerSecond = 0.0;
  SmallVector<std::pair<double, double>> points;
};

/// One kernel measurement: n x m matrix, rank r, seconds per call.
struct KernelCost {
  int64_t n = 0, m = 0, r = 0, elements = 0;
  double seconds = 0.0;
};

/// A machine profile, read from ddprt-calibrate's JSON.
class MachineProfile {
public:
  /// Reads `path` (collectives, and kernels unless `kernelsPath` is given,
  /// then the kernels come from that file). Fails with a message that
  /// names the file and what is wrong.
  static FailureOr<MachineProfile> load(StringRef path, StringRef kernelsPath,
                                        std::string &error);

  /// The profile's own world size.
  int64_t getWorldSize() const { return worldSize; }
  /// One line for reports: the file, how it was made, the link.
  StringRef getDescription() const { return description; }
  bool hasKernels() const { return !kernels.empty(); }

  /// An allreduce (mean) of `bytes` per rank of `element` (f32, f16, bf16;
  /// other float types take f32's curve) among `world` ranks. At the
  /// profile's world size, between the measured sizes, the measured points
  /// are interpolated (log-log); elsewhere the fit.
  double allreduceSeconds(Type element, double bytes, int64_t world) const;
  /// A multi-tensor allreduce of tensors of `bytes` each, as the profile's
  /// backend issues it: the CPU backend reduces each tensor of 64 KiB or
  /// more on its own and the smaller ones together in one collective; the
  /// CUDA backend groups them all into one.
  double bucketAllreduceSeconds(Type element, ArrayRef<double> bytes,
                                int64_t world) const;
  /// A PowerSGD kernel over an n x m matrix at rank r: "project",
  /// "backproject", "reconstruct", "orthogonalize" (of the n x r P): the
  /// rate per element of the largest measured shape (out of cache, as in
  /// a step), taken linear in r between the measured ranks.
  double kernelSeconds(StringRef kernel, int64_t n, int64_t m, int64_t r) const;
  /// An elementwise kernel ("cast_f32_f16", "scale_f32") over `elements`.
  double elementwiseSeconds(StringRef kernel, double elements) const;
  /// The same, or nothing if the profile did not measure `kernel` (one a
  /// newer ddprt-calibrate measures, "top_k_f32").
  std::optional<double> measuredElementwiseSeconds(StringRef kernel,
                                                   double elements) const;
  /// An allgather of `bytes` from each of `world` ranks (the fit of
  /// collectives.allgather_i8), or nothing if the profile has none.
  std::optional<double> allgatherSeconds(double bytes, int64_t world) const;

private:
  int64_t worldSize = 0;
  std::string backend;
  std::string description;
  llvm::StringMap<CollectiveCost> collectives;
  std::optional<CollectiveCost> allgather;
  llvm::StringMap<SmallVector<KernelCost>> kernels;
};

class CompressionScheme;

/// The ways of sending a bucket ddp-plan chooses among: the built-in ones,
/// and any CompressionScheme with a cost hook (`scheme`).
struct PlanChoice {
  enum class Kind { plain, fp16, bf16, powersgd, powersgdFP16, scheme };
  Kind kind = Kind::plain;
  unsigned rank = 0; // powersgd and powersgdFP16 only
  /// scheme only: the scheme, and the choice as the user spelled it
  /// ("topk", "topk{ratio=0.001}").
  std::shared_ptr<CompressionScheme> scheme;
  std::string spelling;
  /// "plain", "fp16", "bf16", "powersgd-r<rank>", "powersgd-r<rank>+fp16"
  /// (PowerSGD whose collectives travel in fp16, as --insert-powersgd
  /// --insert-fp16-compression), or a scheme's spelling.
  std::string name() const;
  bool isPowerSGD() const {
    return kind == Kind::powersgd || kind == Kind::powersgdFP16;
  }
};

/// A gradient bucket as the model sees it: its tensors' shapes and element
/// type.
struct BucketShape {
  SmallVector<RankedTensorType> tensors;
};

/// The predicted time of one choice for one bucket, and its parts.
struct PlanCost {
  double seconds = 0.0;
  /// Link time and compute time in it (what the reasons quote).
  double linkSeconds = 0.0, computeSeconds = 0.0;
  /// Bytes each rank sends (payload).
  double bytes = 0.0;
  /// PowerSGD compresses none of the bucket's tensors at this rank (the
  /// per-tensor rule): the choice is plain in effect.
  bool compressesNothing = false;
};

/// Predicts a built-in `choice` (not a scheme: CompressionScheme::predict)
/// for `bucket` among `world` ranks. PowerSGD follows
/// insert-powersgd's layerwise rule (`minCompressionRate`) and its order:
/// the uncompressed tensors' allreduce is started first and overlaps the
/// projection; P's and Q's allreduces and the kernels between them follow
/// one another.
PlanCost predictBucket(const MachineProfile &profile, const BucketShape &bucket,
                       const PlanChoice &choice, int64_t world,
                       double minCompressionRate);

} // namespace mlir::ddp

#endif // DDP_DIALECT_DDP_TRANSFORMS_COSTMODEL_H
