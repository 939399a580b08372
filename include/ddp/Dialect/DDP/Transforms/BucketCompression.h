//===- BucketCompression.h - gradient compression schemes -------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The extension point for compression schemes. A scheme says how the
// gradients of one bucket (one ddp.allreduce) are averaged over the ranks;
// applyCompressionScheme finds the buckets, lets the scheme rewrite each
// one, and counts what it compressed. Most schemes see a bucket as
// PyTorch's communication hooks do: the gradients flattened into one 1-D
// tensor (GradBucket.buffer()). Such a scheme implements only `reduce`, with
// ddp ops (allreduce, allgather, casts, state) and upstream ops (arith,
// math, linalg, tensor), and the default `rewrite` does the rest: it
// flattens the gradients (ddp.flatten), calls the scheme, splits the result
// back (ddp.unflatten), declares the state the scheme asks for, once per
// bucket, and leaves buckets the scheme refuses as plain allreduces with a
// remark. A scheme that compresses each gradient of a bucket on its own
// (PowerSGD: a matrix per gradient, its states named after the gradient)
// overrides `rewrite` instead. What a scheme emits lowers through
// ddp-lower-to-llvm and runs under ddp-run like the built-in passes, and
// the compression report prints a row per bucket with the scheme's name.
//
// Built on it: insert-powersgd (PowerSGDScheme, PowerSGD.h), ddp-apply-hook
// (a hook written as a function in the module), insert-quantization
// (PyTorch's quantization hooks), insert-topk, insert-noop (noop_hook), and
// schemes from plugins (examples/compression-plugin).
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_TRANSFORMS_BUCKETCOMPRESSION_H
#define DDP_DIALECT_DDP_TRANSFORMS_BUCKETCOMPRESSION_H

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/Transforms/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/Pass.h"

#include "llvm/Support/Regex.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir::ddp {

/// One bucket: the gradients of one ddp.allreduce that share an element type.
struct Bucket {
  /// The function and the allreduce the bucket comes from.
  func::FuncOp function;
  AllReduceOp allreduce;
  /// Its place among the buckets of `function`, in program order.
  unsigned index = 0;
  /// The gradients (operands of `allreduce`) and their names, as the
  /// compression report prints them.
  SmallVector<Value> gradients;
  SmallVector<std::string> names;
  /// The flat bucket: tensor<N x element>.
  RankedTensorType flatType;

  int64_t getNumElements() const { return flatType.getNumElements(); }
  Type getElementType() const { return flatType.getElementType(); }
};

/// What a scheme builds with: an op builder at the bucket's place, and the
/// bucket's own persistent state.
class BucketBuilder : public ImplicitLocOpBuilder {
public:
  BucketBuilder(const Bucket &bucket, Location loc, OpBuilder &builder,
                SymbolTable &symbols);

  const Bucket &getBucket() const { return bucket; }

  /// A ddp.state of `type` that belongs to this bucket alone, named
  /// `<base>.<function>.<bucket index>` (with a suffix if that name is
  /// taken: by another application of a scheme, say); it is zeros before
  /// the first step and is saved with checkpoints. Asking again for one
  /// base and type in this bucket gives the same state.
  FlatSymbolRefAttr getState(StringRef base, Type type);

private:
  const Bucket &bucket;
  SymbolTable &symbols;
  /// The states this bucket declared, by base name and type.
  llvm::DenseMap<std::pair<StringAttr, Type>, FlatSymbolRefAttr> states;
};

class CompressionRewriter;

/// A compression scheme: how the gradients of a bucket are averaged over
/// the ranks.
class CompressionScheme {
public:
  virtual ~CompressionScheme();

  /// The name in remarks and in the compression report's decision column
  /// ("quantize-per-tensor").
  virtual StringRef getName() const = 0;

  /// The options the scheme was applied with, for the IR (ddp.flatten's
  /// #ddp.compression) and the compression report's JSON; none by default.
  virtual DictionaryAttr getOptions(MLIRContext *context) const;

  /// Called once per module before the first bucket (declare what the
  /// scheme shares, check options); may fail with an error emitted.
  virtual LogicalResult initialize(ModuleOp module);

  /// Called for every bucket an application will rewrite before it
  /// rewrites any, so that a scheme that refuses one bucket leaves every
  /// bucket as it was (what `initialize` did stays done). Fails with an
  /// error at the bucket; by default every bucket passes.
  virtual LogicalResult check(AllReduceOp allreduce);

  /// Rewrites one bucket: `allreduce`, a gradient ddp.allreduce, with the
  /// rewriter's insertion point before it. Returns the number of buckets
  /// it compressed (0: `allreduce` is left as it was, or as a plain
  /// allreduce of role `uncompressed`); on failure, emits an error.
  ///
  /// The default is the flat path: one bucket per element type of the
  /// allreduce's static-shaped gradients in a func.func over every rank,
  /// each flattened, reduced by `reduce` (unless `whyNot` refuses it) and
  /// split back, the states it stores guarded against NaN and Inf, its
  /// collectives given the role `compressed`; the rest stays a plain
  /// allreduce. A scheme that compresses gradient by gradient overrides
  /// this instead of `reduce`; so that no other pass takes what it sends
  /// for gradients, the collectives it creates have a role other than
  /// `gradient`.
  virtual FailureOr<unsigned> rewrite(CompressionRewriter &rewriter,
                                      AllReduceOp allreduce);

  /// The flat path: why `bucket` stays a plain allreduce, or "" when the
  /// scheme takes it. By default every bucket is taken.
  virtual std::string whyNot(const Bucket &bucket) const;

