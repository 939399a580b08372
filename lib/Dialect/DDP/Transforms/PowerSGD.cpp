//===- PowerSGD.cpp - PowerSGD's rewrite of one gradient bucket -----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Rewrites one gradient allreduce bucket into PyTorch's powerSGD_hook
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
// multi-tensor kernels. Every op is created through the caller's rewriter.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/PowerSGD.h"

#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::ddp;

//===----------------------------------------------------------------------===//
// Views of gradients as matrices
//===----------------------------------------------------------------------===//

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

/// PowerSGD estimates the mean over `group`'s members; a `sum` bucket is
/// scaled back by their number.
static Value scaleForKind(OpBuilder &b, Location loc, ReductionKind kind,
                          CommGroup group, Value mean) {
  if (kind == ReductionKind::mean)
    return mean;
  return ScaleOp::create(b, loc, ValueRange{mean}, membersScale(group))
      .getResult(0);
}

//===----------------------------------------------------------------------===//
// The rewrite
//===----------------------------------------------------------------------===//

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
Location tensorLoc(AllReduceOp op, unsigned i) {
  if (auto fused = dyn_cast<FusedLoc>(op.getLoc()))
    if (fused.getLocations().size() == op.getNumOperands())
      return fused.getLocations()[i];
  return op.getLoc();
}

/// Forwards to the rewriter's own listener, and records the collectives
/// created (and forgets those erased again).
struct CollectiveRecorder : RewriterBase::ForwardingListener {
  CollectiveRecorder(OpBuilder::Listener *next,
                     SmallVectorImpl<Operation *> &collectives)
      : ForwardingListener(next), collectives(collectives) {}

  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint previous) override {
    if (isa<AllReduceOp, AllReduceStartOp, WaitOp>(op) && !previous.isSet())
      collectives.push_back(op);
    ForwardingListener::notifyOperationInserted(op, previous);
  }
  void notifyOperationErased(Operation *op) override {
    llvm::erase(collectives, op);
    ForwardingListener::notifyOperationErased(op);
  }

  SmallVectorImpl<Operation *> &collectives;
};
} // namespace

class PowerSGDRewriter::Impl {
public:
  Impl(ModuleOp module, const InsertPowerSGDOptions &options,
       StringRef passName)
      : options(options), passName(passName.str()), symbols(module) {
    module.walk([&](RandomNormalOp op) {
      nextStream = std::max(nextStream, int64_t(op.getStream()) + 1);
    });
  }

  LogicalResult checkBatchable(AllReduceOp op) const;
  PowerSGDRewrite rewrite(RewriterBase &rewriter, AllReduceOp op,
                          unsigned rank);

private:
  /// Emits the compressed path for `matrices`; returns the reconstructions.
  /// P and Q are exchanged over `group`.
  SmallVector<Value> emitPowerSGD(RewriterBase &b, Location loc,
                                  FunctionOpInterface function,
                                  ArrayRef<Compressed> matrices,
                                  CommGroup group);
  SmallVector<Value> emitLayerwise(RewriterBase &b, AllReduceOp op,
                                   FunctionOpInterface function,
                                   ArrayRef<unsigned> compressed,
                                   ArrayRef<unsigned> uncompressed);
  SmallVector<Value> emitBatched(RewriterBase &b, AllReduceOp op,
                                 FunctionOpInterface function);
  Value getStep(RewriterBase &b, FunctionOpInterface function);
  /// A state named ddp.<kind>.<gradientName> when it is given, else
  /// ddp.<kind>.<function>[.<id>].
  StateOp createState(RewriterBase &b, FunctionOpInterface function,
                      StringRef kind, Type type,
                      std::optional<unsigned> id = std::nullopt,
                      StringRef gradientName = "");
  /// The name the states of the gradient at `loc` take: its name location
  /// made a symbol's, with ".<k>" for the k-th repetition in the module
  /// (with a warning: such states are told apart by order only); empty
  /// if it has no name.
  std::string stateNameOf(Location loc);

  InsertPowerSGDOptions options;
  std::string passName;
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
  /// The rank of the bucket being rewritten, and what its rewrite made.
  unsigned bucketRank = 0;
  PowerSGDRewrite *made = nullptr;
};

PowerSGDRewriter::PowerSGDRewriter(ModuleOp module,
                                   const InsertPowerSGDOptions &options,
                                   StringRef passName)
    : impl(std::make_unique<Impl>(module, options, passName)) {}

