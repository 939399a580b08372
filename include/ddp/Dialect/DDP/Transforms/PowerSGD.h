//===- PowerSGD.h - PowerSGD's rewrite of one gradient bucket ---*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// PyTorch's powerSGD_hook as a rewrite of one gradient ddp.allreduce at a
// time, through a rewriter (PowerSGDRewriter), and as a CompressionScheme
// (PowerSGDScheme) that applyCompressionScheme applies like any other:
// insert-powersgd takes every bucket at one rank (or those its buckets=
// filter names), or in a planned module the buckets ddp-plan's cost model
// chose, each at its own rank. The sequence it emits is in PowerSGD.cpp's
// header and docs/ir-design.md.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_TRANSFORMS_POWERSGD_H
#define DDP_DIALECT_DDP_TRANSFORMS_POWERSGD_H

#include "ddp/Dialect/DDP/Transforms/BucketCompression.h"
#include "ddp/Dialect/DDP/Transforms/CostModel.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

#include <cstdint>
#include <memory>

namespace mlir::ddp {

/// The options of PowerSGD's rewrite that insert-powersgd and the
/// ddp-compress pipeline both have, under the same member names: whoever
/// hands them on copies them with `X(name)` = `to.name = from.name;`
/// (ddp-plan has only `minCompressionRate`, for its predictions).
#define DDP_POWERSGD_SHARED_OPTIONS(X)                                         \
  X(minCompressionRate)                                                        \
  X(startIter)                                                                 \
  X(errorFeedback)                                                             \
  X(warmStart)                                                                 \
  X(orthogonalizationEpsilon)                                                  \
  X(seed)

/// What rewriting one bucket made.
struct PowerSGDRewrite {
  /// Every collective the rewrite created, in the order it created them:
  /// the P and Q allreduces, the start and the wait of the uncompressed
  /// tensors' allreduce, the warm-up branch's plain allreduce, and the
  /// allreduce of tensors no matrix view fits (each with a remark). A
  /// caller that sends the bucket narrow (ddp-plan's "+fp16") narrows
  /// these and nothing else.
  SmallVector<Operation *> collectives;
  /// Tensors compressed and sent as they are (the per-tensor rule).
  unsigned compressed = 0, uncompressed = 0;
  /// Tensors PowerSGD cannot take (dynamic, not float, no elements, 0-d),
  /// split off into a plain allreduce.
  unsigned skipped = 0;
  /// Elements before and after compression (layerwise: of each tensor;
  /// batched: of each bucket's square matrix).
  int64_t numelBefore = 0, numelAfter = 0;
};

/// Rewrites gradient buckets of one module with PowerSGD. Holds what the
/// rewrites of one module share: the step counter of each function, the
/// numbering of states and random streams, the gradients' names seen. The
/// module is not changed before the first rewrite.
class PowerSGDRewriter {
public:
  /// `options` as insert-powersgd's (checked already; `rank` and
  /// `bucketCapMb` are not used: each rewrite names its rank, and buckets
  /// are the caller's). `passName` starts remarks and warnings.
  PowerSGDRewriter(ModuleOp module, const InsertPowerSGDOptions &options,
                   StringRef passName);
  ~PowerSGDRewriter();

  /// Fails, with an error at `bucket`, if batched mode's square matrix for
  /// it would have more elements than a 64-bit size holds. Check every
  /// bucket before rewriting any, so that a refused module is unchanged.
  LogicalResult checkBatchable(AllReduceOp bucket) const;

