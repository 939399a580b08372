//===- CompressionTrace.cpp - what each gradient sends --------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Reads the module's communication as it stands: every element that leaves
// a rank goes through a collective, so the trace walks the collectives,
// follows each operand back through the compression steps to the gradient
// it carries (or to the ddp.flatten of a scheme's bucket), and adds up
// elements and bytes per gradient. The warm-up branch (before a scheme's
// start iteration) is not the steady state and is skipped.
//
//===----------------------------------------------------------------------===//

#include "CompressionTrace.h"

#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::ddp;

static std::string typeName(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

static int64_t numElements(RankedTensorType type) {
  return type.hasStaticShape() ? type.getNumElements() : 0;
}

static int64_t numBytes(RankedTensorType type) {
  return type.hasStaticShape() ? int64_t(tensorBytes(type)) : 0;
}

/// What a reduction within a node reduced into `value`, or null.
static Value nodeInput(Value value) {
  Value gradient = throughNodeReduction(value);
  return gradient == value ? Value() : gradient;
}

/// Follows a communicated value back through the compression steps to the
/// gradient it carries, updating `value`. Returns the tensor.concat that
/// batched PowerSGD built from a whole bucket if the trace ends there.
/// `narrowed`, if given, gets the scheme of a narrowing ddp.cast on the way
/// (the gradient was sent narrow by fp16/bf16 before another scheme took
/// it).
static tensor::ConcatOp traceSource(Value &value,
                                    CompressionAttr *narrowed = nullptr) {
  while (Operation *op = value.getDefiningOp()) {
    unsigned index = cast<OpResult>(value).getResultNumber();
    if (auto cast = dyn_cast<CastOp>(op); cast && narrowed && !*narrowed)
      *narrowed = cast.getSchemeAttr();
    // A compression step computes tensor i from tensor i of its first
    // operand group (the gradient, or a matrix made from it).
    auto step = dyn_cast<MultiTensorOpInterface>(op);
    if (step && isPure(op))
      value = step.getOperandGroup(0)[index % step.getNumTensors()];
    else if (Value reduced = nodeInput(value))
      value = reduced;
    else if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op))
      value = op->getOperand(0);
    else if (auto concat = dyn_cast<tensor::ConcatOp>(op))
      return concat;
    else
      break;
  }
  return nullptr;
}

static ReportRow describeGradient(Value gradient) {
  ReportRow row;
  auto type = cast<RankedTensorType>(gradient.getType());
  row.where = describeValue(gradient);
  row.shape.assign(type.getShape().begin(), type.getShape().end());
  row.dtype = typeName(type.getElementType());
  row.numelBefore = numElements(type);
  row.bytesBefore = numBytes(type);
  return row;
}

static void addNarrowing(ReportRow &row, CompressionAttr narrow,
                         bool oneTensor = false);

/// Adds `type`'s name to a "+"-separated list of types ("f32+i8") unless
/// it is there; an empty list or "-" becomes the name.
static void appendTypeName(std::string &list, Type type) {
  std::string name = typeName(type);
  if (list.empty() || list == "-")
    list = name;
  else if (!llvm::is_contained(llvm::split(list, '+'), name))
    list += "+" + name;
}

/// The element types of `types`, each once, in order: "f32", "f32+f64".
static std::string elementTypeNames(ArrayRef<Type> types) {
  std::string names;
  for (Type type : types)
    appendTypeName(names, type);
  return names;
}

static ReportRow describeBatchedBucket(tensor::ConcatOp concat, Value square) {
  ReportRow row;
  auto squareType = cast<RankedTensorType>(square.getType());
  row.shape.assign(squareType.getShape().begin(), squareType.getShape().end());
  row.dtype = typeName(squareType.getElementType());
  unsigned count = 0;
  std::string names;
  SmallVector<Type> dtypes;
  for (Value piece : concat.getInputs()) {
    if (piece.getDefiningOp<arith::ConstantOp>())
      continue; // zero padding
    Value source = piece;
    CompressionAttr narrowed;
    traceSource(source, &narrowed);
    addNarrowing(row, narrowed, /*oneTensor=*/true);
    auto type = cast<RankedTensorType>(source.getType());
    row.numelBefore += numElements(type);
    row.bytesBefore += numBytes(type);
    dtypes.push_back(type.getElementType());
    names += (count++ ? "," : "") + describeValue(source);
  }
  // The gradients' types (wider than the matrix where fp16/bf16 narrowed
  // them before PowerSGD took them).
  if (!dtypes.empty())
    row.dtype = elementTypeNames(dtypes);
  row.where = "bucket of " + std::to_string(count) + " [" + names + "]";
  row.tensors = count;
  return row;
}

