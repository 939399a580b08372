//===- InsertPowerSGD.cpp - PowerSGD low-rank gradient compression --------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Rewrites each gradient allreduce bucket into PyTorch's powerSGD_hook
// sequence (docs/ir-design.md shows the IR):
//
//   step < start-iter: the plain mean (role warmup);
//   otherwise:
//     start the allreduce of the uncompressed tensors (overlaps the rest)
//     Q = orthogonalize(warm start ? last Q : random, or random on the
//         first compressed step)
//     M = G + E                       (error feedback)
//     P = M Q;  allreduce-sum(P);  P = orthogonalize(P)
//     Q = M^T P;  allreduce-mean(Q)
//     M_hat = P Q^T;  E = M - M_hat   (error feedback)
//     wait for the uncompressed tensors
//
// All P's of a bucket travel in one allreduce, all Q's in another. Ops are
// emitted one per tensor; ddp-fuse-kernels merges them into fused
// multi-tensor kernels.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <limits>

namespace mlir::ddp {
#define GEN_PASS_DEF_INSERTPOWERSGD
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

//===----------------------------------------------------------------------===//
// Views of gradients as matrices
//===----------------------------------------------------------------------===//

/// PyTorch's view of a gradient as a matrix: shape[0] x prod(shape[1:]).
static RankedTensorType matrixViewType(RankedTensorType type) {
  int64_t rows = type.getDimSize(0);
  int64_t cols = rows == 0 ? 0 : type.getNumElements() / rows;
  return RankedTensorType::get({rows, cols}, type.getElementType());
}

/// Reassociation between `type` (rank >= 1) and its 2-D view: dims 1.. fold
/// into the columns; a 1-D tensor gains a unit column.
static SmallVector<ReassociationIndices> matrixReassociation(int64_t rank) {
  if (rank == 1)
    return {{0, 1}};
  ReassociationIndices cols;
  for (int64_t d = 1; d < rank; ++d)
    cols.push_back(d);
  return {{0}, cols};
}

static Value toMatrix(OpBuilder &b, Location loc, Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  RankedTensorType matrix = matrixViewType(type);
  if (type.getRank() == 2)
    return tensor;
  if (type.getRank() == 1)
    return tensor::ExpandShapeOp::create(b, loc, matrix, tensor,
                                         matrixReassociation(1));
  return tensor::CollapseShapeOp::create(b, loc, matrix, tensor,
                                         matrixReassociation(type.getRank()));
}

static Value fromMatrix(OpBuilder &b, Location loc, Value matrix,
                        RankedTensorType type) {
  if (type.getRank() == 2)
    return matrix;
  if (type.getRank() == 1)
    return tensor::CollapseShapeOp::create(b, loc, type, matrix,
                                           matrixReassociation(1));
  return tensor::ExpandShapeOp::create(b, loc, type, matrix,
                                       matrixReassociation(type.getRank()));
}

/// The smallest side s with s * s >= n.
/// The smallest side with side * side >= n (n >= 0), without overflow: the
/// double estimate is corrected by comparisons that divide instead of
/// multiplying (side * side of a large side used to wrap and loop forever).
static int64_t ceilSqrt(int64_t n) {
  if (n <= 1)
    return n;
  int64_t side = int64_t(std::sqrt(double(n)));
  // side * side < n  <=>  side < ceil(n / side), computed without n + s
  auto below = [n](int64_t s) { return s < n / s + (n % s != 0); };
  while (side > 1 && !below(side - 1))
    --side;
  while (below(side))
    ++side;
  return side;
}

/// PowerSGD estimates the mean; a `sum` bucket is scaled back by W.
static Value scaleForKind(OpBuilder &b, Location loc, ReductionKind kind,
                          Value mean) {
  if (kind == ReductionKind::mean)
    return mean;
  return ScaleOp::create(b, loc, ValueRange{mean}, WorldScale::world_size)
      .getResult(0);
}

//===----------------------------------------------------------------------===//
// The rewrite
//===----------------------------------------------------------------------===//

namespace {
/// One matrix PowerSGD compresses: a gradient's view, or a whole bucket.
struct Compressed {
  Value matrix;
  int64_t rank;
  /// Where its per-tensor ops say they come from: the gradient's own
  /// location where the bucket's has one per tensor, so that a fused op's
  /// location lists its tensors' names in order (runtime messages name
  /// tensor #i by it).
  Location loc;
  /// What its states are named after: the gradient value's name location
  /// (an argument's `loc("fc1.weight")`), else `loc`; a location without a
  /// name gives numbered states.
  Location nameLoc;
};

/// Input `i`'s own location in a bucket whose fused location has one per
/// input (what ddp-bucketize makes); else the bucket's.
static Location tensorLoc(AllReduceOp op, unsigned i) {
  if (auto fused = dyn_cast<FusedLoc>(op.getLoc()))
    if (fused.getLocations().size() == op.getNumOperands())
      return fused.getLocations()[i];
  return op.getLoc();
}

struct InsertPowerSGDPass
    : public PassWithOptionNames<
          ddp::impl::InsertPowerSGDBase<InsertPowerSGDPass>> {
  using Base::Base;
  InsertPowerSGDPass(const InsertPowerSGDOptions &options,
                     PowerSGDRankSelector selector)
      : Base(options), selector(std::move(selector)) {}

  void runOnOperation() override;

protected:
  ArrayRef<OptionAlias> getOptionAliases() const override {
    return powerSGDOptionAliases();
  }

private:
  LogicalResult validateOptions();
  /// Fails, with a located error, if batched mode's square matrix for `op`
  /// would have more elements than int64 holds.
  LogicalResult checkBatchable(AllReduceOp op);
  void rewriteBucket(AllReduceOp op, FunctionOpInterface function);
  /// Emits the compressed path for `matrices`; returns the reconstructions.
  SmallVector<Value> emitPowerSGD(OpBuilder &b, Location loc,
                                  FunctionOpInterface function,
                                  ArrayRef<Compressed> matrices);
  SmallVector<Value> emitLayerwise(OpBuilder &b, AllReduceOp op,
                                   FunctionOpInterface function,
                                   ArrayRef<unsigned> compressed,
                                   ArrayRef<unsigned> uncompressed);
  SmallVector<Value> emitBatched(OpBuilder &b, AllReduceOp op,
                                 FunctionOpInterface function);
  Value getStep(FunctionOpInterface function);
  /// A state named ddp.<kind>.<gradientName> when it is given, else
  /// ddp.<kind>.<function>[.<id>].
  StateOp createState(FunctionOpInterface function, StringRef kind, Type type,
                      std::optional<unsigned> id = std::nullopt,
                      StringRef gradientName = "");
  /// The name the states of the gradient at `loc` take: its name location
  /// made a symbol's, with ".<k>" for the k-th repetition in the module
  /// (with a warning: such states are told apart by order only); empty
  /// if it has no name.
  std::string stateNameOf(Location loc);
  Value constantI64(OpBuilder &b, Location loc, int64_t value) {
    return arith::ConstantIntOp::create(b, loc, value, 64);
  }

  /// What one run of the pass keeps track of.
  struct RunState {
    explicit RunState(ModuleOp module) : symbols(module) {}
    SymbolTable symbols;
    /// The step counter value loaded at each function's entry, and the
    /// start-iter constant next to it.
    llvm::DenseMap<Operation *, Value> steps, startIters;
    /// Numbers the compressed matrices of each function; a matrix's Q and
    /// error states share its number.
    llvm::DenseMap<Operation *, unsigned> matricesPerFunction;
    /// The next ddp.random_normal stream; unique in the module.
    int64_t nextStream = 0;
    /// How many compressed gradients so far were named N (after the
    /// characters a symbol cannot hold were replaced).
    llvm::StringMap<unsigned> gradientNames;
  };
  RunState *run = nullptr;
  /// Which buckets to compress, at which rank (ddp-plan's way in); unset:
  /// every bucket, at `rank`.
  PowerSGDRankSelector selector;
  /// The rank of the bucket being rewritten.
  unsigned bucketRank = 0;
};
} // namespace

std::unique_ptr<Pass>
mlir::ddp::createInsertPowerSGD(const InsertPowerSGDOptions &options,
                                PowerSGDRankSelector selector) {
  return std::make_unique<InsertPowerSGDPass>(options, std::move(selector));
}

LogicalResult InsertPowerSGDPass::validateOptions() {
  return checkPowerSGDOptions(
      rank, minCompressionRate, startIter, orthogonalizationEpsilon,
      bucketCapMb, [&](const Twine &message) {
        emitPassError(getOperation(), getArgument()) << message;
      });
}

void InsertPowerSGDPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(validateOptions()))
    return signalPassFailure();

  // The rewrite below sees ddp.allreduce buckets only; a module as users
  // write it gets them from the passes that make them.
  OpPassManager prepare(ModuleOp::getOperationName());
  addBucketingPasses(prepare, bucketCapMb);
  if (failed(runPipeline(prepare, module)))
    return signalPassFailure();

  RunState state(module);
  run = &state;
  module.walk([&](RandomNormalOp op) {
    state.nextStream = std::max(state.nextStream, int64_t(op.getStream()) + 1);
  });

  struct Bucket {
    AllReduceOp op;
    FunctionOpInterface function;
    unsigned rank;
  };
  SmallVector<Bucket> buckets;
  module.walk([&](AllReduceOp op) {
    if (op.getRole() != CommRole::gradient)
      return;
    unsigned chosenRank = rank;
    if (selector) {
      std::optional<unsigned> chosen = selector(op);
      if (!chosen)
        return;
      chosenRank = *chosen;
    }
    auto function = op->getParentOfType<FunctionOpInterface>();
    if (!function) {
      op.emitRemark("insert-powersgd leaves an allreduce outside any "
                    "function as it is");
      return;
    }
    buckets.push_back({op, function, chosenRank});
  });
  // Batched mode packs each bucket into one square matrix: its size must be
  // representable before anything is rewritten.
  bool representable = true;
  if (mode == PowerSGDMode::batched)
    for (Bucket &bucket : buckets)
      representable &= succeeded(checkBatchable(bucket.op));
  if (!representable) {
    run = nullptr;
    return signalPassFailure();
  }
  for (Bucket &bucket : buckets) {
    bucketRank = bucket.rank;
    rewriteBucket(bucket.op, bucket.function);
  }
  run = nullptr;
}

