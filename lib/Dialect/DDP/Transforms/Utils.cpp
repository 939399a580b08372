//===- Utils.cpp - helpers shared by the ddp passes -----------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Dialect/DDP/Transforms/Utils.h"
#include "ddp/Conversion/ShardToDDP/ShardToDDP.h"
#include "ddp/Dialect/DDP/IR/GradientNames.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

using namespace mlir;
using namespace mlir::ddp;

std::string mlir::ddp::whyNotCompressible(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return "it is not a ranked tensor";
  if (!isa<FloatType>(tensor.getElementType()))
    return "its element type is not a float";
  if (tensor.getRank() == 0)
    return "it is 0-d";
  if (!tensor.hasStaticShape())
    return "its shape is dynamic";
  return "";
}

uint64_t mlir::ddp::tensorBytes(RankedTensorType type) {
  // Whole bytes per element, as the runtime stores them; counting bits
  // first wrapped for tensors of 2^60 elements and more.
  uint64_t bytes = (type.getElementTypeBitWidth() + 7) / 8;
  return uint64_t(type.getNumElements()) * bytes;
}

AllReduceOp
mlir::ddp::splitOffRejected(RewriterBase &rewriter, AllReduceOp op,
                            StringRef what,
                            function_ref<std::string(Type)> whyNot) {
  SmallVector<unsigned> accepted, rejected;
  for (auto [i, input] : llvm::enumerate(op.getInputs())) {
    std::string reason = whyNot(input.getType());
    if (reason.empty()) {
      accepted.push_back(i);
      continue;
    }
    rejected.push_back(i);
    op.emitRemark() << what << " leaves tensor #" << i << " ("
                    << input.getType() << " from " << describeValue(input)
                    << ") as a plain allreduce: " << reason;
  }
  if (accepted.empty())
    return nullptr;
  if (rejected.empty())
    return op;
  rewriter.setInsertionPoint(op);
  SmallVector<Value> replacements(op->getNumResults());
  auto makeAllReduce = [&](ArrayRef<unsigned> indices) {
    SmallVector<Value> inputs;
    for (unsigned i : indices)
      inputs.push_back(op.getInputs()[i]);
    auto part = AllReduceOp::create(rewriter, op.getLoc(), op.getKind(), inputs,
                                    op.getRole(), op.getGroup());
    for (auto [j, i] : llvm::enumerate(indices))
      replacements[i] = part.getResult(j);
    return part;
  };
  makeAllReduce(rejected);
  AllReduceOp kept = makeAllReduce(accepted);
  rewriter.replaceOp(op, replacements);
  return kept;
}

SmallVector<SmallVector<Operation *>>
mlir::ddp::findMergeableGroups(Block &block, MergeKeyFn keyOf,
                               function_ref<uint64_t(Operation *)> bytesOf,
                               GroupSizes sizes) {
  struct OpenGroup {
    SmallVector<Operation *> members;
    // The first op of the block that uses a member's result; the group can
    // only grow with ops strictly before it. Null: no use yet.
    Operation *earliestUse = nullptr;
    // A use outside this block's ops was found: the group cannot grow.
    bool sealed = false;
    uint64_t bytes = 0;
    // Groups of this key closed so far (the first has its own cap).
    unsigned closed = 0;
  };
  using Key = std::pair<OperationName, Attribute>;
  llvm::DenseMap<Key, OpenGroup> open;
  SmallVector<SmallVector<Operation *>> groups;

  auto close = [&](OpenGroup &group) {
    unsigned closed = group.closed;
    if (!group.members.empty()) {
      groups.push_back(std::move(group.members));
      ++closed;
    }
    group = OpenGroup();
    group.closed = closed;
  };
  auto capOf = [&](const OpenGroup &group) {
    return group.closed == 0 && sizes.firstCapBytes ? sizes.firstCapBytes
                                                    : sizes.capBytes;
  };

  for (Operation &op : block) {
    std::optional<Attribute> key = keyOf(&op);
    if (!key)
      continue;
    OpenGroup &group = open[{op.getName(), *key}];
    uint64_t bytes = bytesOf ? bytesOf(&op) : 0;
    bool blockedByUse =
        group.sealed ||
        (group.earliestUse && !op.isBeforeInBlock(group.earliestUse));
    bool overCap = bytesOf && !sizes.closeOnceReached &&
                   !group.members.empty() && group.bytes + bytes > capOf(group);
    if (blockedByUse || overCap)
      close(group);
    group.members.push_back(&op);
    group.bytes += bytes;
    bool reached =
        bytesOf && sizes.closeOnceReached && group.bytes >= capOf(group);
    for (Operation *user : op.getUsers()) {
      Operation *ancestor = block.findAncestorOpInBlock(*user);
      if (!ancestor) {
        group.sealed = true;
        continue;
      }
      if (!group.earliestUse || ancestor->isBeforeInBlock(group.earliestUse))
        group.earliestUse = ancestor;
    }
    if (reached)
      close(group);
  }
  // Close in order of first member so the result follows the block.
  SmallVector<OpenGroup *> remaining;
  for (auto &entry : open)
    if (!entry.second.members.empty())
      remaining.push_back(&entry.second);
  llvm::sort(remaining, [](OpenGroup *a, OpenGroup *b) {
    return a->members.front()->isBeforeInBlock(b->members.front());
  });
  for (OpenGroup *group : remaining)
    close(*group);
  return groups;
}