/// The matrix a powersgd P or Q was computed from, for batched buckets.
static Value matrixOf(Value communicated) {
  Value value = communicated;
  while (Operation *op = value.getDefiningOp()) {
    unsigned index = cast<OpResult>(value).getResultNumber();
    if (Value reduced = nodeInput(value))
      value = reduced;
    else if (isa<CastOp, ScaleOp>(op))
      value = op->getOperand(index);
    else if (isa<ProjectOp, BackprojectOp, ProjectResidualOp,
                 BackprojectResidualOp>(op))
      return op->getOperand(index);
    else
      break;
  }
  return value;
}

/// The ddp.flatten a compression scheme's collective operand was computed
/// from (its bucket), found by a search back through the ops that compute
/// it. The search does not go through collectives' results or
/// ddp.unflatten (a later step's gradients may come from an earlier step's
/// reduced bucket), and ops known to lead to no bucket are not searched
/// again.
class BucketFinder {
public:
  FlattenOp find(Value value) {
    SmallVector<Operation *> stack{value.getDefiningOp()};
    llvm::SmallPtrSet<Operation *, 16> seen;
    while (!stack.empty()) {
      Operation *op = stack.pop_back_val();
      if (!op || noBucket.contains(op) || !seen.insert(op).second)
        continue;
      if (auto flatten = dyn_cast<FlattenOp>(op))
        return flatten;
      // A reduction within a node carries its input on (two-level); any
      // other collective's result is another reduction's.
      if (std::optional<ValueRange> inputs = getNodeReductionInputs(op)) {
        for (Value input : *inputs)
          stack.push_back(input.getDefiningOp());
        continue;
      }
      if (isa<AllReduceOp, AllGatherOp, WaitOp, UnflattenOp>(op))
        continue;
      for (Value operand : op->getOperands())
        stack.push_back(operand.getDefiningOp());
      // Values an op's regions use (the branches of an scf.if).
      for (Region &region : op->getRegions())
        region.walk([&](Operation *inner) {
          for (Value operand : inner->getOperands())
            stack.push_back(operand.getDefiningOp());
        });
    }
    noBucket.insert(seen.begin(), seen.end());
    return nullptr;
  }

private:
  llvm::DenseSet<Operation *> noBucket;
};

/// Elements and bytes sent.
struct Amount {
  int64_t numel = 0, bytes = 0;
};

/// What one step sends through the collectives in `amounts`, from the ops
/// of `region`: their sum, except that of ops whose regions are
/// alternatives (scf.if, scf.index_switch: one of them runs per step) the
/// largest counts. `ancestors` holds every op that contains one of them.
static Amount stepAmount(Region &region,
                         const llvm::DenseMap<Operation *, Amount> &amounts,
                         const llvm::DenseSet<Operation *> &ancestors) {
  Amount total;
  for (Block &block : region)
    for (Operation &op : block) {
      if (auto it = amounts.find(&op); it != amounts.end()) {
        total.numel += it->second.numel;
        total.bytes += it->second.bytes;
        continue;
      }
      if (!ancestors.contains(&op))
        continue;
      bool alternatives = isa<scf::IfOp, scf::IndexSwitchOp>(op);
      Amount inner;
      for (Region &nested : op.getRegions()) {
        Amount part = stepAmount(nested, amounts, ancestors);
        if (!alternatives) {
          inner.numel += part.numel;
          inner.bytes += part.bytes;
        } else if (part.bytes > inner.bytes) {
          inner = part;
        }
      }
      total.numel += inner.numel;
      total.bytes += inner.bytes;
    }
  return total;
}

/// Records that what `row` sends was narrowed by `narrow` (a ddp.cast's
/// scheme; null: not narrowed), once per scheme: all its tensors, or, for
/// one gradient of a bucket narrowed before the bucket's scheme took it,
/// `oneTensor`.
static void addNarrowing(ReportRow &row, CompressionAttr narrow,
                         bool oneTensor) {
  if (!narrow)
    return;
  if (!llvm::is_contained(row.narrowings, narrow.getScheme()))
    row.narrowings.push_back(narrow.getScheme().str());
  if (oneTensor)
    ++row.narrowedTensors;
  else
    row.narrowedWhole = true;
}