PowerSGDRewriter::~PowerSGDRewriter() = default;

LogicalResult PowerSGDRewriter::checkBatchable(AllReduceOp bucket) const {
  return impl->checkBatchable(bucket);
}

PowerSGDRewrite PowerSGDRewriter::rewrite(RewriterBase &rewriter,
                                          AllReduceOp bucket, unsigned rank) {
  return impl->rewrite(rewriter, bucket, rank);
}

LogicalResult PowerSGDRewriter::Impl::checkBatchable(AllReduceOp op) const {
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
             << passName
             << ": batched mode packs this bucket's tensors into one square "
                "matrix, which would have more elements than a 64-bit size "
                "holds; use mode=layerwise or a smaller bucket-cap-mb";
  }
  return success();
}

Value PowerSGDRewriter::Impl::getStep(RewriterBase &b,
                                      FunctionOpInterface function) {
  Value &step = steps[function];
  if (step)
    return step;
  MLIRContext *context = b.getContext();
  StateOp state =
      createState(b, function, "step", IntegerType::get(context, 64));
  // For hosts: the steps before start-iter are warm-up (ddp-run says so).
  context->getLoadedDialect<DDPDialect>()->getStartIterAttrHelper().setAttr(
      state, IntegerAttr::get(IntegerType::get(context, 64),
                              int64_t(options.startIter)));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&function.getFunctionBody().front());
  Location loc = function.getLoc();
  step = StateLoadOp::create(b, loc, state.getType(), state.getSymName());
  Value one = arith::ConstantIntOp::create(b, loc, 1, 64);
  Value next = arith::AddIOp::create(b, loc, step, one);
  StateStoreOp::create(b, loc, next, state.getSymName());
  if (options.startIter > 0 || options.warmStart)
    startIters[function] =
        arith::ConstantIntOp::create(b, loc, options.startIter, 64);
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

