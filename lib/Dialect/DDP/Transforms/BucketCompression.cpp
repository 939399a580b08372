//===- BucketCompression.cpp - applying compression schemes ---------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Finds the buckets of a module (the gradients of each ddp.allreduce) and
// lets a CompressionScheme rewrite each one. Its default rewrite, the flat
// path, takes one bucket per element type, flattens it, lets the scheme
// reduce the flat bucket, and splits the result back. Shape-generic code a
// scheme emits there (a hook written for tensor<?xf32>) is given the
// bucket's static shape where ops allow, by local rewrites on the scheme's
// ops only.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/BucketCompression.h"

#include "ddp/Conversion/ShardToDDP/ShardToDDP.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Regex.h"

using namespace mlir;
using namespace mlir::ddp;

CompressionScheme::~CompressionScheme() = default;

std::string CompressionScheme::whyNot(const Bucket &) const { return ""; }

FailureOr<Value> CompressionScheme::reduce(BucketBuilder &builder, Value) {
  return emitError(builder.getLoc())
         << "the scheme '" << getName()
         << "' implements neither reduce nor rewrite (CompressionScheme)";
}

LogicalResult CompressionScheme::check(AllReduceOp) { return success(); }

DictionaryAttr CompressionScheme::getOptions(MLIRContext *context) const {
  return DictionaryAttr::get(context);
}

LogicalResult CompressionScheme::initialize(ModuleOp) { return success(); }

FailureOr<PlanCost> CompressionScheme::predict(const MachineProfile &,
                                               const BucketShape &, int64_t,
                                               std::string &why) const {
  why = "the scheme has no cost model (CompressionScheme::predict)";
  return failure();
}

BucketBuilder::BucketBuilder(const Bucket &bucket, Location loc,
                             OpBuilder &builder, SymbolTable &symbols)
    : ImplicitLocOpBuilder(loc, builder), bucket(bucket), symbols(symbols) {}

FlatSymbolRefAttr BucketBuilder::getState(StringRef base, Type type) {
  auto key = std::make_pair(StringAttr::get(getContext(), base), type);
  if (FlatSymbolRefAttr known = states.lookup(key))
    return known;
  func::FuncOp function = bucket.function;
  std::string name = (base + "." + cleanStateNamePart(function.getSymName()) +
                      "." + Twine(bucket.index))
                         .str();
  OpBuilder builder(getContext());
  auto module = cast<ModuleOp>(symbols.getOp());
  builder.setInsertionPointToStart(module.getBody());
  auto state = StateOp::create(builder, getLoc(), builder.getStringAttr(name),
                               TypeAttr::get(type));
  // Never another bucket's state: a name already taken (a scheme applied
  // before, a user's state) gets a unique suffix.
  auto symbol = FlatSymbolRefAttr::get(symbols.insert(state));
  states[key] = symbol;
  return symbol;
}

//===----------------------------------------------------------------------===//
// Shape refinement
//===----------------------------------------------------------------------===//