Operation *mlir::ddp::mergeMultiTensorOps(RewriterBase &rewriter,
                                          ArrayRef<Operation *> group) {
  assert(!group.empty() && "nothing to merge");
  auto members = llvm::map_to_vector(
      group, [](Operation *op) { return cast<MultiTensorOpInterface>(op); });
  MultiTensorOpInterface first = members.front();
  if (members.size() == 1)
    return first;
  unsigned total = 0;
  for (MultiTensorOpInterface op : members)
    total += op.getNumTensors();
  SmallVector<Value> operands;
  for (unsigned g = 0, e = first.getNumOperandGroups(); g < e; ++g)
    for (MultiTensorOpInterface op : members)
      llvm::append_range(operands, op.getOperandGroup(g));
  unsigned numResultGroups = first.getNumResultGroups();
  SmallVector<Type> types;
  for (unsigned g = 0; g < numResultGroups; ++g)
    for (MultiTensorOpInterface op : members)
      llvm::append_range(types, op.getResultGroup(g).getTypes());

  // The configuration (inherent attributes) comes from the first member,
  // then the group sizes become those of the merged op.
  rewriter.setInsertionPoint(group.back());
  Operation *merged = Operation::create(
      FusedLoc::get(rewriter.getContext(),
                    llvm::map_to_vector(
                        group, [](Operation *op) { return op->getLoc(); })),
      first->getName(), types, operands,
      NamedAttrList(first->getDiscardableAttrDictionary()),
      first->getPropertiesStorage());
  rewriter.insert(merged);
  cast<MultiTensorOpInterface>(merged).setNumTensors(total);

  unsigned offset = 0;
  for (MultiTensorOpInterface op : members) {
    unsigned n = op.getNumTensors();
    SmallVector<Value> replacements;
    for (unsigned g = 0; g < numResultGroups; ++g)
      llvm::append_range(replacements,
                         merged->getResults().slice(g * total + offset, n));
    rewriter.replaceOp(op, replacements);
    offset += n;
  }
  return merged;
}

/// Reorders each run of consecutive ops that `keyOf` selects (allreduces
/// written one after the other, typically after the backward pass) by where
/// their inputs are defined, stably: the order the gradients become ready.
/// Nothing else lies between them, and an allreduce of another one's result
/// is ready only after it, so the order stays valid. Ops whose inputs are
/// ready together (arguments of the block) keep their order, or with
/// `reverseTies` take the reverse order of their last argument: DDP's
/// assumption that gradients come in reverse parameter order.
static void orderByReadiness(Block &block, MergeKeyFn keyOf, bool reverseTies) {
  // Where each op's last input from this block is defined (-1: none), then
  // (ties) minus its last argument of the block.
  DenseMap<Operation *, int64_t> position;
  DenseMap<Operation *, std::pair<int64_t, int64_t>> readiness;
  for (auto [i, op] : llvm::enumerate(block)) {
    position[&op] = i;
    int64_t ready = -1, tie = 0;
    for (Value operand : op.getOperands()) {
      if (Operation *def = operand.getDefiningOp();
          def && def->getBlock() == &block)
        ready = std::max(ready, position.lookup(def));
      if (auto argument = dyn_cast<BlockArgument>(operand);
          reverseTies && argument && argument.getOwner() == &block)
        tie = std::min(tie, -int64_t(argument.getArgNumber()) - 1);
    }
    readiness[&op] = {ready, tie};
  }
  SmallVector<Operation *> run;
  auto flush = [&](Operation *before) {
    if (run.size() > 1) {
      SmallVector<Operation *> sorted(run);
      llvm::stable_sort(sorted, [&](Operation *a, Operation *b) {
        return readiness.lookup(a) < readiness.lookup(b);
      });
      if (sorted != run)
        for (Operation *op : sorted)
          op->moveBefore(before);
    }
    run.clear();
  };
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (keyOf(&op)) {
      run.push_back(&op);
      continue;
    }
    flush(&op);
  }
  // A run that ends a block without a terminator stays as it is.
}

