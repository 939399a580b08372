//===- Utils.h - helpers shared by the ddp passes ---------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDP_DIALECT_DDP_TRANSFORMS_UTILS_H
#define DDP_DIALECT_DDP_TRANSFORMS_UTILS_H

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/IR/GradientNames.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mlir::linalg {
class GenericOp;
class LinalgOp;
} // namespace mlir::linalg

namespace mlir::ddp {

/// `op` as a linalg.generic (a named op generalized) with its parallel loops
/// first and its other loops after them, each group in its order (a
/// column's sum over rows: the columns first), at the rewriter's insertion
/// point. Each output element's reduction keeps its order. Fails (and
/// leaves `op`) where a named op cannot be generalized; a generic that
/// cannot be interchanged is returned as it is (its iterators say).
FailureOr<linalg::GenericOp> parallelLoopsFirst(RewriterBase &rewriter,
                                                linalg::LinalgOp op);

/// The memory effects of `op` itself (not of the ops it contains) that may
/// conflict with other ops: every effect but an allocation (a fresh buffer
/// conflicts with nothing before it). None for ops whose effects are those
/// of their regions and for terminators; std::nullopt when `op` does not say
/// (no MemoryEffectOpInterface): it may do anything.
std::optional<SmallVector<MemoryEffects::EffectInstance>>
conflictingEffects(Operation *op);

/// Why a tensor of `type` cannot be compressed (dynamic shape, non-float
/// elements, 0-d), or an empty string when it can.
std::string whyNotCompressible(Type type);

/// Moves the inputs of `op` that `whyNot` rejects into a plain allreduce of
/// their own (same kind and role), with a remark naming `what` and the
/// reason. Returns the allreduce of the accepted inputs, or null if none is
/// accepted (then `op` is left as it was). Changes the IR through
/// `rewriter`.
AllReduceOp splitOffRejected(RewriterBase &rewriter, AllReduceOp op,
                             StringRef what,
                             function_ref<std::string(Type)> whyNot);

/// Size in bytes of a statically shaped tensor type.
uint64_t tensorBytes(RankedTensorType type);

/// The factors a mean over `group` divides by and a sum is scaled back by:
/// the world size, or the number of nodes across nodes. (Passes that scale
/// never see a `node` mean: only sums and means over the network are
/// compressed.)
WorldScale inverseMembersScale(CommGroup group);
WorldScale membersScale(CommGroup group);

/// The configuration that decides which ops may become one multi-tensor op:
/// ops merge only with ops of the same name and the same key. `std::nullopt`
/// means the op takes no part.
using MergeKeyFn = function_ref<std::optional<Attribute>(Operation *)>;

/// How ops are grouped by size (ddp-bucketize's buckets).
struct GroupSizes {
  /// The cap of every group after the first of its key.
  uint64_t capBytes = 0;
  /// The cap of the first group of each key (0: `capBytes`).
  uint64_t firstCapBytes = 0;
  /// DDP's rule: a group is closed once it reaches its cap (its last
  /// member may take it over). Otherwise a group is closed before a member
  /// would take it over the cap (a larger op forms a group of its own).
  bool closeOnceReached = false;
};

/// Splits the ops of `block` that `keyOf` selects into groups that can each
/// be replaced by one op at the position of the group's last member: members
/// are in block order, share a key, and no result of a member is used before
/// the last member. When `bytesOf` is given, groups are also closed by size
/// (`sizes`).
SmallVector<SmallVector<Operation *>>
findMergeableGroups(Block &block, MergeKeyFn keyOf,
                    function_ref<uint64_t(Operation *)> bytesOf = nullptr,
                    GroupSizes sizes = {});

/// Replaces a group found by findMergeableGroups (ops of one kind that
/// implement MultiTensorOpInterface) with one op of that kind at the
/// position of its last member, whose every operand and result group is the
/// members' groups one after the other. Returns the new op.
Operation *mergeMultiTensorOps(RewriterBase &rewriter,
                               ArrayRef<Operation *> group);

/// How ddp-bucketize assigns gradients to buckets.
struct BucketPolicy {
  uint64_t capBytes = 25ull << 20;
  uint64_t firstCapBytes = 1ull << 20;
  /// Gradients ready together (arguments) in reverse order, as DDP assumes
  /// the backward pass produces them; otherwise in program order.
  bool reverseTies = true;
  /// DDP's rule: a bucket is closed once it reaches its cap; otherwise
  /// before a tensor would take it over.
  bool closeOnceReached = true;
};

/// Merges consecutive gradient ddp.allreduce ops of the same reduction kind
/// and element type under `root` into buckets (`policy`). Returns the number
/// of multi-tensor buckets formed.
unsigned bucketizeAllReduces(Operation *root, const BucketPolicy &policy);

/// Reports an invalid pass option or an I/O failure of a pass: an error at
/// `root`'s location, starting "`pass`: " (nothing when `pass` is empty),
/// without dumping the whole module as an op diagnostic would.
InFlightDiagnostic emitPassError(Operation *root, StringRef pass);

/// `value` the way a person typed it: shortest of %g.
std::string formatNumber(double value);

/// The values insert-powersgd (and ddp-compress, whichever passes it
/// runs) accepts; calls `fail` with a message naming the first bad one.
LogicalResult checkPowerSGDOptions(unsigned rank, double minCompressionRate,
                                   int64_t startIter, double epsilon,
                                   double bucketCapMb,
                                   function_ref<void(const Twine &)> fail);

/// Turns a module as users write it into the gradient buckets insert-powersgd
/// rewrites and ddp-plan plans: records the gradients' names, converts
/// whole-grid shard.all_reduces into ddp.allreduce (as convert-shard-to-ddp),
/// then merges each function's gradient allreduces into buckets of at most
/// `bucketCapMb` MiB by DDP's rule (as ddp-bucketize with its defaults;
/// nothing is merged if it is 0). Fails with an error where a shard op
/// cannot be converted.
LogicalResult formGradientBuckets(ModuleOp module, double bucketCapMb);

/// PyTorch's name of an option (`matrix-approximation-rank`) and ours
/// (`rank`): both are accepted.
struct OptionAlias {
  StringRef pytorch;
  StringRef ours;
};

/// PyTorch's names of PowerSGD's options (PowerSGDState's arguments, in
/// kebab case) and ours, for insert-powersgd and ddp-compress: each takes
/// those whose name of ours it has.
ArrayRef<OptionAlias> powerSGDOptionAliases();

/// Rewrites the textual options of a pass or pipeline (`key=value`
/// separated by spaces; a value may hold spaces inside quotes or braces)
/// with PyTorch's names (`aliases`, those whose name of ours is in `known`)
/// replaced by ours. One option given twice (also under both its names),
/// unless it is one of `lists` (list options take several), is answered
/// through `errorHandler`; `owner` (the pass) starts the message.
FailureOr<std::string>
respellOptions(StringRef owner, StringRef text, ArrayRef<std::string> known,
               ArrayRef<std::string> lists, ArrayRef<OptionAlias> aliases,
               function_ref<LogicalResult(const Twine &)> errorHandler);

/// MLIR's option parser's `message` for `owner`, made a user's: an
/// unknown name gets the nearest valid one among `known` and the aliases
/// (or the list of options).
std::string explainOptionError(StringRef owner, StringRef message,
                               ArrayRef<std::string> known,
                               ArrayRef<OptionAlias> aliases);

/// The option names of a pass as printed in a pipeline
/// (`name{key=value ...}`), or of printed pipeline options (`{...}`): all
/// but list options without a value, which print nothing.
std::vector<std::string> printedOptionNames(StringRef printed);

/// Every option name of the pass or pipeline options `option` belongs to
/// (its LLVM subcommand's), sorted; with `listsOnly`, the list options'.
std::vector<std::string> optionNamesBeside(const llvm::cl::Option &option,
                                           bool listsOnly = false);

/// A pass whose textual options accept PyTorch's names beside ours
/// (`getOptionAliases`) and answer an unknown name with the nearest valid
/// one: `struct MyPass : PassWithOptionNames<impl::MyPassBase<MyPass>>`.
template <typename BaseT> class PassWithOptionNames : public BaseT {
public:
  using Base = PassWithOptionNames;
  using BaseT::BaseT;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    std::vector<std::string> known, lists;
    if (const llvm::cl::Option *option = getAnyOption()) {
      known = optionNamesBeside(*option);
      lists = optionNamesBeside(*option, /*listsOnly=*/true);
    } else {
      std::string printed;
      llvm::raw_string_ostream os(printed);
      this->printAsTextualPipeline(os);
      known = printedOptionNames(printed);
    }
    FailureOr<std::string> spelled =
        respellOptions(this->getArgument(), options, known, lists,
                       getOptionAliases(), errorHandler);
    if (failed(spelled))
      return failure();
    return BaseT::initializeOptions(*spelled, [&](const Twine &message) {
      return errorHandler(explainOptionError(this->getArgument(), message.str(),
                                             known, getOptionAliases()));
    });
  }

protected:
  /// PyTorch's names of this pass's options.
  virtual ArrayRef<OptionAlias> getOptionAliases() const { return {}; }
  /// One option of the pass, through which every option name is found. A
  /// pass with list options gives one: without a value they do not print,
  /// the names would otherwise come from the printed pass, and a list
  /// option may be given twice.
  virtual const llvm::cl::Option *getAnyOption() const { return nullptr; }
};