std::string PowerSGDRewriter::Impl::stateNameOf(Location loc) {
  std::string name = symbolNameOf(loc);
  if (name.empty())
    return name;
  unsigned &seen = gradientNames[name];
  if (seen > 0) {
    emitWarning(loc) << passName << ": another compressed gradient is "
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

StateOp PowerSGDRewriter::Impl::createState(RewriterBase &b,
                                            FunctionOpInterface function,
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
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(function);
  auto state = StateOp::create(b, function.getLoc(), name, type);
  symbols.insert(state);
  return state;
}

PowerSGDRewrite PowerSGDRewriter::Impl::rewrite(RewriterBase &rewriter,
                                                AllReduceOp op, unsigned rank) {
  PowerSGDRewrite result;
  auto function = op->getParentOfType<FunctionOpInterface>();
  assert(function && "a PowerSGD bucket is inside a function");
  assert(rank >= 1 && "PowerSGD ranks are >= 1");
  // Every op below is created through `rewriter`: the recorder sees it.
  OpBuilder::InsertionGuard guard(rewriter);
  OpBuilder::Listener *listener = rewriter.getListener();
  CollectiveRecorder recorder(listener, result.collectives);
  rewriter.setListener(&recorder);
  llvm::scope_exit restore([&] { rewriter.setListener(listener); });
  bucketRank = rank;
  made = &result;

  result.skipped = llvm::count_if(op.getInputs().getTypes(), [](Type type) {
    return !whyNotCompressible(type).empty();
  });
  op = splitOffRejected(rewriter, op, passName, whyNotCompressible);
  if (!op)
    return result;

  // PyTorch's per-tensor rule, and its element counts.
  bool batched = options.mode == PowerSGDMode::batched;
  SmallVector<unsigned> compressed, uncompressed;
  for (auto [i, type] : llvm::enumerate(op.getInputs().getTypes())) {
    RankedTensorType matrix = matrixViewType(cast<RankedTensorType>(type));
    int64_t n = matrix.getDimSize(0), m = matrix.getDimSize(1);
    int64_t r = std::min<int64_t>({n, m, int64_t(rank)});
    // Batched mode compresses the whole bucket, but for empty tensors.
    // In doubles: the verifier bounds n * m, not (n + m) * r.
    bool compress = batched ? n * m > 0
                            : (double(n) + double(m)) * double(r) *
                                      options.minCompressionRate <
                                  double(n) * double(m);
    (compress ? compressed : uncompressed).push_back(i);
    if (!batched) {
      result.numelBefore += n * m;
      result.numelAfter += compress ? (n + m) * r : n * m;
    }
  }
  result.compressed = compressed.size();
  result.uncompressed = uncompressed.size();
  if (compressed.empty()) {
    // Nothing worth compressing: a plain averaged allreduce, marked so that
    // a later rewrite does not look at it again.
    rewriter.modifyOpInPlace(op, [&] { op.setRole(CommRole::uncompressed); });
    return result;
  }
  if (options.batchSameShape) {
    // Same shapes next to each other, in order of first appearance.
    llvm::DenseMap<Type, unsigned> firstSeen;
    for (unsigned i : compressed)
      firstSeen.try_emplace(op.getInputs()[i].getType(), firstSeen.size());
    llvm::stable_sort(compressed, [&](unsigned a, unsigned b) {
      return firstSeen[op.getInputs()[a].getType()] <
             firstSeen[op.getInputs()[b].getType()];
    });
  }

  getStep(rewriter, function);
  rewriter.setInsertionPoint(op);
  Location loc = op.getLoc();
  auto emitCompressedPath = [&] {
    return batched ? emitBatched(rewriter, op, function)
                   : emitLayerwise(rewriter, op, function, compressed,
                                   uncompressed);
  };
  SmallVector<Value> results;
  if (options.startIter > 0) {
    Value warm = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::slt,
                                       steps[function], startIters[function]);
    auto ifOp = scf::IfOp::create(rewriter, loc, op.getResultTypes(), warm,
                                  /*withElseRegion=*/true);
    rewriter.setInsertionPointToEnd(ifOp.thenBlock());
    auto plain =
        AllReduceOp::create(rewriter, loc, op.getKind(), op.getInputs(),
                            CommRole::warmup, op.getGroup());
    scf::YieldOp::create(rewriter, loc, plain.getResults());
    rewriter.setInsertionPointToEnd(ifOp.elseBlock());
    scf::YieldOp::create(rewriter, loc, emitCompressedPath());
    results = ifOp.getResults();
  } else {
    results = emitCompressedPath();
  }
  rewriter.replaceOp(op, results);
  return result;
}

SmallVector<Value> PowerSGDRewriter::Impl::emitLayerwise(
    RewriterBase &b, AllReduceOp op, FunctionOpInterface function,
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
    request = AllReduceStartOp::create(b, FusedLoc::get(b.getContext(), locs),
                                       op.getKind(), inputs,
                                       CommRole::uncompressed, op.getGroup());
  }
  SmallVector<Compressed> matrices;
  for (unsigned i : compressed) {
    Value input = op.getInputs()[i];
    Value matrix = reshapeMatrixView(
        b, input.getLoc(), input,
        matrixViewType(cast<RankedTensorType>(input.getType())));
    auto type = cast<RankedTensorType>(matrix.getType());
    // Across nodes, the states are named after the gradient the node's
    // reduction carries.
    Location nameLoc = throughNodeReduction(input).getLoc();
    if (!isa<NameLoc>(nameLoc))
      nameLoc = tensorLoc(op, i);
    matrices.push_back(
        {matrix,
         std::min<int64_t>(
             {type.getDimSize(0), type.getDimSize(1), int64_t(bucketRank)}),
         tensorLoc(op, i), nameLoc});
  }
  SmallVector<Value> reconstructions =
      emitPowerSGD(b, loc, function, matrices, op.getGroup());
  for (auto [k, i] : llvm::enumerate(compressed))
    results[i] = scaleForKind(
        b, loc, op.getKind(), op.getGroup(),
        reshapeMatrixView(b, loc, reconstructions[k],
                          cast<RankedTensorType>(op.getResult(i).getType())));
  if (request) {
    auto wait = WaitOp::create(b, request.getLoc(), request.getRequest());
    for (auto [k, i] : llvm::enumerate(uncompressed))
      results[i] = wait.getResult(k);
  }
  return results;
}

SmallVector<Value>
PowerSGDRewriter::Impl::emitBatched(RewriterBase &b, AllReduceOp op,
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
    made->numelBefore += length;
    made->numelAfter += 2 * side * r;
  }

  SmallVector<Value> reconstructions =
      matrices.empty()
          ? SmallVector<Value>()
          : emitPowerSGD(b, loc, function, matrices, op.getGroup());
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
      results[i] = scaleForKind(b, loc, op.getKind(), op.getGroup(),
                                unflattenTensor(b, loc, slice, type));
      offset += size;
    }
  }
  return results;
}