namespace {
/// The static type `value` was cast from (tensor.cast), if any.
RankedTensorType staticSource(Value value) {
  auto cast = value.getDefiningOp<tensor::CastOp>();
  if (!cast)
    return {};
  auto source = dyn_cast<RankedTensorType>(cast.getSource().getType());
  return source && source.hasStaticShape() ? source : RankedTensorType();
}

/// `op` with other operands and result types (attributes and properties
/// as they are).
OperationState withOperands(Operation *op, ValueRange operands,
                            TypeRange types) {
  OperationState state(op->getLoc(), op->getName(), operands, types,
                       llvm::to_vector(op->getDiscardableAttrs()),
                       op->getSuccessors());
  state.propertiesAttr = op->getPropertiesAsAttribute();
  return state;
}

/// Replaces `op` by the same op on `operands` with result `types` (more
/// static), cast back to the old types for its users.
void replaceRefined(PatternRewriter &rewriter, Operation *op,
                    ValueRange operands, TypeRange types) {
  Operation *refined = rewriter.create(withOperands(op, operands, types));
  SmallVector<Value> replacements;
  for (auto [old, now] : llvm::zip(op->getResults(), refined->getResults()))
    replacements.push_back(
        old.getType() == now.getType()
            ? Value(now)
            : tensor::CastOp::create(rewriter, op->getLoc(), old.getType(), now)
                  .getResult());
  rewriter.replaceOp(op, replacements);
}

/// An op whose results have the shape of its tensor operands (elementwise
/// arith/math, ddp.scale/cast/allreduce, ...) and whose operand is a
/// tensor.cast from a static type: the op on the static type, cast back.
/// Upstream's canonicalizations then carry the static type on.
struct RefineFromCast : RewritePattern {
  RefineFromCast(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  static bool takesShapeFromOperands(Operation *op) {
    if (op->hasTrait<OpTrait::Elementwise>())
      return true;
    return isa<CastOp>(op);
  }

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!takesShapeFromOperands(op) || op->getNumRegions() != 0)
      return failure();
    // The static shape, from the first operand cast from one; all dynamic
    // tensor operands must agree with it.
    std::optional<SmallVector<int64_t>> shape;
    for (Value operand : op->getOperands())
      if (RankedTensorType source = staticSource(operand)) {
        shape = llvm::to_vector(source.getShape());
        break;
      }
    if (!shape)
      return failure();
    SmallVector<Value> operands;
    for (Value operand : op->getOperands()) {
      auto type = dyn_cast<RankedTensorType>(operand.getType());
      if (!type) {
        operands.push_back(operand);
        continue;
      }
      if (type.getRank() != int64_t(shape->size()))
        return failure();
      RankedTensorType refined = type.clone(*shape);
      if (!tensor::CastOp::areCastCompatible(type, refined))
        return failure();
      if (RankedTensorType source = staticSource(operand);
          source && source == refined)
        operands.push_back(operand.getDefiningOp<tensor::CastOp>().getSource());
      else if (type == refined)
        operands.push_back(operand);
      else
        operands.push_back(
            tensor::CastOp::create(rewriter, op->getLoc(), refined, operand));
    }
    SmallVector<Type> resultTypes;
    for (Type type : op->getResultTypes()) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (!tensor || tensor.getRank() != int64_t(shape->size()))
        return failure();
      resultTypes.push_back(tensor.clone(*shape));
    }
    if (resultTypes == SmallVector<Type>(op->getResultTypes()))
      return failure();
    replaceRefined(rewriter, op, operands, resultTypes);
    return success();
  }
};

/// A ddp op that infers its result types (allgather, allreduce, scale)
/// whose operand is a tensor.cast from a static type: the op on the cast's
/// source, re-inferred, cast back. Operands may differ in shape.
struct RefineInferredFromCast
    : OpInterfaceRewritePattern<InferTypeOpInterface> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(InferTypeOpInterface op,
                                PatternRewriter &rewriter) const override {
    if (!isa<DDPDialect>(op->getDialect()) || op->getNumRegions() != 0)
      return failure();
    SmallVector<Value> operands(op->getOperands());
    bool refined = false;
    for (Value &operand : operands)
      if (RankedTensorType source = staticSource(operand)) {
        operand = operand.getDefiningOp<tensor::CastOp>().getSource();
        refined = true;
      }
    if (!refined)
      return failure();
    SmallVector<Type> types;
    if (failed(op.inferReturnTypes(
            op->getContext(), op->getLoc(), ValueRange(operands),
            op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
            op->getRegions(), types)))
      return failure();
    for (auto [old, now] : llvm::zip(op->getResultTypes(), types))
      if (!tensor::CastOp::areCastCompatible(old, now))
        return failure();
    replaceRefined(rewriter, op, operands, types);
    return success();
  }
};

FrozenRewritePatternSet refinementPatterns(MLIRContext *context) {
  RewritePatternSet patterns(context);
  patterns.add<RefineFromCast, RefineInferredFromCast>(context);
  for (Dialect *dialect : context->getLoadedDialects())
    dialect->getCanonicalizationPatterns(patterns);
  for (RegisteredOperationName op : context->getRegisteredOperations())
    op.getCanonicalizationPatterns(patterns, context);
  return FrozenRewritePatternSet(std::move(patterns));
}