FailureOr<linalg::GenericOp>
mlir::ddp::parallelLoopsFirst(RewriterBase &rewriter, linalg::LinalgOp op) {
  auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
  if (!generic) {
    FailureOr<linalg::GenericOp> generalized =
        linalg::generalizeNamedOp(rewriter, op);
    if (failed(generalized))
      return failure();
    generic = *generalized;
  }
  SmallVector<utils::IteratorType> iterators = generic.getIteratorTypesArray();
  SmallVector<unsigned> order;
  for (unsigned d = 0; d < iterators.size(); ++d)
    if (iterators[d] == utils::IteratorType::parallel)
      order.push_back(d);
  for (unsigned d = 0; d < iterators.size(); ++d)
    if (iterators[d] != utils::IteratorType::parallel)
      order.push_back(d);
  if (llvm::equal(order, llvm::seq<unsigned>(0, iterators.size())))
    return generic;
  FailureOr<linalg::GenericOp> interchanged =
      linalg::interchangeGenericOp(rewriter, generic, order);
  return succeeded(interchanged) ? *interchanged : generic;
}

std::optional<SmallVector<MemoryEffects::EffectInstance>>
mlir::ddp::conflictingEffects(Operation *op) {
  SmallVector<MemoryEffects::EffectInstance> effects;
  if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
      op->hasTrait<OpTrait::IsTerminator>())
    return effects;
  auto memory = dyn_cast<MemoryEffectOpInterface>(op);
  if (!memory)
    return std::nullopt;
  memory.getEffects(effects);
  llvm::erase_if(effects, [](const MemoryEffects::EffectInstance &effect) {
    return isa<MemoryEffects::Allocate>(effect.getEffect());
  });
  return effects;
}

WorldScale mlir::ddp::inverseMembersScale(CommGroup group) {
  assert(group != CommGroup::node && "a node's ranks are not a runtime scale");
  return group == CommGroup::across_nodes ? WorldScale::inverse_node_count
                                          : WorldScale::inverse_world_size;
}

WorldScale mlir::ddp::membersScale(CommGroup group) {
  assert(group != CommGroup::node && "a node's ranks are not a runtime scale");
  return group == CommGroup::across_nodes ? WorldScale::node_count
                                          : WorldScale::world_size;
}

unsigned mlir::ddp::bucketizeAllReduces(Operation *root,
                                        const BucketPolicy &policy) {
  SmallVector<Block *> blocks;
  root->walk([&](Block *block) { blocks.push_back(block); });
  SmallVector<SmallVector<Operation *>> buckets;
  auto keyOf = [](Operation *op) -> std::optional<Attribute> {
    auto allreduce = dyn_cast<AllReduceOp>(op);
    if (!allreduce || allreduce.getRole() != CommRole::gradient)
      return std::nullopt;
    // A bucket ddp-plan decided on (ddp.planned) stays the bucket it
    // planned: merged, one decision would be lost.
    if (op->hasAttr(DDPDialect::PlannedAttrHelper::getNameStr()))
      return std::nullopt;
    Type element = nullptr;
    for (Type type : allreduce.getInputs().getTypes()) {
      auto tensor = cast<RankedTensorType>(type);
      if (!tensor.hasStaticShape() ||
          (element && element != tensor.getElementType()))
        return std::nullopt;
      element = tensor.getElementType();
    }
    return ArrayAttr::get(op->getContext(),
                          {allreduce.getKindAttr(), allreduce.getGroupAttr(),
                           TypeAttr::get(element)});
  };
  auto bytesOf = [](Operation *op) {
    uint64_t bytes = 0;
    for (Type type : op->getOperandTypes())
      bytes += tensorBytes(cast<RankedTensorType>(type));
    return bytes;
  };
  for (Block *block : blocks)
    orderByReadiness(*block, keyOf, policy.reverseTies);
  GroupSizes sizes{policy.capBytes, policy.firstCapBytes,
                   policy.closeOnceReached};
  for (Block *block : blocks)
    for (auto &group : findMergeableGroups(*block, keyOf, bytesOf, sizes))
      if (group.size() > 1)
        buckets.push_back(std::move(group));
  IRRewriter rewriter(root->getContext());
  for (auto &bucket : buckets)
    mergeMultiTensorOps(rewriter, bucket);
  return buckets.size();
}