SmallVector<Value> PowerSGDRewriter::Impl::emitPowerSGD(
    RewriterBase &b, Location loc, FunctionOpInterface function,
    ArrayRef<Compressed> matrices, CommGroup group) {
  Value step = steps[function];
  bool warmStart = options.warmStart, errorFeedback = options.errorFeedback;
  int64_t seed = options.seed;
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
    streams.push_back(nextStream++);
    ids.push_back(matricesPerFunction[function]++);
  }
  auto drawQs = [&] {
    SmallVector<Value> qs;
    for (auto [type, stream, at] : llvm::zip(qTypes, streams, locs))
      qs.push_back(RandomNormalOp::create(b, at, type, step, seed, stream));
    return qs;
  };

  // Whether a Q can be used: finite and not all zero. Q is averaged over
  // the ranks, so every rank decides the same.
  auto usable = [&](Location at, Value q) {
    auto flags = InspectOp::create(b, at, q);
    return arith::AndIOp::create(b, at, flags.getFinite(), flags.getNonzero())
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
      qStates.push_back(createState(b, function, "q", type, id, name));
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, step,
                                        startIters[function]);
    auto ifOp = scf::IfOp::create(b, loc, qTypes, first, /*withElse=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(ifOp.thenBlock());
    scf::YieldOp::create(b, loc, drawQs());
    b.setInsertionPointToEnd(ifOp.elseBlock());
    SmallVector<Value> loaded;
    for (auto [state, stream, at] : llvm::zip(qStates, streams, locs)) {
      Value q = StateLoadOp::create(b, at, state.getType(), state.getSymName());
      auto redraw = scf::IfOp::create(b, at, q.getType(), usable(at, q),
                                      /*withElse=*/true);
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToEnd(redraw.thenBlock());
      scf::YieldOp::create(b, at, q);
      b.setInsertionPointToEnd(redraw.elseBlock());
      scf::YieldOp::create(
          b, at,
          RandomNormalOp::create(b, at, q.getType(), step, seed, stream)
              .getResult());
      loaded.push_back(redraw.getResult(0));
    }
    scf::YieldOp::create(b, loc, loaded);
    initialQs = ifOp.getResults();
  } else {
    initialQs = drawQs();
  }
  auto epsilon = b.getF64FloatAttr(options.orthogonalizationEpsilon);
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
        createState(b, function, "error", c.matrix.getType(), id, name);
    errorStates.push_back(state);
    Value residual =
        StateLoadOp::create(b, c.loc, state.getType(), state.getSymName());
    ms.push_back(AddResidualOp::create(b, c.loc, ValueRange{c.matrix},
                                       ValueRange{residual})
                     .getResult(0));
  }

  // P = M Q, summed over ranks, orthogonalized. The projections name the
  // scheme (the compression report reads it).
  auto scheme = CompressionAttr::get(b.getContext(), kPowerSGDDecision);
  SmallVector<Value> ps;
  for (auto [m, q, at] : llvm::zip(ms, qs, locs))
    ps.push_back(ProjectOp::create(b, at, ValueRange{m}, ValueRange{q}, scheme)
                     .getResult(0));
  auto pSum = AllReduceOp::create(b, bucketLoc, ReductionKind::sum, ps,
                                  CommRole::compressed, group);
  SmallVector<Value> orthoPs;
  for (auto [p, at] : llvm::zip(pSum.getResults(), locs))
    orthoPs.push_back(
        OrthogonalizeOp::create(b, at, ValueRange{p}, epsilon).getResult(0));

  // Q = M^T P, averaged over ranks.
  SmallVector<Value> newQs;
  for (auto [m, p, at] : llvm::zip(ms, orthoPs, locs))
    newQs.push_back(
        BackprojectOp::create(b, at, ValueRange{m}, ValueRange{p}, scheme)
            .getResult(0));
  auto qMean = AllReduceOp::create(b, bucketLoc, ReductionKind::mean, newQs,
                                   CommRole::compressed, group);

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
      auto store = scf::IfOp::create(b, at, TypeRange(), usable(at, q),
                                     /*withElse=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(store.thenYield());
      StateStoreOp::create(b, at, q, state.getSymName());
    }
  return reconstructions;
}
