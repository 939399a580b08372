//===- InsertNarrowCompression.cpp - fp16/bf16 allreduces -----------------===//
//
// PyTorch's fp16_compress_hook and bf16_compress_hook, as a rewrite: divide
// by the world size, cast to the narrow type, allreduce (sum) in that type,
// cast back. Dividing first keeps the sum of W ranks inside the narrow
// type's range. A `sum` allreduce is pre-scaled the same way and multiplied
// back by W after the cast.
//
//===----------------------------------------------------------------------===//

#include "ddp/Conversion/ShardToDDP/ShardToDDP.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_INSERTFP16COMPRESSION
#define GEN_PASS_DEF_INSERTBF16COMPRESSION
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

/// Only types wider than the narrow one are worth narrowing.
static std::string whyNotNarrowable(Type type, FloatType narrow) {
  std::string reason = whyNotCompressible(type);
  if (!reason.empty())
    return reason;
  Type element = cast<RankedTensorType>(type).getElementType();
  if (element.getIntOrFloatBitWidth() <= narrow.getWidth())
    return "it is already " + std::to_string(element.getIntOrFloatBitWidth()) +
           "-bit";
  return "";
}

/// Casts `inputs` to `narrow`, pre-scaled by 1/W (fine-grained: ddp.scale
/// then ddp.cast; ddp-fuse-kernels merges them).
static SmallVector<Value> castDown(OpBuilder &builder, Location loc,
                                   ValueRange inputs, FloatType narrow) {
  auto scaled =
      ScaleOp::create(builder, loc, inputs, WorldScale::inverse_world_size);
  SmallVector<Type> narrowTypes;
  for (Type type : inputs.getTypes())
    narrowTypes.push_back(cast<RankedTensorType>(type).clone(narrow));
  auto cast = CastOp::create(builder, loc, narrowTypes, scaled.getResults(),
                             WorldScaleAttr());
  return cast.getResults();
}

/// Casts the reduced values back to `types`; a sum is scaled back by W.
static SmallVector<Value> castUp(OpBuilder &builder, Location loc,
                                 ValueRange reduced, TypeRange types,
                                 ReductionKind kind) {
  auto cast = CastOp::create(builder, loc, types, reduced, WorldScaleAttr());
  if (kind == ReductionKind::mean)
    return cast.getResults();
  return ScaleOp::create(builder, loc, cast.getResults(),
                         WorldScale::world_size)
      .getResults();
}

/// Rewrites one allreduce (sync or start/wait) into its narrow form.
/// True if some input is a float wider than `narrow`: only then is there
/// anything to do (narrow and integer-only allreduces stay quietly).
static bool hasWideFloat(TypeRange types, FloatType narrow) {
  return llvm::any_of(types, [&](Type type) {
    auto element = dyn_cast<FloatType>(cast<ShapedType>(type).getElementType());
    return element && element.getWidth() > narrow.getWidth();
  });
}

static unsigned narrowAllReduce(AllReduceOp op, FloatType narrow,
                                StringRef passName) {
  if (!hasWideFloat(op.getInputs().getTypes(), narrow))
    return 0;
  op = splitOffRejected(
      op, passName, [&](Type type) { return whyNotNarrowable(type, narrow); });
  if (!op)
    return 0;
  OpBuilder builder(op);
  Location loc = op.getLoc();
  SmallVector<Value> down = castDown(builder, loc, op.getInputs(), narrow);
  auto reduced =
      AllReduceOp::create(builder, loc, ReductionKind::sum, down, op.getRole());
  SmallVector<Value> up = castUp(builder, loc, reduced.getResults(),
                                 op.getResultTypes(), op.getKind());
  op->replaceAllUsesWith(up);
  unsigned count = op.getInputs().size();
  op.erase();
  return count;
}

static unsigned narrowAllReduceStart(AllReduceStartOp op, FloatType narrow,
                                     StringRef passName) {
  if (!hasWideFloat(op.getInputs().getTypes(), narrow))
    return 0;
  for (auto [i, type] : llvm::enumerate(op.getInputs().getTypes())) {
    std::string reason = whyNotNarrowable(type, narrow);
    if (reason.empty())
      continue;
    // A started allreduce is split only by its producer; leave it whole.
    op.emitRemark() << passName << " leaves this allreduce_start as it is: "
                    << "tensor #" << i << " (" << type << ") " << reason;
    return 0;
  }
  auto wait = cast<WaitOp>(*op.getRequest().getUsers().begin());
  OpBuilder builder(op);
  Location loc = op.getLoc();
  SmallVector<Value> down = castDown(builder, loc, op.getInputs(), narrow);
  auto start = AllReduceStartOp::create(builder, loc, ReductionKind::sum, down,
                                        op.getRole());
  builder.setInsertionPoint(wait);
  auto newWait = WaitOp::create(builder, wait.getLoc(), start.getRequest());
  SmallVector<Value> up = castUp(builder, wait.getLoc(), newWait.getResults(),
                                 wait.getResultTypes(), op.getKind());
  wait->replaceAllUsesWith(up);
  unsigned count = op.getInputs().size();
  wait.erase();
  op.erase();
  return count;
}

static unsigned narrowAllReduces(ModuleOp module, FloatType narrow,
                                 StringRef passName) {
  (void)convertShardAllReduces(module);
  SmallVector<Operation *> targets;
  module.walk([&](Operation *op) {
    if (isa<AllReduceOp, AllReduceStartOp>(op))
      targets.push_back(op);
  });
  unsigned count = 0;
  for (Operation *op : targets) {
    if (auto allreduce = dyn_cast<AllReduceOp>(op))
      count += narrowAllReduce(allreduce, narrow, passName);
    else
      count +=
          narrowAllReduceStart(cast<AllReduceStartOp>(op), narrow, passName);
  }
  return count;
}

namespace {
struct InsertFP16CompressionPass
    : public ddp::impl::InsertFP16CompressionBase<InsertFP16CompressionPass> {
  void runOnOperation() override {
    numCompressed += narrowAllReduces(
        getOperation(), Float16Type::get(&getContext()), getArgument());
  }
};

struct InsertBF16CompressionPass
    : public ddp::impl::InsertBF16CompressionBase<InsertBF16CompressionPass> {
  void runOnOperation() override {
    numCompressed += narrowAllReduces(
        getOperation(), BFloat16Type::get(&getContext()), getArgument());
  }
};
} // namespace