/// Records the ops a scheme inserts.
struct InsertedOps : OpBuilder::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    ops.push_back(op);
  }
  SmallVector<Operation *> ops;
};
} // namespace

//===----------------------------------------------------------------------===//
// Buckets
//===----------------------------------------------------------------------===//

struct CompressionRewriter::FlatState {
  explicit FlatState(ModuleOp module)
      : symbols(module), patterns(refinementPatterns(module.getContext())) {}

  SymbolTable symbols;
  FrozenRewritePatternSet patterns;
  /// The next bucket index of each function.
  llvm::DenseMap<Operation *, unsigned> nextIndex;
};

CompressionRewriter::CompressionRewriter(ModuleOp module, StringRef passName,
                                         StringRef filter)
    : IRRewriter(module.getContext()), module(module),
      passName(passName.str()) {
  if (!filter.empty())
    this->filter.emplace(filter, llvm::Regex::NoFlags);
}

CompressionRewriter::~CompressionRewriter() = default;

bool CompressionRewriter::selects(ArrayRef<std::string> names) const {
  if (!filter)
    return true;
  return llvm::any_of(names,
                      [&](const std::string &n) { return filter->match(n); });
}

CompressionRewriter::FlatState &CompressionRewriter::getFlatState() {
  // Made at the first flat bucket, after the scheme's initialize (which may
  // take symbols out of the module: a hook).
  if (!flat)
    flat = std::make_unique<FlatState>(module);
  return *flat;
}

/// The names a bucket filter sees of `gradients`, as the compression
/// report prints them: those of static shape (no scheme compresses the
/// others, so a filter that matches only those takes nothing); a two-level
/// allreduce's cross-node part carries the gradients its node part
/// reduced, under their names.
static SmallVector<std::string> gradientNamesOf(ValueRange gradients) {
  SmallVector<std::string> names;
  for (Value value : gradients)
    if (auto type = dyn_cast<RankedTensorType>(value.getType());
        type && type.hasStaticShape())
      names.push_back(describeValue(throughNodeReduction(value)));
  return names;
}

namespace {
/// The inputs of an allreduce with one element type.
struct Group {
  SmallVector<unsigned> indices;
};

/// Applies a scheme to the buckets of one module.
class Applier {
public:
  Applier(ModuleOp module, CompressionScheme &scheme, StringRef passName,
          StringRef filter)
      : module(module), scheme(scheme), rewriter(module, passName, filter),
        filtered(!filter.empty()) {}

  /// Every gradient allreduce of the module's functions.
  LogicalResult run(StringRef filter, unsigned &compressed);
  /// `allreduces` only, in order.
  LogicalResult run(ArrayRef<AllReduceOp> allreduces, unsigned &compressed);

private:
  ModuleOp module;
  CompressionScheme &scheme;
  CompressionRewriter rewriter;
  bool filtered;
  /// Whether the filter took some bucket.
  bool anySelected = false;
};
} // namespace

LogicalResult Applier::run(StringRef filter, unsigned &compressed) {
  SmallVector<AllReduceOp> allreduces;
  SymbolTableCollection symbolTables;
  for (func::FuncOp function : module.getOps<func::FuncOp>()) {
    if (function.isExternal())
      continue;
    // Whole-grid shard.all_reduces are gradients too.
    if (failed(checkShardAllReduces(function, symbolTables)))
      return failure();
    RewritePatternSet shard(module.getContext());
    populateShardToDDPPatterns(shard, symbolTables);
    walkAndApplyPatterns(function, std::move(shard));
    function.walk([&](AllReduceOp op) {
      if (op.isCompressible())
        allreduces.push_back(op);
    });
  }
  if (failed(run(allreduces, compressed)))
    return failure();
  // A pattern that takes nothing is most likely a typo.
  if (filtered && !anySelected)
    emitWarning(module.getLoc())
        << rewriter.getPassName() << ": buckets='" << filter
        << "' matches no gradient's name: no bucket was compressed";
  return success();
}