/// The location ddp-plan gives a bucket it chose to send plain: `location`
/// fused with plannedPlainTag, so that the compression report tells it
/// from what PowerSGD left uncompressed.
Location plannedPlainLoc(Location location);
StringAttr plannedPlainTag(MLIRContext *context);

/// The file at `path`, read whole if it holds at most `limit` bytes; a
/// longer one (or an endless one: /dev/zero, a pipe) is refused after
/// `limit` + 1 bytes, with an error ("it is longer than ...", "cannot read
/// it: ...") for the caller to put after the file's name; `what`
/// ("profile") is what the file should be.
FailureOr<std::unique_ptr<llvm::MemoryBuffer>>
readBoundedFile(StringRef path, size_t limit, StringRef what,
                std::string &error);

/// An error if the JSON `text` nests arrays and objects deeper than
/// `maxDepth` (llvm::json::parse recurses once per level: 50,000 `[`
/// overflow the stack); "" if not.
std::string checkJsonNesting(StringRef text, unsigned maxDepth);

/// `text` made fit for a state's name (which becomes a checkpoint key and,
/// through {name}, a file name): characters other than letters, digits and
/// `_.$-` become `_`. Passes that name states after a function or a
/// gradient use it; distinct names that clean to one are told apart by the
/// symbol table's unique suffix.
std::string cleanStateNamePart(StringRef text);