/// The decision column: the scheme, then how it was narrowed
/// ("powersgd+fp16"); a plain gradient sent narrow is the narrowing's own
/// decision ("fp16").
static void finishDecision(ReportRow &row) {
  for (const std::string &narrow : row.narrowings) {
    if (row.decision == "plain")
      row.decision = narrow;
    else if (row.decision != narrow &&
             !StringRef(row.decision).ends_with("+" + narrow))
      row.decision += "+" + narrow;
  }
}

/// A bucket a compression scheme reduces: one row for all its gradients.
static ReportRow describeSchemeBucket(FlattenOp flatten) {
  ReportRow row;
  row.decision = flatten.getScheme().getScheme().str();
  if (DictionaryAttr options = flatten.getScheme().getOptions())
    llvm::append_range(row.options, options.getValue());
  row.compressed = true;
  auto type = flatten.getType();
  row.shape.assign(type.getShape().begin(), type.getShape().end());
  row.dtype = typeName(type.getElementType());
  row.numelBefore = numElements(type);
  row.bytesBefore = numBytes(type);
  // A bucket of a real model has dozens of gradients: the first and the
  // last name it (they are distinct per bucket).
  SmallVector<std::string> all;
  // Before compression is what the gradients are: wider than the flat
  // bucket where fp16/bf16 narrowed them before the scheme took them.
  int64_t numel = 0, bytes = 0;
  bool known = true;
  SmallVector<Type> dtypes;
  for (Value input : flatten.getInputs()) {
    Value source = input;
    CompressionAttr narrowed;
    traceSource(source, &narrowed);
    addNarrowing(row, narrowed, /*oneTensor=*/true);
    all.push_back(describeValue(source));
    auto sourceType = dyn_cast<RankedTensorType>(source.getType());
    if (!sourceType || !sourceType.hasStaticShape()) {
      known = false;
      continue;
    }
    dtypes.push_back(sourceType.getElementType());
    numel += numElements(sourceType);
    bytes += numBytes(sourceType);
  }
  if (known && !dtypes.empty() && numel == row.numelBefore) {
    row.dtype = elementTypeNames(dtypes);
    row.bytesBefore = bytes;
  }
  std::string names = all.size() <= 4 ? llvm::join(all, ",")
                                      : all.front() + ",...," + all.back();
  row.tensors = flatten.getInputs().size();
  row.where = "bucket of " + std::to_string(row.tensors) + " [" + names + "]";
  row.sentAs = "-";
  return row;
}

/// ReportRows are listed function by function; a function's arguments first, in
/// order, then gradients computed in its body, in order of communication.
static std::tuple<unsigned, unsigned, unsigned>
rowOrder(Value gradient, Operation *comm, unsigned appearance,
         llvm::DenseMap<Operation *, unsigned> &functionIndex) {
  auto function = comm->getParentOfType<FunctionOpInterface>();
  unsigned fn = function
                    ? functionIndex.try_emplace(function, functionIndex.size())
                          .first->second
                    : 0;
  if (auto arg = dyn_cast_or_null<BlockArgument>(gradient))
    if (function && arg.getOwner() == &function.getFunctionBody().front())
      return {fn, 0, arg.getArgNumber()};
  return {fn, 1, appearance};
}

/// One reduction of one gradient: the collective that starts it and the
/// gradient's place in it. For a PowerSGD Q that is the P it was computed
/// from (so that P and Q of one reduction share a row, and a value reduced
/// several times, even in one bucket, gets a row per reduction).
using Reduction = std::pair<Operation *, unsigned>;

static Reduction reductionOf(Value input, Operation *comm, unsigned index,
                             bool isQ) {
  if (!isQ)
    return {comm, index};
  Value value = input;
  while (Operation *op = value.getDefiningOp()) {
    unsigned result = cast<OpResult>(value).getResultNumber();
    if (Value reduced = nodeInput(value))
      value = reduced;
    else if (isa<CastOp, ScaleOp, OrthogonalizeOp>(op))
      value = op->getOperand(result);
    else if (auto back = dyn_cast<BackprojectOp>(op))
      value = back.getFactors()[result];
    else if (auto back = dyn_cast<BackprojectResidualOp>(op))
      value = back.getFactors()[result];
    else if (isa<AllReduceOp>(op))
      return {op, result};
    else if (auto wait = dyn_cast<WaitOp>(op))
      return {wait.getRequest().getDefiningOp(), result};
    else
      break;
  }
  return {comm, index};
}

/// Which factor of a low-rank scheme (PowerSGD's) a compressed
/// collective's operand is: P comes from a projection, Q from a
/// backprojection, each perhaps narrowed or scaled on the way. `scheme` is
/// the projection's (null where no pass named one).
struct Factor {
  enum Kind { none, p, q } kind = none;
  CompressionAttr scheme;
};