LogicalResult InsertPowerSGDPass::checkBatchable(AllReduceOp op) {
  llvm::MapVector<Type, int64_t> lengths;
  for (Type type : op.getInputs().getTypes()) {
    auto tensor = cast<RankedTensorType>(type);
    if (!tensor.hasStaticShape())
      continue; // rejected later, with its own message
    int64_t &length = lengths[tensor.getElementType()];
    int64_t square = 0;
    bool tooLarge = llvm::AddOverflow(length, tensor.getNumElements(), length);
    if (!tooLarge) {
      // The order matters: the side comes from the new length.
      int64_t side = ceilSqrt(length);
      tooLarge = llvm::MulOverflow(side, side, square) ||
                 square > std::numeric_limits<int64_t>::max() / 8;
    }
    if (tooLarge)
      return op.emitError()
             << getArgument()
             << ": batched mode packs this bucket's tensors into one square "
                "matrix, which would have more elements than a 64-bit size "
                "holds; use mode=layerwise or a smaller bucket-cap-mb";
  }
  return success();
}

Value InsertPowerSGDPass::getStep(FunctionOpInterface function) {
  Value &step = run->steps[function];
  if (step)
    return step;
  StateOp state =
      createState(function, "step", IntegerType::get(&getContext(), 64));
  // For hosts: the steps before start-iter are warm-up (ddp-run says so).
  getContext().getLoadedDialect<DDPDialect>()->getStartIterAttrHelper().setAttr(
      state, IntegerAttr::get(IntegerType::get(&getContext(), 64),
                              int64_t(startIter)));
  Block &entry = function.getFunctionBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  Location loc = function.getLoc();
  step = StateLoadOp::create(b, loc, state.getType(), state.getSymName());
  Value next = arith::AddIOp::create(b, loc, step, constantI64(b, loc, 1));
  StateStoreOp::create(b, loc, next, state.getSymName());
  if (startIter > 0 || warmStart)
    run->startIters[function] = constantI64(b, loc, startIter);
  return step;
}

