//===- CostModel.h - predicted cost of a bucket's communication -*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What ddp-plan decides with: a machine profile (the JSON ddprt-calibrate
// writes: collectives fitted to latency + ring factor * bytes / bandwidth,
// with the measured points; kernel times per shape) and the ways of sending
// a bucket it chooses among (PlanChoice), each of which predicts its time
// with the profile. The model and where it is wrong are in
// docs/cost-model.md.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_TRANSFORMS_COSTMODEL_H
#define DDP_DIALECT_DDP_TRANSFORMS_COSTMODEL_H

#include "ddp/Dialect/DDP/IR/DDP.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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
  /// One f32 <-> `narrow` conversion over `elements` (f16 or bf16; each
  /// direction costs about the same): "cast_f32_bf16" for bf16 where the
  /// profile measured it (a CPU without bf16 instructions converts slower
  /// than F16C does), else "cast_f32_f16".
  double narrowCastSeconds(Type narrow, double elements) const;
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
  /// The choice compresses none of the bucket's tensors (PowerSGD's
  /// per-tensor rule, fp16 on a bucket that is f16 already): it is plain in
  /// effect.
  bool compressesNothing = false;
};

/// A way ddp-plan can send a gradient bucket: plain, fp16 or bf16, PowerSGD
/// at a rank, or any CompressionScheme with a cost hook. Each predicts its
/// own cost and names itself as a decision, so that ddp-plan weighs them
/// all alike and annotates each bucket with the one it chose; the stage
/// that compresses that way honours the annotation (takePlannedBuckets).
class PlanChoice {
public:
  virtual ~PlanChoice();

  /// Its name in the plan's table, the ddp.plan attribute and the reasons:
  /// "plain", "fp16", "powersgd-r2+fp16", "topk{ratio=0.001}".
  virtual std::string name() const = 0;

  /// Whether it sends the bucket as it is: the choice the others are
  /// compared with.
  virtual bool isPlain() const { return false; }

  /// The time sending `bucket` this way is predicted to take among `world`
  /// ranks of `profile`'s machine. Fails, saying why in `why`, where the
  /// profile lacks a measurement the model needs.
  virtual FailureOr<PlanCost> predict(const MachineProfile &profile,
                                      const BucketShape &bucket, int64_t world,
                                      std::string &why) const = 0;

  /// The annotation (`ddp.planned`) of a bucket this choice was made for:
  /// the scheme's name and what its stage needs to send the bucket this
  /// way (`#ddp.compression<"powersgd", {rank = 2 : i64}>`). Null for plain,
  /// whose buckets ddp-plan marks `uncompressed` itself.
  virtual CompressionAttr decision(MLIRContext *context) const = 0;
};

/// ddp-plan's decision on `op` (its `ddp.planned`), or null.
CompressionAttr plannedDecision(Operation *op);

/// How to compress the buckets ddp-plan decided on, for messages:
/// ddp-compress{plan=...} in its place, or the stages that honour them.
StringRef plannedStagesAdvice();

/// For a pass that would overrule ddp-plan's decisions (`ddp.planned`):
/// compress every bucket, or start a bucket's allreduce as it is. Fails,
/// with an error at the first planned bucket under `root` saying what
/// `passName` `would` do and which stages honour the plan (those that take
/// `planned`, and ddp-apply-planned-schemes).
LogicalResult
refusePlannedBuckets(Operation *root, StringRef passName,
                     StringRef would = "would compress every bucket");

/// The buckets under `root` whose decision (`ddp.planned`) `mine` accepts,
/// in program order, each with its decision. The annotation is removed
/// from each: the caller compresses them.
SmallVector<std::pair<AllReduceOp, CompressionAttr>>
takePlannedBuckets(Operation *root,
                   function_ref<bool(CompressionAttr decision)> mine);

/// The time of a plain allreduce of `bucket` (what the profile's backend
/// issues for it), with `compressesNothing` as given: the cost of plain,
/// and of a choice that leaves this bucket plain in effect.
PlanCost predictPlain(const MachineProfile &profile, const BucketShape &bucket,
                      int64_t world, bool compressesNothing = false);

/// ddp-plan's "plain": the bucket sent as it is (ddp-plan marks its
/// allreduce `uncompressed`; the decision is null).
std::shared_ptr<PlanChoice> makePlainPlanChoice();

/// ddp-plan's "fp16" or "bf16" (`narrow`): the bucket sent as
/// insert-fp16-compression or insert-bf16-compression sends it.
std::shared_ptr<PlanChoice> makeNarrowPlanChoice(FloatType narrow);

/// ddp-plan's options that a family of choices may use to enumerate
/// itself (what `powersgd` stands for without options of its own).
struct PlanChoiceOptions {
  /// PowerSGD ranks to consider (`ranks=`), and the floor (`min-rank=`).
  ArrayRef<unsigned> ranks;
  unsigned minRank = 1;
  /// PowerSGD's per-tensor rule (`min-compression-rate=`).
  double minCompressionRate = 2.0;
};

/// Makes the choices one entry of ddp-plan's `choices=` stands for, from
/// the options in its braces ("rank=4" in `powersgd{rank=4}`; "" without
/// braces): `powersgd` gives one choice per rank. Fails, saying what is
/// wrong with the options in `why` (ddp-plan says which entry it was).
using PlanChoiceFactory =
    std::function<FailureOr<SmallVector<std::shared_ptr<PlanChoice>>>(
        MLIRContext *context, StringRef options, const PlanChoiceOptions &plan,
        std::string &why)>;

/// Registers a family of ddp-plan's choices as `name`, replacing an
/// earlier one. The built-in families are registered: plain, fp16, bf16,
/// powersgd and powersgd+fp16. A CompressionScheme registered with
/// registerPlannableScheme is a choice too, under its own name, where no
/// family has that name.
void registerPlanChoices(StringRef name, PlanChoiceFactory factory);

/// The family registered as `name`, if any.
std::optional<PlanChoiceFactory> lookupPlanChoices(StringRef name);

/// The names of the families registered, sorted.
std::vector<std::string> getPlanChoiceNames();

/// Bytes of a statically shaped tensor, as a double: no shape overflows it
/// (tensorBytes' 64 bits do for the largest).
double bytesAsDouble(RankedTensorType type);

} // namespace mlir::ddp

#endif // DDP_DIALECT_DDP_TRANSFORMS_COSTMODEL_H