static Factor factorOf(Value value) {
  while (Operation *op = value.getDefiningOp()) {
    if (isa<ProjectOp, ProjectResidualOp, BackprojectOp, BackprojectResidualOp>(
            op)) {
      bool isP = isa<ProjectOp, ProjectResidualOp>(op);
      return {isP ? Factor::p : Factor::q,
              op->getAttrOfType<CompressionAttr>("scheme")};
    }
    if (Value reduced = nodeInput(value)) {
      value = reduced;
      continue;
    }
    if (!isa<CastOp, ScaleOp>(op))
      break;
    value = op->getOperand(cast<OpResult>(value).getResultNumber());
  }
  return {};
}

/// The scheme a scheme bucket's collective operand was narrowed by for
/// sending (the `scheme` of the ddp.cast that made it, through a later
/// scaling), or null. (A gradient's trace, traceSource, sees it on the
/// way.)
static CompressionAttr narrowedBy(Value value) {
  while (Operation *op = value.getDefiningOp()) {
    if (auto cast = dyn_cast<CastOp>(op))
      return cast.getSchemeAttr();
    if (Value reduced = nodeInput(value)) {
      value = reduced;
      continue;
    }
    if (!isa<ScaleOp>(op))
      break;
    value = op->getOperand(cast<OpResult>(value).getResultNumber());
  }
  return nullptr;
}

/// ReportRows are keyed by the gradient (or batched bucket) and the reduction.
using RowKey = std::pair<void *, Reduction>;