/// A gradient's name made a symbol's: its name location, with characters
/// other than letters, digits and `_.$-` replaced by `_`; empty if the
/// location has no name.
static std::string symbolNameOf(Location loc) {
  auto named = dyn_cast<NameLoc>(loc);
  if (!named || named.getName().empty())
    return "";
  return cleanStateNamePart(named.getName());
}

std::string InsertPowerSGDPass::stateNameOf(Location loc) {
  std::string name = symbolNameOf(loc);
  if (name.empty())
    return name;
  unsigned &seen = run->gradientNames[name];
  if (seen > 0) {
    emitWarning(loc) << getArgument() << ": another compressed gradient is "
                     << "also named '" << name << "' (after replacing the "
                     << "characters a symbol cannot hold): its states are "
                     << "ddp.q." << name << "." << seen << " and ddp.error."
                     << name << "." << seen
                     << ", told apart by order only; give the gradients "
                        "distinct names so that checkpoints follow them";
    name += "." + std::to_string(seen);
  }
  ++seen;
  return name;
}

StateOp InsertPowerSGDPass::createState(FunctionOpInterface function,
                                        StringRef kind, Type type,
                                        std::optional<unsigned> id,
                                        StringRef gradientName) {
  // Named after the gradient when it has a name (the state then survives a
  // reordering of the tensors: checkpoints, --dump-state, --set-state),
  // else after the function and the tensor's number in it. A symbol that
  // exists already (a module compressed twice) is made unique by the
  // symbol table.
  std::string name = ("ddp." + kind + ".").str();
  if (!gradientName.empty())
    name += gradientName.str();
  else {
    name += cleanStateNamePart(function.getName());
    if (id)
      name += "." + std::to_string(*id);
  }
  OpBuilder b(function);
  auto state = StateOp::create(b, function.getLoc(), name, type);
  run->symbols.insert(state, Block::iterator(function));
  return state;
}