  /// The flat path: emits, at the builder's insertion point, the ops that
  /// compute the average over the ranks of the bucket from `flat` (this
  /// rank's values, of the bucket's flat type), and returns that average
  /// (same type). On failure, emit an error. A scheme that overrides
  /// `rewrite` need not implement it (the default is an error).
  virtual FailureOr<Value> reduce(BucketBuilder &builder, Value flat);

  /// The cost hook: the time sending `bucket` this way is predicted to take
  /// among `world` ranks of `profile`'s machine (link and compute, and the
  /// bytes each rank sends), which lets ddp-plan weigh the scheme against
  /// the others. Fails, saying why in `why`, where the scheme has no model
  /// (the default) or the profile lacks a measurement the model needs.
  virtual FailureOr<PlanCost> predict(const MachineProfile &profile,
                                      const BucketShape &bucket, int64_t world,
                                      std::string &why) const;
};

/// The rewriter one application of a scheme rewrites its buckets with,
/// and what those buckets share: the pass that applies the scheme (for
/// messages) and the bucket filter.
class CompressionRewriter : public IRRewriter {
public:
  /// `filter`: the buckets= pattern, checked already ("": every bucket).
  CompressionRewriter(ModuleOp module, StringRef passName, StringRef filter);
  ~CompressionRewriter();

  ModuleOp getModule() const { return module; }
  /// Starts remarks and errors: "insert-topk".
  StringRef getPassName() const { return passName; }
  /// Whether the filter takes a bucket with gradients of these names (one
  /// of them matches).
  bool selects(ArrayRef<std::string> names) const;

private:
  friend class CompressionScheme;
  /// What the flat path keeps between buckets; made at its first bucket.
  struct FlatState;
  FlatState &getFlatState();

  ModuleOp module;
  std::string passName;
  std::optional<llvm::Regex> filter;
  std::unique_ptr<FlatState> flat;
};

/// Makes a scheme from options spelled as its pass's ("ratio=0.01
/// error-feedback=false"; "" for the defaults). Emits an error at `module`
/// and fails where they are not valid; the error says what is wrong with
/// the options, and whoever asked (makePlannableScheme) says who asked.
using SchemeFactory =
    std::function<FailureOr<std::unique_ptr<CompressionScheme>>(
        ModuleOp module, StringRef options)>;

/// Lets ddp-plan choose a scheme with a cost hook: `choices=<name>` or
/// `choices=<name>{<options>}`. The built-in `topk` and `quantize` are
/// registered; a plugin registers its own when it is loaded. A name registered
/// again replaces the earlier factory.
void registerPlannableScheme(StringRef name, SchemeFactory factory);

/// The factory registered as `name`, if any.
std::optional<SchemeFactory> lookupPlannableScheme(StringRef name);

/// The names registered, sorted.
std::vector<std::string> getPlannableSchemeNames();

/// The scheme registered as `name`, made from `options` by its factory, or
/// failure (and nothing made) if no scheme has that name or the factory
/// refuses the options. Every diagnostic the factory emits is prefixed
/// with `caller` and the choice ("ddp-plan: choices: 'topk{ratio=2}': ..."),
/// so that it says who asked for the scheme, and emitted at `at` where
/// one is given (the bucket a decision names the options of).
FailureOr<std::unique_ptr<CompressionScheme>>
makePlannableScheme(StringRef name, ModuleOp module, StringRef options,
                    StringRef caller, std::optional<Location> at = {});

/// `scheme`, made by the factory registered as `registered` from
/// `options` ("ratio=0.001", or ""), as one of ddp-plan's choices (named
/// "topk{ratio=0.001}", or "topk"): it predicts with the scheme's cost hook,
/// and its decision, `#ddp.compression<"topk", {options = "ratio=0.001"}>`,
/// is what ddp-apply-planned-schemes makes the scheme again from.
std::shared_ptr<PlanChoice>
makeSchemePlanChoice(std::unique_ptr<CompressionScheme> scheme,
                     StringRef registered, StringRef options);

/// Rewrites the given gradient ddp.allreduce ops of one module (each inside
/// a func.func), in order, with `scheme`, as applyCompressionScheme does
/// for a whole module: the way ddp-apply-planned-schemes applies a scheme
/// to the buckets ddp-plan chose it for. Returns the number of buckets
/// compressed.
FailureOr<unsigned> applyCompressionScheme(ArrayRef<AllReduceOp> allreduces,
                                           CompressionScheme &scheme,
                                           StringRef passName);

/// Which buckets a scheme takes: those with a gradient whose name matches
/// `pattern` (an extended regular expression, searched anywhere in the
/// name; empty: every bucket). A flat scheme's bucket is the gradients of
/// one element type in an allreduce; a scheme that overrides `rewrite`
/// takes an allreduce with a matching gradient whole.
struct BucketFilter {
  std::string pattern;
};

/// Rewrites every gradient ddp.allreduce in the functions (func.func) of
/// `module` (whole-grid shard.all_reduce included) that `filter` accepts
/// with `scheme` (a flat scheme: one bucket per element type); `passName`
/// prefixes remarks. Returns the number of buckets the scheme compressed.
FailureOr<unsigned> applyCompressionScheme(ModuleOp module,
                                           CompressionScheme &scheme,
                                           const BucketFilter &filter,
                                           StringRef passName);

/// The same, as a scheme's pass runs it once its options are checked: adds
/// the buckets compressed to the pass's statistic `compressed`.
LogicalResult applyCompressionScheme(ModuleOp module, CompressionScheme &scheme,
                                     const BucketFilter &filter,
                                     StringRef passName,
                                     Pass::Statistic &compressed);

} // namespace mlir::ddp

#endif // DDP_DIALECT_DDP_TRANSFORMS_BUCKETCOMPRESSION_H