/// Renders a location for people: a name, file:line:col, or "?".
std::string describeLocation(Location loc);

/// Where a value comes from, for diagnostics and reports: the name of its
/// location, or "@func:%argN" for an unnamed function argument.
std::string describeValue(Value value);

/// The inputs of a reduction within a node (a `group node` ddp.allreduce,
/// or the wait of a started one), or none if `op` is not one: what a
/// two-level allreduce carries across nodes is its inputs'.
std::optional<ValueRange> getNodeReductionInputs(Operation *op);

/// The gradient a reduction within a node reduced into `value`, or `value`
/// itself: what the cross-node part of a two-level allreduce carries,
/// under the gradient's name.
Value throughNodeReduction(Value value);

/// `value` (a statically shaped tensor) as a 1-D tensor of its elements in
/// row-major order: a collapse_shape (an expand_shape for 0-d), or `value`
/// itself when it is 1-D. What ddp.flatten does to each gradient.
Value flattenTensor(OpBuilder &b, Location loc, Value value);

/// A 1-D tensor as `type` (the inverse of flattenTensor).
Value unflattenTensor(OpBuilder &b, Location loc, Value flat,
                      RankedTensorType type);

/// PyTorch's view of a gradient (rank >= 1) as a matrix, PowerSGD's:
/// shape[0] x prod(shape[1:]).
RankedTensorType matrixViewType(RankedTensorType type);

/// `value` reshaped to `type`, where one of the two is a gradient's type and
/// the other its matrixViewType: a collapse_shape or an expand_shape, or
/// `value` itself when the gradient is 2-D.
Value reshapeMatrixView(OpBuilder &b, Location loc, Value value,
                        RankedTensorType type);

/// Factories by name, for the extension points that take them (registered
/// compression schemes, ddp-plan's families of choices): safe to use from
/// several threads (a plugin may register while passes run), a name added
/// again replaces the earlier factory.
template <typename Factory> class NamedRegistry {
public:
  void add(StringRef name, Factory factory) {
    std::lock_guard<std::mutex> lock(mutex);
    factories[name.str()] = std::move(factory);
  }
  std::optional<Factory> lookup(StringRef name) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = factories.find(name.str());
    if (it == factories.end())
      return std::nullopt;
    return it->second;
  }
  /// The names, sorted.
  std::vector<std::string> getNames() {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<std::string> names;
    for (const auto &entry : factories)
      names.push_back(entry.first);
    return names;
  }

private:
  std::mutex mutex;
  std::map<std::string, Factory> factories;
};

} // namespace mlir::ddp

#endif // DDP_DIALECT_DDP_TRANSFORMS_UTILS_H