void InsertPowerSGDPass::rewriteBucket(AllReduceOp op,
                                       FunctionOpInterface function) {
  IRRewriter rewriter(op->getContext());
  op = splitOffRejected(rewriter, op, getArgument(), whyNotCompressible);
  if (!op)
    return;

  // PyTorch's per-tensor rule, and its element counts.
  SmallVector<unsigned> compressed, uncompressed;
  for (auto [i, type] : llvm::enumerate(op.getInputs().getTypes())) {
    RankedTensorType matrix = matrixViewType(cast<RankedTensorType>(type));
    int64_t n = matrix.getDimSize(0), m = matrix.getDimSize(1);
    int64_t r = std::min<int64_t>({n, m, int64_t(bucketRank)});
    // Batched mode compresses the whole bucket, but for empty tensors.
    // In doubles: the verifier bounds n * m, not (n + m) * r.
    bool compress =
        mode == PowerSGDMode::batched
            ? n * m > 0
            : (double(n) + double(m)) * double(r) * minCompressionRate <
                  double(n) * double(m);
    (compress ? compressed : uncompressed).push_back(i);
    if (mode == PowerSGDMode::layerwise) {
      numelBefore += n * m;
      numelAfter += compress ? (n + m) * r : n * m;
    }
  }
  numCompressed += compressed.size();
  numUncompressed += uncompressed.size();
  if (compressed.empty()) {
    // Nothing worth compressing: a plain averaged allreduce, marked so that
    // a later run of this pass does not look at it again.
    op.setRole(CommRole::uncompressed);
    return;
  }
  if (batchSameShape) {
    // Same shapes next to each other, in order of first appearance.
    llvm::DenseMap<Type, unsigned> firstSeen;
    for (unsigned i : compressed)
      firstSeen.try_emplace(op.getInputs()[i].getType(), firstSeen.size());
    llvm::stable_sort(compressed, [&](unsigned a, unsigned b) {
      return firstSeen[op.getInputs()[a].getType()] <
             firstSeen[op.getInputs()[b].getType()];
    });
  }

  getStep(function);
  rewriter.setInsertionPoint(op);
  OpBuilder &b = rewriter;
  Location loc = op.getLoc();
  auto emitCompressedPath = [&](OpBuilder &builder) {
    return mode == PowerSGDMode::batched
               ? emitBatched(builder, op, function)
               : emitLayerwise(builder, op, function, compressed, uncompressed);
  };
  SmallVector<Value> results;
  if (startIter > 0) {
    Value warm =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                              run->steps[function], run->startIters[function]);
    auto ifOp = scf::IfOp::create(b, loc, op.getResultTypes(), warm,
                                  /*withElseRegion=*/true);
    OpBuilder thenBuilder = ifOp.getThenBodyBuilder();
    auto plain = AllReduceOp::create(thenBuilder, loc, op.getKind(),
                                     op.getInputs(), CommRole::warmup);
    scf::YieldOp::create(thenBuilder, loc, plain.getResults());
    OpBuilder elseBuilder = ifOp.getElseBodyBuilder();
    scf::YieldOp::create(elseBuilder, loc, emitCompressedPath(elseBuilder));
    results = ifOp.getResults();
  } else {
    results = emitCompressedPath(b);
  }
  rewriter.replaceOp(op, results);
}