StringAttr mlir::ddp::plannedPlainTag(MLIRContext *context) {
  return StringAttr::get(context, "ddp-plan: plain");
}

Location mlir::ddp::plannedPlainLoc(Location location) {
  MLIRContext *context = location.getContext();
  return FusedLoc::get({location}, plannedPlainTag(context), context);
}

FailureOr<std::unique_ptr<llvm::MemoryBuffer>>
mlir::ddp::readBoundedFile(StringRef path, size_t limit, StringRef what,
                           std::string &error) {
  llvm::Expected<llvm::sys::fs::file_t> file =
      llvm::sys::fs::openNativeFileForRead(path);
  if (!file) {
    error = "cannot read it: " + llvm::toString(file.takeError());
    return failure();
  }
  // Chunk by chunk, never past limit + 1 bytes.
  std::string bytes;
  char chunk[1 << 16];
  while (bytes.size() <= limit) {
    llvm::Expected<size_t> got = llvm::sys::fs::readNativeFile(
        *file, llvm::MutableArrayRef<char>(chunk, sizeof chunk));
    if (!got) {
      llvm::sys::fs::closeFile(*file);
      error = "cannot read it: " + llvm::toString(got.takeError());
      return failure();
    }
    if (*got == 0)
      break;
    bytes.append(chunk, *got);
  }
  llvm::sys::fs::closeFile(*file);
  if (bytes.size() > limit) {
    error = "it is longer than " + std::to_string(limit) +
            " bytes, more than a " + what.str() + " holds";
    return failure();
  }
  return llvm::MemoryBuffer::getMemBufferCopy(bytes, path);
}

std::string mlir::ddp::checkJsonNesting(StringRef text, unsigned maxDepth) {
  unsigned depth = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > maxDepth)
        return "arrays and objects nest deeper than " +
               std::to_string(maxDepth) + " levels";
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return "";
}

std::string mlir::ddp::cleanStateNamePart(StringRef text) {
  std::string name = text.str();
  for (char &c : name)
    if (!llvm::isAlnum(c) && c != '_' && c != '.' && c != '$' && c != '-')
      c = '_';
  return name;
}

std::string mlir::ddp::describeLocation(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().str() + ":" + std::to_string(file.getLine()) +
            ":" + std::to_string(file.getColumn()));
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    std::string text;
    for (Location part : fused.getLocations()) {
      if (!text.empty())
        text += ",";
      text += describeLocation(part);
    }
    return text.empty() ? "?" : text;
  }
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return describeLocation(callSite.getCallee());
  return "?";
}

std::string mlir::ddp::describeValue(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    if (isa<NameLoc>(arg.getLoc()))
      return describeLocation(arg.getLoc());
    auto function =
        dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
    if (function && arg.getOwner()->isEntryBlock()) {
      auto *dialect = value.getContext()->getLoadedDialect<DDPDialect>();
      if (auto name = function.getArgAttrOfType<StringAttr>(
              arg.getArgNumber(), dialect->getNameAttrHelper().getName()))
        return name.getValue().str();
    }
    if (function && arg.getOwner()->isEntryBlock())
      return ("@" + function.getName() + ":%arg" +
              std::to_string(arg.getArgNumber()))
          .str();
    return describeLocation(arg.getLoc());
  }
  return describeLocation(value.getLoc());
}

std::optional<ValueRange> mlir::ddp::getNodeReductionInputs(Operation *op) {
  if (auto allreduce = dyn_cast<AllReduceOp>(op))
    if (allreduce.getGroup() == CommGroup::node)
      return ValueRange(allreduce.getInputs());
  if (auto wait = dyn_cast<WaitOp>(op))
    if (auto start = wait.getRequest().getDefiningOp<AllReduceStartOp>();
        start && start.getGroup() == CommGroup::node)
      return ValueRange(start.getInputs());
  return std::nullopt;
}

Value mlir::ddp::throughNodeReduction(Value value) {
  if (auto result = dyn_cast<OpResult>(value))
    if (std::optional<ValueRange> inputs =
            getNodeReductionInputs(result.getOwner()))
      return (*inputs)[result.getResultNumber()];
  return value;
}