  /// Replaces `bucket` (a ddp.allreduce with role `gradient` inside a
  /// function) by PowerSGD at `rank` (>= 1). A bucket with nothing worth
  /// compressing keeps its allreduce, with role `uncompressed`.
  PowerSGDRewrite rewrite(RewriterBase &rewriter, AllReduceOp bucket,
                          unsigned rank);

private:
  class Impl;
  std::unique_ptr<Impl> impl;
};

/// PowerSGD as a compression scheme: each bucket rewritten by one
/// PowerSGDRewriter per application (made by `initialize`), at the rank of
/// the options, or at the rank and narrow type of the decision ddp-plan
/// made for it (`setDecision`). Unlike the flat schemes it compresses
/// gradient by gradient (PyTorch's per-tensor rule), names its states after
/// the gradients (`ddp.q.<name>`), and runs over the bucket's group (the
/// node, or the leaders across nodes, in a two-level allreduce).
class PowerSGDScheme : public CompressionScheme {
public:
  /// `options` as insert-powersgd's, checked already (`bucketCapMb` and
  /// `planned` are the pass's); `passName` starts remarks and warnings.
  PowerSGDScheme(const InsertPowerSGDOptions &options, StringRef passName);
  ~PowerSGDScheme() override;

  /// "powersgd" (kPowerSGDDecision).
  StringRef getName() const override;
  /// `{rank = R : i64}`, as the decision of a bucket ddp-plan planned.
  DictionaryAttr getOptions(MLIRContext *context) const override;
  LogicalResult initialize(ModuleOp module) override;
  /// A bucket must be in a function (its step counter is the function's);
  /// in batched mode its square matrix must fit a 64-bit size.
  LogicalResult check(AllReduceOp allreduce) override;
  FailureOr<unsigned> rewrite(CompressionRewriter &rewriter,
                              AllReduceOp allreduce) override;

  /// Rewrites `bucket` (in the next application; the decision is used
  /// once) at `rank` instead of the options' rank, and sends
  /// its collectives in `narrow` where that is not null (ddp-plan's
  /// "+fp16"; the narrowing is this scheme's, not insert-fp16-compression's,
  /// which would narrow the whole function).
  void setDecision(AllReduceOp bucket, unsigned rank, FloatType narrow);

  /// What every rewrite of this application made, summed (insert-powersgd's
  /// statistics); `collectives` is left empty.
  const PowerSGDRewrite &getTotals() const { return totals; }

private:
  InsertPowerSGDOptions options;
  std::string passName;
  std::unique_ptr<PowerSGDRewriter> rewriter;
  llvm::DenseMap<Operation *, std::pair<unsigned, FloatType>> decisions;
  PowerSGDRewrite totals;
};

/// ddp-plan's "powersgd-r<rank>", and with `narrow` (f16)
/// "powersgd-r<rank>+fp16": PowerSGD at `rank`, its collectives then sent in
/// `narrow`, as --insert-powersgd --insert-fp16-compression sends them. Its
/// decision is `#ddp.compression<"powersgd", {rank = R : i64[, narrow =
/// f16]}>`, which insert-powersgd honours. The model follows
/// insert-powersgd's per-tensor rule (`minCompressionRate`) and its order
/// of collectives and kernels.
std::shared_ptr<PlanChoice> makePowerSGDPlanChoice(unsigned rank,
                                                   FloatType narrow,
                                                   double minCompressionRate);

/// ddp-plan's `powersgd` (and with `narrow`, `powersgd+fp16`) family of
/// choices: one PowerSGD choice per rank of `plan.ranks` at least
/// `plan.minRank`, or, with `options` "rank=R", the one at rank R (which
/// must not be below `plan.minRank` either). Fails, saying why in `why`,
/// where the options are not that or no rank is left.
FailureOr<SmallVector<std::shared_ptr<PlanChoice>>>
makePowerSGDPlanChoices(StringRef options, const PlanChoiceOptions &plan,
                        FloatType narrow, std::string &why);

/// The largest rank ddp-plan plans and a PowerSGD decision may hold.
inline constexpr unsigned kMaxPlannedPowerSGDRank = INT32_MAX;

/// The name of PowerSGD's decisions (`ddp.planned`).
inline constexpr llvm::StringLiteral kPowerSGDDecision = "powersgd";

/// The rank and narrow type (null: none) of a PowerSGD decision on
/// `bucket`; an error at `bucket` if it is not one ddp-plan writes.
FailureOr<std::pair<unsigned, FloatType>>
parsePowerSGDDecision(AllReduceOp bucket, CompressionAttr decision);

} // namespace mlir::ddp

#endif // DDP_DIALECT_DDP_TRANSFORMS_POWERSGD_H