/// Whether `op` is a bucket ddp-plan chose to send plain (its location says
/// so; see plannedPlainLoc).
static bool isPlannedPlain(Operation *op) {
  StringAttr tag = plannedPlainTag(op->getContext());
  return op->getLoc()
      ->walk([&](Location loc) {
        auto fused = dyn_cast<FusedLoc>(loc);
        return fused && fused.getMetadata() == tag ? WalkResult::interrupt()
                                                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// The branches (of scf.if, scf.index_switch) that run during PowerSGD's
/// warm-up: the innermost ones around a warm-up collective. Where
/// ddp-schedule-overlap versioned a function on the warm-up's condition,
/// such a branch is the warm-up version, with copies of every other
/// bucket's collectives too; the report describes the steps after the
/// warm-up, so nothing in these branches counts.
static llvm::DenseSet<Region *> warmupBranches(ModuleOp module) {
  llvm::DenseSet<Region *> branches;
  module.walk([&](Operation *op) {
    CommRole role = CommRole::gradient;
    if (auto allreduce = dyn_cast<AllReduceOp>(op))
      role = allreduce.getRole();
    else if (auto start = dyn_cast<AllReduceStartOp>(op))
      role = start.getRole();
    if (role != CommRole::warmup)
      return;
    for (Region *region = op->getParentRegion(); region;
         region = region->getParentRegion())
      if (isa<scf::IfOp, scf::IndexSwitchOp>(region->getParentOp())) {
        branches.insert(region);
        return;
      }
  });
  return branches;
}

static void collectRows(ModuleOp module,
                        llvm::MapVector<RowKey, ReportRow> &rows) {
  llvm::DenseMap<Operation *, unsigned> functionIndex;
  BucketFinder buckets;
  llvm::DenseSet<Region *> warmup = warmupBranches(module);
  auto duringWarmup = [&](Operation *op) {
    for (Region *region = op->getParentRegion(); region;
         region = region->getParentRegion())
      if (warmup.contains(region))
        return true;
    return false;
  };
  // A scheme bucket's collectives and what each sends of it.
  llvm::MapVector<Operation *, llvm::DenseMap<Operation *, Amount>> sends;
  module.walk([&](Operation *op) {
    CommRole role;
    ValueRange inputs;
    if (!warmup.empty() && duringWarmup(op))
      return;
    if (auto flatten = dyn_cast<FlattenOp>(op)) {
      // A bucket that sends nothing (noop) still has its row.
      Reduction whole{flatten, 0};
      auto [it, inserted] = rows.insert({{flatten, whole}, ReportRow()});
      if (inserted) {
        it->second = describeSchemeBucket(flatten);
        it->second.order = rowOrder(nullptr, op, rows.size(), functionIndex);
      }
      return;
    }
    // Within a node nothing crosses the network: the report counts what
    // does, as the runtime's counters do.
    if (auto allreduce = dyn_cast<AllReduceOp>(op)) {
      if (allreduce.getGroup() == CommGroup::node)
        return;
      role = allreduce.getRole();
      inputs = allreduce.getInputs();
    } else if (auto start = dyn_cast<AllReduceStartOp>(op)) {
      if (start.getGroup() == CommGroup::node)
        return;
      role = start.getRole();
      inputs = start.getInputs();
    } else if (auto gather = dyn_cast<AllGatherOp>(op)) {
      role = gather.getRole();
      inputs = gather.getInputs();
    } else {
      return;
    }
    if (role == CommRole::warmup)
      return;
    for (auto [index, input] : llvm::enumerate(inputs)) {
      Factor factor;
      if (role == CommRole::compressed) {
        // A scheme's collective: what it sends counts for its bucket, once
        // per step (after the walk: see stepAmount).
        if (FlattenOp flatten = buckets.find(input)) {
          Reduction whole{flatten, 0};
          auto [it, inserted] = rows.insert({{flatten, whole}, ReportRow()});
          ReportRow &row = it->second;
          if (inserted) {
            row = describeSchemeBucket(flatten);
            row.order = rowOrder(nullptr, op, rows.size(), functionIndex);
          }
          auto sent = cast<RankedTensorType>(input.getType());
          Amount &amount = sends[flatten][op];
          amount.numel += numElements(sent);
          amount.bytes += numBytes(sent);
          addNarrowing(row, narrowedBy(input));
          appendTypeName(row.sentAs, sent.getElementType());
          continue;
        }
        // Else PowerSGD's factor of a gradient, or nothing the report can
        // attribute to one.
        factor = factorOf(input);
        if (factor.kind == Factor::none)
          continue;
      }
      Value source = input;
      ReportRow *row;
      Reduction reduction =
          reductionOf(input, op, index, factor.kind == Factor::q);
      bool batched = false;
      CompressionAttr narrowedBefore;
      if (tensor::ConcatOp concat = traceSource(source, &narrowedBefore)) {
        batched = true;
        auto [it, inserted] =
            rows.insert({{concat.getOperation(), reduction}, ReportRow()});
        if (inserted) {
          it->second = describeBatchedBucket(concat, matrixOf(input));
          it->second.order = rowOrder(nullptr, op, rows.size(), functionIndex);
        }
        row = &it->second;
      } else {
        auto [it, inserted] = rows.insert(
            {{source.getAsOpaquePointer(), reduction}, ReportRow()});
        if (inserted) {
          it->second = describeGradient(source);
          it->second.order = rowOrder(source, op, rows.size(), functionIndex);
        }
        row = &it->second;
      }
      auto sent = cast<RankedTensorType>(input.getType());
      row->numelAfter += numElements(sent);
      row->bytesAfter += numBytes(sent);
      appendTypeName(row->sentAs, sent.getElementType());
      // The decision: the projection's scheme (a projection no pass named
      // is a "low-rank" one), or plain; the narrowing on the way back to the
      // gradient (before or after the scheme) is added at the end.
      if (factor.kind != Factor::none) {
        row->compressed = true;
        row->decision = factor.scheme ? factor.scheme.getScheme().str()
                                      : std::string("low-rank");
        if (factor.scheme && factor.scheme.getOptions() && row->options.empty())
          llvm::append_range(row->options,
                             factor.scheme.getOptions().getValue());
        if (batched)
          row->decision += "-batched";
        row->rank = sent.getDimSize(1);
      } else if (role == CommRole::uncompressed) {
        row->decision = isPlannedPlain(op) ? "plain (plan)" : "uncompressed";
      } else {
        row->decision = "plain";
      }
      addNarrowing(*row, narrowedBefore);
    }
  });
  for (auto &[flatten, amounts] : sends) {
    llvm::DenseSet<Operation *> ancestors;
    for (auto &entry : amounts)
      for (Operation *op = entry.first->getParentOp(); op;
           op = op->getParentOp())
        ancestors.insert(op);
    auto function = flatten->getParentOfType<FunctionOpInterface>();
    if (!function)
      continue;
    Amount step = stepAmount(function.getFunctionBody(), amounts, ancestors);
    ReportRow &row = rows.find({flatten, {flatten, 0}})->second;
    row.numelAfter += step.numel;
    row.bytesAfter += step.bytes;
  }
}

void mlir::ddp::collectReportRows(ModuleOp module,
                                  SmallVectorImpl<ReportRow> &rows) {
  llvm::MapVector<RowKey, ReportRow> byKey;
  collectRows(module, byKey);
  for (auto &entry : byKey) {
    finishDecision(entry.second);
    rows.push_back(std::move(entry.second));
  }
}