LogicalResult Applier::run(ArrayRef<AllReduceOp> allreduces,
                           unsigned &compressed) {
  // The buckets the filter takes, all checked before any is rewritten.
  SmallVector<AllReduceOp> selected;
  for (AllReduceOp allreduce : allreduces)
    if (!filtered || rewriter.selects(gradientNamesOf(allreduce.getInputs())))
      selected.push_back(allreduce);
  anySelected |= !selected.empty();
  bool valid = true;
  for (AllReduceOp allreduce : selected)
    valid &= succeeded(scheme.check(allreduce));
  if (!valid)
    return failure();
  for (AllReduceOp allreduce : selected) {
    rewriter.setInsertionPoint(allreduce);
    FailureOr<unsigned> count = scheme.rewrite(rewriter, allreduce);
    if (failed(count))
      return failure();
    compressed += *count;
  }
  return success();
}

/// The non-finite policy of every scheme (docs/runtime.md): a state the
/// scheme stores is never left holding NaN or Inf (from one NaN in a
/// gradient, a sign hook's error feedback would be NaN on every later
/// step): one that is not finite is reset to zeros, and this rank reports
/// it; and an average that is not finite (one NaN spread over a whole
/// quantized bucket, say) is reported, the same on every rank, where the
/// scheme communicates (noop_hook's "average" is the rank's own gradient).
/// Reports go through ddp.report_nonfinite: the host warns, or stops the
/// job with --on-nonfinite=fail. `first` and `unflatten` bound the bucket's
/// ops.
static void guardNonFinite(RewriterBase &rewriter, const Bucket &bucket,
                           StringRef scheme, Operation *first,
                           UnflattenOp unflatten, bool communicates) {
  OpBuilder::InsertionGuard guard(rewriter);
  std::string names = llvm::join(bucket.names, ", ");
  SmallVector<StateStoreOp> stores;
  for (Operation *op = first; op && op != unflatten.getOperation();
       op = op->getNextNode())
    op->walk([&](StateStoreOp store) { stores.push_back(store); });
  for (StateStoreOp store : stores) {
    auto type = dyn_cast<RankedTensorType>(store.getValue().getType());
    if (!type || !type.hasStaticShape() ||
        !isa<FloatType>(type.getElementType()))
      continue;
    Location loc = store.getLoc();
    rewriter.setInsertionPoint(store);
    auto flags = InspectOp::create(rewriter, loc, store.getValue());
    Value zeros = arith::ConstantOp::create(
        rewriter, loc, type,
        DenseElementsAttr::get(
            type, rewriter.getFloatAttr(type.getElementType(), 0.0)));
    Value safe = arith::SelectOp::create(rewriter, loc, flags.getFinite(),
                                         store.getValue(), zeros);
    rewriter.modifyOpInPlace(store,
                             [&] { store.getValueMutable().assign(safe); });
    rewriter.setInsertionPointAfter(store);
    ReportNonFiniteOp::create(
        rewriter, loc, flags.getFinite(),
        ("this rank's state @" + store.getState() + " (" + scheme +
         ", bucket of " + names +
         ") was not finite (NaN or Inf) after the step: reset to zeros")
            .str(),
        /*this_rank_only=*/true);
  }
  if (!communicates)
    return;
  Value mean = unflatten->getOperand(0);
  Location loc = unflatten.getLoc();
  rewriter.setInsertionPoint(unflatten);
  auto flags = InspectOp::create(rewriter, loc, mean);
  ReportNonFiniteOp::create(rewriter, loc, flags.getFinite(),
                            ("non-finite values (NaN or Inf) in the average "
                             "of the bucket of " +
                             names + " (" + scheme +
                             "): this step's output for them is not finite")
                                .str(),
                            /*this_rank_only=*/false);
}