InFlightDiagnostic mlir::ddp::emitPassError(Operation *root, StringRef pass) {
  InFlightDiagnostic diag = mlir::emitError(root->getLoc());
  if (!pass.empty())
    diag << pass << ": ";
  return diag;
}

std::string mlir::ddp::formatNumber(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

LogicalResult
mlir::ddp::checkPowerSGDOptions(unsigned rank, double rate, int64_t startIter,
                                double epsilon, double cap,
                                function_ref<void(const Twine &)> fail) {
  auto bad = [&](const Twine &message) {
    fail(message);
    return failure();
  };
  if (rank < 1)
    return bad("rank must be >= 1, got " + Twine(rank));
  if (!(rate >= 0.0) || std::isinf(rate))
    return bad("min-compression-rate must be a finite number >= 0, got " +
               formatNumber(rate));
  if (startIter < 0)
    return bad("start-iter must be >= 0, got " + Twine(startIter));
  if (!(epsilon >= 0.0) || std::isinf(epsilon))
    return bad("orthogonalization-epsilon must be a finite number >= 0, got " +
               formatNumber(epsilon));
  if (!(cap >= 0.0) || std::isinf(cap))
    return bad("bucket-cap-mb must be a finite number >= 0, got " +
               formatNumber(cap));
  return success();
}

LogicalResult mlir::ddp::formGradientBuckets(ModuleOp module,
                                             double bucketCapMb) {
  recordGradientNames(module);
  if (failed(convertShardAllReduces(module)))
    return failure();
  if (bucketCapMb <= 0.0)
    return success();
  BucketPolicy policy;
  policy.capBytes = uint64_t(bucketCapMb * 1024.0 * 1024.0);
  for (auto function : module.getOps<func::FuncOp>())
    bucketizeAllReduces(function, policy);
  return success();
}

//===----------------------------------------------------------------------===//
// Flat views of tensors
//===----------------------------------------------------------------------===//

/// All dimensions of a rank-`rank` tensor in one group (none for 0-d).
static SmallVector<ReassociationIndices> allInOne(int64_t rank) {
  if (rank == 0)
    return {};
  ReassociationIndices group;
  for (int64_t d = 0; d < rank; ++d)
    group.push_back(d);
  return {group};
}

/// `value` as a 1-D tensor of its elements (row-major).
Value mlir::ddp::flattenTensor(OpBuilder &b, Location loc, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getRank() == 1)
    return value;
  auto flat =
      RankedTensorType::get({type.getNumElements()}, type.getElementType());
  if (type.getRank() == 0)
    return tensor::ExpandShapeOp::create(b, loc, flat, value,
                                         ArrayRef<ReassociationIndices>{});
  return tensor::CollapseShapeOp::create(b, loc, flat, value,
                                         allInOne(type.getRank()));
}

/// A 1-D tensor as `type` (the inverse of flattenTensor).
Value mlir::ddp::unflattenTensor(OpBuilder &b, Location loc, Value flat,
                                 RankedTensorType type) {
  if (type.getRank() == 1)
    return flat;
  if (type.getRank() == 0)
    return tensor::CollapseShapeOp::create(b, loc, type, flat,
                                           ArrayRef<ReassociationIndices>{});
  return tensor::ExpandShapeOp::create(b, loc, type, flat,
                                       allInOne(type.getRank()));
}

RankedTensorType mlir::ddp::matrixViewType(RankedTensorType type) {
  int64_t rows = type.getDimSize(0);
  int64_t cols = rows == 0 ? 0 : type.getNumElements() / rows;
  return RankedTensorType::get({rows, cols}, type.getElementType());
}

Value mlir::ddp::reshapeMatrixView(OpBuilder &b, Location loc, Value value,
                                   RankedTensorType type) {
  auto from = cast<RankedTensorType>(value.getType());
  if (from.getRank() == type.getRank())
    return value;
  // Over the side with more dimensions: dims 1.. fold into the columns; a
  // 1-D tensor gains a unit column.
  int64_t rank = std::max(from.getRank(), type.getRank());
  SmallVector<ReassociationIndices> reassociation{{0, 1}};
  if (rank > 2)
    reassociation = {{0}, llvm::to_vector(llvm::seq<int64_t>(1, rank))};
  if (type.getRank() > from.getRank())
    return tensor::ExpandShapeOp::create(b, loc, type, value, reassociation);
  return tensor::CollapseShapeOp::create(b, loc, type, value, reassociation);
}