SmallVector<Value> InsertPowerSGDPass::emitLayerwise(
    OpBuilder &b, AllReduceOp op, FunctionOpInterface function,
    ArrayRef<unsigned> compressed, ArrayRef<unsigned> uncompressed) {
  Location loc = op.getLoc();
  SmallVector<Value> results(op.getNumResults());
  // Started first so that it overlaps the compression compute.
  AllReduceStartOp request;
  if (!uncompressed.empty()) {
    SmallVector<Value> inputs;
    SmallVector<Location> locs;
    for (unsigned i : uncompressed) {
      inputs.push_back(op.getInputs()[i]);
      locs.push_back(tensorLoc(op, i));
    }
    request =
        AllReduceStartOp::create(b, FusedLoc::get(b.getContext(), locs),
                                 op.getKind(), inputs, CommRole::uncompressed);
  }
  SmallVector<Compressed> matrices;
  for (unsigned i : compressed) {
    Value matrix = toMatrix(b, op.getInputs()[i].getLoc(), op.getInputs()[i]);
    auto type = cast<RankedTensorType>(matrix.getType());
    Location nameLoc = op.getInputs()[i].getLoc();
    if (!isa<NameLoc>(nameLoc))
      nameLoc = tensorLoc(op, i);
    matrices.push_back(
        {matrix,
         std::min<int64_t>(
             {type.getDimSize(0), type.getDimSize(1), int64_t(bucketRank)}),
         tensorLoc(op, i), nameLoc});
  }
  SmallVector<Value> reconstructions = emitPowerSGD(b, loc, function, matrices);
  for (auto [k, i] : llvm::enumerate(compressed))
    results[i] = scaleForKind(
        b, loc, op.getKind(),
        fromMatrix(b, loc, reconstructions[k],
                   cast<RankedTensorType>(op.getResult(i).getType())));
  if (request) {
    auto wait = WaitOp::create(b, request.getLoc(), request.getRequest());
    for (auto [k, i] : llvm::enumerate(uncompressed))
      results[i] = wait.getResult(k);
  }
  return results;
}

SmallVector<Value>
InsertPowerSGDPass::emitBatched(OpBuilder &b, AllReduceOp op,
                                FunctionOpInterface function) {
  Location loc = op.getLoc();
  // One square matrix per element type (a bucket normally has one). A
  // tensor without elements has nothing to communicate: its result is the
  // input.
  SmallVector<Value> results(op.getNumResults());
  llvm::MapVector<Type, SmallVector<unsigned>> byElement;
  for (auto [i, input] : llvm::enumerate(op.getInputs())) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getNumElements() == 0)
      results[i] = input;
    else
      byElement[type.getElementType()].push_back(i);
  }

  SmallVector<Compressed> matrices;
  SmallVector<int64_t> sides;
  for (auto &[element, indices] : byElement) {
    SmallVector<Value> pieces;
    int64_t length = 0;
    for (unsigned i : indices) {
      pieces.push_back(flattenTensor(b, loc, op.getInputs()[i]));
      length +=
          cast<RankedTensorType>(op.getInputs()[i].getType()).getNumElements();
    }
    // checkBatchable made sure that neither the sum nor the square wraps.
    int64_t side = ceilSqrt(length);
    int64_t padding = side * side - length;
    if (padding > 0) {
      auto padType = RankedTensorType::get({padding}, element);
      pieces.push_back(arith::ConstantOp::create(
          b, loc, padType,
          DenseElementsAttr::get(padType, b.getZeroAttr(element))));
    }
    // Always a concat, even of one piece: it marks the batched bucket.
    Value flat = tensor::ConcatOp::create(b, loc, /*dim=*/0, pieces);
    auto squareType = RankedTensorType::get({side, side}, element);
    Value square = tensor::ExpandShapeOp::create(
        b, loc, squareType, flat, ArrayRef<ReassociationIndices>{{0, 1}});
    int64_t r = std::min<int64_t>(side, int64_t(bucketRank));
    matrices.push_back({square, r, loc, loc});
    sides.push_back(side);
    numelBefore += length;
    numelAfter += 2 * side * r;
  }

  SmallVector<Value> reconstructions =
      matrices.empty() ? SmallVector<Value>()
                       : emitPowerSGD(b, loc, function, matrices);
  for (auto [k, entry] : llvm::enumerate(byElement)) {
    int64_t side = sides[k];
    Value flat = tensor::CollapseShapeOp::create(
        b, loc, RankedTensorType::get({side * side}, entry.first),
        reconstructions[k], ArrayRef<ReassociationIndices>{{0, 1}});
    int64_t offset = 0;
    for (unsigned i : entry.second) {
      auto type = cast<RankedTensorType>(op.getResult(i).getType());
      int64_t size = type.getNumElements();
      auto slice = tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get({size}, entry.first), flat,
          ArrayRef<OpFoldResult>{b.getIndexAttr(offset)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(size)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
      results[i] = scaleForKind(b, loc, op.getKind(),
                                unflattenTensor(b, loc, slice, type));
      offset += size;
    }
  }
  return results;
}