FailureOr<unsigned> CompressionScheme::rewrite(CompressionRewriter &rewriter,
                                               AllReduceOp allreduce) {
  MLIRContext *context = allreduce.getContext();
  StringRef passName = rewriter.getPassName();
  ValueRange inputs = allreduce.getInputs();
  auto function = allreduce->getParentOfType<func::FuncOp>();
  if (!function)
    return allreduce.emitError() << passName << ": the scheme '" << getName()
                                 << "' takes buckets inside a func.func only";
  // A scheme's allgathers span every rank: each node's copy would count
  // once per rank of the node.
  if (allreduce.getGroup() != CommGroup::world)
    return allreduce.emitError()
           << passName << ": the scheme '" << getName()
           << "' gathers over every rank and cannot reduce a bucket "
           << stringifyCommGroup(allreduce.getGroup())
           << "; across nodes, compress with PowerSGD or fp16/bf16, or "
              "leave the bucket plain";
  // One bucket per element type, in order of first appearance.
  llvm::MapVector<Type, Group> groups;
  SmallVector<unsigned> plain;
  for (auto [i, input] : llvm::enumerate(inputs)) {
    auto type = cast<RankedTensorType>(input.getType());
    if (!type.hasStaticShape()) {
      allreduce.emitRemark() << passName << " leaves tensor #" << i << " ("
                             << type << " from " << describeValue(input)
                             << ") as a plain allreduce: its shape is dynamic";
      plain.push_back(i);
      continue;
    }
    groups[type.getElementType()].indices.push_back(i);
  }

  CompressionRewriter::FlatState &state = rewriter.getFlatState();
  rewriter.setInsertionPoint(allreduce);
  unsigned compressed = 0;
  SmallVector<Value> replacements(allreduce->getNumResults());
  bool changed = false;
  for (auto &[element, group] : groups) {
    Bucket bucket;
    bucket.function = function;
    bucket.allreduce = allreduce;
    int64_t total = 0;
    for (unsigned i : group.indices) {
      bucket.gradients.push_back(inputs[i]);
      bucket.names.push_back(describeValue(inputs[i]));
      total += cast<RankedTensorType>(inputs[i].getType()).getNumElements();
    }
    bucket.flatType = RankedTensorType::get({total}, element);
    if (!rewriter.selects(bucket.names)) {
      llvm::append_range(plain, group.indices);
      continue;
    }
    if (std::string why = whyNot(bucket); !why.empty()) {
      allreduce.emitRemark()
          << passName << " leaves a bucket of " << group.indices.size()
          << " tensor(s) of " << element << " ("
          << llvm::join(bucket.names, ", ")
          << ") as a plain allreduce: " << why;
      llvm::append_range(plain, group.indices);
      continue;
    }
    bucket.index = state.nextIndex[function]++;
    Location loc = allreduce.getLoc();
    DictionaryAttr options = getOptions(context);
    Value flat = FlattenOp::create(
        rewriter, loc, bucket.flatType, bucket.gradients,
        CompressionAttr::get(context, getName(),
                             options && !options.empty() ? options
                                                         : DictionaryAttr()));
    CountUncompressedOp::create(rewriter, loc, bucket.getNumElements());
    InsertedOps inserted;
    BucketBuilder builder(bucket, loc, rewriter, state.symbols);
    builder.setListener(&inserted);
    FailureOr<Value> mean = reduce(builder, flat);
    if (failed(mean))
      return failure();
    if (mean->getType() != bucket.flatType)
      return allreduce.emitError()
             << passName << ": the scheme '" << getName() << "' returned "
             << mean->getType() << " for a bucket of type " << bucket.flatType;
    // The scheme's collectives are what the bucket sends (the report and
    // the counters), and not gradients for later passes.
    bool communicates = false;
    for (Operation *op : inserted.ops) {
      if (auto inner = dyn_cast<AllReduceOp>(op))
        inner.setRole(CommRole::compressed);
      else if (auto gather = dyn_cast<AllGatherOp>(op))
        gather.setRole(CommRole::compressed);
      communicates |= isa<AllReduceOp, AllGatherOp>(op);
    }
    // A shape-generic scheme (a hook) gets the bucket's static shapes.
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
    rewriter.setInsertionPoint(allreduce);
    Value result = *mean;
    if (allreduce.getKind() == ReductionKind::sum)
      result = ScaleOp::create(rewriter, loc, ValueRange(result),
                               WorldScale::world_size)
                   .getResult(0);
    SmallVector<Type> types;
    for (unsigned i : group.indices)
      types.push_back(inputs[i].getType());
    auto unflatten = UnflattenOp::create(rewriter, loc, types, result);
    // After the uses of the mean exist: the rewrites keep them up to date.
    (void)applyOpPatternsGreedily(inserted.ops, state.patterns, config);
    // An assertion of the scheme's that the refined shapes make false
    // (a hook returning another size) is an error here, not at run time.
    std::optional<std::string> failedAssertion;
    for (Operation *op = flat.getDefiningOp(); op && op != unflatten;
         op = op->getNextNode())
      op->walk([&](cf::AssertOp assertion) {
        if (matchPattern(assertion.getArg(), m_Zero()))
          failedAssertion = assertion.getMsg().str();
      });
    if (failedAssertion)
      return allreduce.emitError()
             << passName << ": " << *failedAssertion << " (bucket of "
             << llvm::join(bucket.names, ", ") << ")";
    guardNonFinite(rewriter, bucket, getName(), flat.getDefiningOp(), unflatten,
                   communicates);
    for (auto [i, value] : llvm::zip(group.indices, unflatten.getResults()))
      replacements[i] = value;
    ++compressed;
    changed = true;
  }
  if (!changed)
    return 0u;
  if (!plain.empty()) {
    llvm::sort(plain);
    SmallVector<Value> rest;
    for (unsigned i : plain)
      rest.push_back(inputs[i]);
    rewriter.setInsertionPoint(allreduce);
    auto leftover =
        AllReduceOp::create(rewriter, allreduce.getLoc(), allreduce.getKind(),
                            rest, allreduce.getRole(), allreduce.getGroup());
    for (auto [i, value] : llvm::zip(plain, leftover.getResults()))
      replacements[i] = value;
  }
  rewriter.replaceOp(allreduce, replacements);
  return compressed;
}