SmallVector<Value>
InsertPowerSGDPass::emitPowerSGD(OpBuilder &b, Location loc,
                                 FunctionOpInterface function,
                                 ArrayRef<Compressed> matrices) {
  Value step = run->steps[function];
  // Per-tensor ops carry their tensor's location, collectives all of them.
  SmallVector<Location> locs;
  SmallVector<std::string> names;
  for (const Compressed &c : matrices) {
    locs.push_back(c.loc);
    // Only when there are states to name (no warnings about names that
    // name nothing).
    names.push_back(warmStart || errorFeedback ? stateNameOf(c.nameLoc)
                                               : std::string());
  }
  Location bucketLoc = FusedLoc::get(b.getContext(), locs);
  SmallVector<Type> qTypes;
  for (const Compressed &c : matrices) {
    auto type = cast<RankedTensorType>(c.matrix.getType());
    qTypes.push_back(RankedTensorType::get({type.getDimSize(1), c.rank},
                                           type.getElementType()));
  }
  SmallVector<int64_t> streams;
  SmallVector<unsigned> ids;
  for (size_t i = 0; i < matrices.size(); ++i) {
    streams.push_back(run->nextStream++);
    ids.push_back(run->matricesPerFunction[function]++);
  }
  auto drawQs = [&](OpBuilder &builder) {
    SmallVector<Value> qs;
    for (auto [type, stream, at] : llvm::zip(qTypes, streams, locs))
      qs.push_back(RandomNormalOp::create(builder, at, type, step,
                                          int64_t(seed), stream));
    return qs;
  };

  // Whether a Q can be used: finite and not all zero. Q is averaged over
  // the ranks, so every rank decides the same.
  auto usable = [&](OpBuilder &builder, Location at, Value q) {
    auto flags = InspectOp::create(builder, at, q);
    return arith::AndIOp::create(builder, at, flags.getFinite(),
                                 flags.getNonzero())
        .getResult();
  };

  // Q: random on the first compressed step (or always without warm start),
  // else last step's; orthogonalized before use either way. A stored Q that
  // is zero or not finite (from a checkpoint or --set-state; the step never
  // stores one) is drawn again, with this step's numbers: PyTorch keeps a
  // zero Q for good, and the tensor is never sent again.
  SmallVector<Value> initialQs;
  SmallVector<StateOp> qStates;
  if (warmStart) {
    for (auto [type, id, name] : llvm::zip(qTypes, ids, names))
      qStates.push_back(createState(function, "q", type, id, name));
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, step,
                                        run->startIters[function]);
    auto ifOp = scf::IfOp::create(b, loc, qTypes, first, /*withElse=*/true);
    OpBuilder thenBuilder = ifOp.getThenBodyBuilder();
    scf::YieldOp::create(thenBuilder, loc, drawQs(thenBuilder));
    OpBuilder elseBuilder = ifOp.getElseBodyBuilder();
    SmallVector<Value> loaded;
    for (auto [state, stream, at] : llvm::zip(qStates, streams, locs)) {
      Value q = StateLoadOp::create(elseBuilder, at, state.getType(),
                                    state.getSymName());
      auto redraw = scf::IfOp::create(elseBuilder, at, q.getType(),
                                      usable(elseBuilder, at, q),
                                      /*withElse=*/true);
      OpBuilder keep = redraw.getThenBodyBuilder();
      scf::YieldOp::create(keep, at, q);
      OpBuilder fresh = redraw.getElseBodyBuilder();
      scf::YieldOp::create(fresh, at,
                           RandomNormalOp::create(fresh, at, q.getType(), step,
                                                  int64_t(seed), stream)
                               .getResult());
      loaded.push_back(redraw.getResult(0));
    }
    scf::YieldOp::create(elseBuilder, loc, loaded);
    initialQs = ifOp.getResults();
  } else {
    initialQs = drawQs(b);
  }
  auto epsilon = b.getF64FloatAttr(orthogonalizationEpsilon);
  SmallVector<Value> qs;
  for (auto [q, at] : llvm::zip(initialQs, locs))
    qs.push_back(
        OrthogonalizeOp::create(b, at, ValueRange{q}, epsilon).getResult(0));

  // M = G + E.
  SmallVector<Value> ms;
  SmallVector<StateOp> errorStates;
  for (auto [c, id, name] : llvm::zip(matrices, ids, names)) {
    if (!errorFeedback) {
      ms.push_back(c.matrix);
      continue;
    }
    StateOp state =
        createState(function, "error", c.matrix.getType(), id, name);
    errorStates.push_back(state);
    Value residual =
        StateLoadOp::create(b, c.loc, state.getType(), state.getSymName());
    ms.push_back(AddResidualOp::create(b, c.loc, ValueRange{c.matrix},
                                       ValueRange{residual})
                     .getResult(0));
  }

  // P = M Q, summed over ranks, orthogonalized.
  SmallVector<Value> ps;
  for (auto [m, q, at] : llvm::zip(ms, qs, locs))
    ps.push_back(
        ProjectOp::create(b, at, ValueRange{m}, ValueRange{q}).getResult(0));
  auto pSum = AllReduceOp::create(b, bucketLoc, ReductionKind::sum, ps,
                                  CommRole::powersgd_p);
  SmallVector<Value> orthoPs;
  for (auto [p, at] : llvm::zip(pSum.getResults(), locs))
    orthoPs.push_back(
        OrthogonalizeOp::create(b, at, ValueRange{p}, epsilon).getResult(0));

  // Q = M^T P, averaged over ranks.
  SmallVector<Value> newQs;
  for (auto [m, p, at] : llvm::zip(ms, orthoPs, locs))
    newQs.push_back(BackprojectOp::create(b, at, ValueRange{m}, ValueRange{p})
                        .getResult(0));
  auto qMean = AllReduceOp::create(b, bucketLoc, ReductionKind::mean, newQs,
                                   CommRole::powersgd_q);

  // M_hat = P Q^T; E = M - M_hat. The state is written after all of them
  // so that each step stays one multi-tensor op after fusion.
  SmallVector<Value> reconstructions, residuals;
  for (auto [p, q, at] : llvm::zip(orthoPs, qMean.getResults(), locs))
    reconstructions.push_back(
        ReconstructOp::create(b, at, ValueRange{p}, ValueRange{q})
            .getResult(0));
  if (errorFeedback)
    for (auto [m, mHat, at] : llvm::zip(ms, reconstructions, locs))
      residuals.push_back(
          UpdateResidualOp::create(b, at, ValueRange{m}, ValueRange{mHat})
              .getResult(0));
  for (auto [residual, state, at] : llvm::zip(residuals, errorStates, locs))
    StateStoreOp::create(b, at, residual, state.getSymName());
  // A new Q is kept only if it can be used: one that is not finite (a NaN
  // or Inf in some rank's gradient; ddp.reconstruct keeps E clean and
  // reports it) or zero (a zero gradient and error) leaves the last one.
  if (warmStart)
    for (auto [q, state, at] : llvm::zip(qMean.getResults(), qStates, locs)) {
      auto store = scf::IfOp::create(b, at, TypeRange(), usable(b, at, q),
                                     /*withElse=*/false);
      OpBuilder then = store.getThenBodyBuilder();
      StateStoreOp::create(then, at, q, state.getSymName());
    }
  return reconstructions;
}