/// What every application does around `run`: the gradients' names, the
/// scheme's initialize (it may take functions out of the module: a hook),
/// then the buckets.
static FailureOr<unsigned>
applyWith(ModuleOp module, CompressionScheme &scheme, StringRef passName,
          StringRef filter,
          function_ref<LogicalResult(Applier &, unsigned &)> run) {
  recordGradientNames(module);
  if (failed(scheme.initialize(module)))
    return failure();
  Applier applier(module, scheme, passName, filter);
  unsigned compressed = 0;
  if (failed(run(applier, compressed)))
    return failure();
  return compressed;
}

FailureOr<unsigned>
mlir::ddp::applyCompressionScheme(ModuleOp module, CompressionScheme &scheme,
                                  const BucketFilter &filter,
                                  StringRef passName) {
  std::string error;
  if (!filter.pattern.empty() && !llvm::Regex(filter.pattern).isValid(error))
    return emitPassError(module, passName)
           << "buckets='" << filter.pattern
           << "' is not a valid regular expression: " << error;
  if (failed(refusePlannedBuckets(module, passName)))
    return failure();
  return applyWith(module, scheme, passName, filter.pattern,
                   [&](Applier &applier, unsigned &compressed) {
                     return applier.run(filter.pattern, compressed);
                   });
}

LogicalResult mlir::ddp::applyCompressionScheme(ModuleOp module,
                                                CompressionScheme &scheme,
                                                const BucketFilter &filter,
                                                StringRef passName,
                                                Pass::Statistic &compressed) {
  FailureOr<unsigned> count =
      applyCompressionScheme(module, scheme, filter, passName);
  if (failed(count))
    return failure();
  compressed += *count;
  return success();
}

FailureOr<unsigned>
mlir::ddp::applyCompressionScheme(ArrayRef<AllReduceOp> allreduces,
                                  CompressionScheme &scheme,
                                  StringRef passName) {
  if (allreduces.empty())
    return 0u;
  return applyWith(allreduces.front()->getParentOfType<ModuleOp>(), scheme,
                   passName, /*filter=*/"",
                   [&](Applier &applier, unsigned &compressed) {
                     return applier.run(allreduces, compressed);
                   });
}
