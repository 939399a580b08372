//===- BufferizableOpInterfaceImpl.cpp - bufferizing ddp ops --------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// One-Shot Bufferize models for the ddp tensor ops. Each op becomes one
// ddp.buffer op, which convert-ddp-to-llvm turns into one runtime call.
//
//  - allreduce, allreduce_start, scale, orthogonalize: in place. The
//    analysis copies an operand first only where its old value is read later.
//  - wait: returns the buffers its allreduce_start reduced.
//  - cast, project(_residual), backproject(_residual), reconstruct,
//    random_normal: write into fresh buffers.
//  - reconstruct_residual: decompresses into the gradient's buffer and
//    updates the residual's buffer, both in place where the analysis allows.
//  - state_load: the runtime's state buffer itself when nothing can observe
//    the difference (a store follows in an enclosing block, nothing else
//    touches the state in between, no alias used after it); else a copy.
//    state_store: a runtime copy, skipped when the value was computed in
//    place in the state's own buffer.
//
// The runtime takes contiguous buffers; a strided view (from a tensor slice)
// is copied to a contiguous one and, for in-place ops, back.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/BufferizableOpInterfaceImpl.h"

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/Transforms/BufferAliasing.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace mlir::ddp;

namespace {

/// The dynamic sizes of `buffer` (for allocating one of its shape).
SmallVector<Value> dynamicSizes(OpBuilder &b, Location loc, Value buffer) {
  SmallVector<Value> sizes;
  auto type = cast<MemRefType>(buffer.getType());
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      sizes.push_back(memref::DimOp::create(b, loc, buffer, i));
  return sizes;
}

/// The identity-layout memref type of `type`'s shape and element type.
MemRefType identityBuffer(ShapedType type) {
  return MemRefType::get(type.getShape(), type.getElementType());
}

/// A contiguous identity-layout buffer of `type`'s shape and element type.
FailureOr<Value> allocate(OpBuilder &b, Location loc, ShapedType type,
                          ValueRange sizes,
                          const BufferizationOptions &options) {
  return options.createAlloc(b, loc, identityBuffer(type), sizes);
}

/// `buffer`, or a contiguous copy of it if it is strided.
FailureOr<Value> contiguous(OpBuilder &b, Location loc, Value buffer,
                            const BufferizationOptions &options) {
  auto type = cast<MemRefType>(buffer.getType());
  if (isContiguousBuffer(type))
    return buffer;
  FailureOr<Value> copy =
      allocate(b, loc, type, dynamicSizes(b, loc, buffer), options);
  if (failed(copy) || failed(options.createMemCpy(b, loc, buffer, *copy)))
    return failure();
  return *copy;
}

/// The buffers of `tensors`, made contiguous.
FailureOr<SmallVector<Value>>
contiguousBuffers(RewriterBase &rewriter, Location loc, ValueRange tensors,
                  const BufferizationOptions &options,
                  const BufferizationState &state) {
  SmallVector<Value> buffers;
  for (Value tensor : tensors) {
    FailureOr<Value> buffer = getBuffer(rewriter, tensor, options, state);
    if (failed(buffer))
      return failure();
    FailureOr<Value> usable = contiguous(rewriter, loc, *buffer, options);
    if (failed(usable))
      return failure();
    buffers.push_back(*usable);
  }
  return buffers;
}

/// The buffers of tensors an op updates in place (`buffers`) and the
/// contiguous buffers it works on (`work`: a copy where a buffer is
/// strided).
struct InPlaceBuffers {
  SmallVector<Value> buffers, work;

  static FailureOr<InPlaceBuffers> get(RewriterBase &rewriter, Location loc,
                                       ValueRange tensors,
                                       const BufferizationOptions &options,
                                       const BufferizationState &state) {
    InPlaceBuffers result;
    for (Value tensor : tensors) {
      FailureOr<Value> buffer = getBuffer(rewriter, tensor, options, state);
      if (failed(buffer))
        return failure();
      FailureOr<Value> usable = contiguous(rewriter, loc, *buffer, options);
      if (failed(usable))
        return failure();
      result.buffers.push_back(*buffer);
      result.work.push_back(*usable);
    }
    return result;
  }

  /// After the op: copies what a strided buffer's copy received back.
  LogicalResult copyBack(OpBuilder &b, Location loc,
                         const BufferizationOptions &options) const {
    for (auto [buffer, used] : llvm::zip(buffers, work))
      if (buffer != used && failed(options.createMemCpy(b, loc, used, buffer)))
        return failure();
    return success();
  }
};

/// Fresh buffers for the tensor results of `op`; dynamic sizes come from
/// `shapeSources` (one buffer per result, of the same shape).
FailureOr<SmallVector<Value>>
allocateResults(RewriterBase &rewriter, Operation *op, ValueRange shapeSources,
                const BufferizationOptions &options) {
  SmallVector<Value> outputs;
  for (auto [i, result] : llvm::enumerate(op->getResults())) {
    auto type = cast<RankedTensorType>(result.getType());
    SmallVector<Value> sizes;
    if (!type.hasStaticShape())
      sizes = dynamicSizes(rewriter, op->getLoc(), shapeSources[i]);
    FailureOr<Value> output =
        allocate(rewriter, op->getLoc(), type, sizes, options);
    if (failed(output))
      return failure();
    outputs.push_back(*output);
  }
  return outputs;
}

/// The analysis side of a model whose tensor operands alias none of its
/// results: whether it reads and writes them.
template <typename ConcreteModel, typename OpTy, bool Reads, bool Writes>
struct NonAliasingModel
    : public BufferizableOpInterface::ExternalModel<ConcreteModel, OpTy> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return Reads;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return Writes;
  }
  AliasingValueList getAliasingValues(Operation *, OpOperand &,
                                      const AnalysisState &) const {
    return {};
  }
};

//===----------------------------------------------------------------------===//
// In place: allreduce, scale, orthogonalize
//===----------------------------------------------------------------------===//

/// Ops whose result i is operand i, updated (every operand is a tensor).
template <typename ConcreteModel, typename OpTy>
struct InPlaceModel
    : public BufferizableOpInterface::ExternalModel<ConcreteModel, OpTy> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return true;
  }
  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &) const {
    return {{op->getResult(operand.getOperandNumber()),
             BufferRelation::Equivalent}};
  }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    FailureOr<InPlaceBuffers> operands = InPlaceBuffers::get(
        rewriter, op->getLoc(), op->getOperands(), options, state);
    if (failed(operands))
      return failure();
    ConcreteModel::create(rewriter, cast<OpTy>(op), operands->work);
    if (failed(operands->copyBack(rewriter, op->getLoc(), options)))
      return failure();
    replaceOpWithBufferizedValues(rewriter, op, operands->buffers);
    return success();
  }
};

struct AllReduceModel : InPlaceModel<AllReduceModel, AllReduceOp> {
  static void create(RewriterBase &b, AllReduceOp op, ValueRange buffers) {
    BufferAllReduceOp::create(b, op.getLoc(), op.getKindAttr(), buffers,
                              op.getRoleAttr(), op.getGroupAttr());
  }
};

struct ScaleModel : InPlaceModel<ScaleModel, ScaleOp> {
  static void create(RewriterBase &b, ScaleOp op, ValueRange buffers) {
    BufferScaleOp::create(b, op.getLoc(), buffers, op.getFactorAttr());
  }
};

struct OrthogonalizeModel : InPlaceModel<OrthogonalizeModel, OrthogonalizeOp> {
  static void create(RewriterBase &b, OrthogonalizeOp op, ValueRange buffers) {
    BufferOrthogonalizeOp::create(b, op.getLoc(), buffers, op.getEpsilonAttr());
  }
};

//===----------------------------------------------------------------------===//
// allreduce_start and wait
//===----------------------------------------------------------------------===//

struct AllReduceStartModel
    : NonAliasingModel<AllReduceStartModel, AllReduceStartOp,
                       /*Reads=*/true, /*Writes=*/false> {
  /// A function argument may be reduced in place (reducesInPlace).
  bool bufferizesToMemoryWrite(Operation *, OpOperand &operand,
                               const AnalysisState &) const {
    return isFunctionArgumentTensor(operand.get());
  }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto start = cast<AllReduceStartOp>(op);
    Location loc = op->getLoc();
    SmallVector<Value> buffers;
    for (Value input : start.getInputs()) {
      // Decided before getBuffer adds a use of `input`.
      bool inPlace = reducesInPlace(start, input);
      FailureOr<Value> buffer = getBuffer(rewriter, input, options, state);
      if (failed(buffer))
        return failure();
      auto type = cast<MemRefType>(buffer->getType());
      // In place only in a contiguous buffer (the runtime's): an argument
      // with a strided layout (One-Shot's default for function boundaries)
      // is reduced in a contiguous copy, which becomes the result.
      if (inPlace && isContiguousBuffer(type)) {
        buffers.push_back(*buffer);
        continue;
      }
      // A strided view is copied to a fresh buffer anyway; a contiguous
      // one is copied by the runtime (it may be device memory).
      FailureOr<Value> usable = contiguous(rewriter, loc, *buffer, options);
      if (failed(usable))
        return failure();
      if (*usable == *buffer) {
        FailureOr<Value> copy = allocate(
            rewriter, loc, type, dynamicSizes(rewriter, loc, *buffer), options);
        if (failed(copy))
          return failure();
        BufferCopyOp::create(rewriter, loc, ValueRange(*buffer),
                             ValueRange(*copy));
        usable = copy;
      }
      buffers.push_back(*usable);
    }
    SmallVector<Type> types = llvm::to_vector(ValueRange(buffers).getTypes());
    auto request = RequestType::get(op->getContext(), types);
    replaceOpWithNewBufferizedOp<BufferAllReduceStartOp>(
        rewriter, op, request, start.getKindAttr(), buffers,
        start.getRoleAttr(), start.getGroupAttr());
    return success();
  }
};

struct WaitModel : NonAliasingModel<WaitModel, WaitOp, /*Reads=*/false,
                                    /*Writes=*/false> {
  FailureOr<BufferLikeType>
  getBufferType(Operation *op, Value value, const BufferizationOptions &options,
                const BufferizationState &state,
                SmallVector<Value> &invocationStack) const {
    unsigned index = cast<OpResult>(value).getResultNumber();
    Operation *def = cast<WaitOp>(op).getRequest().getDefiningOp();
    if (auto started = dyn_cast_or_null<BufferAllReduceStartOp>(def))
      return cast<BufferLikeType>(started.getBuffers()[index].getType());
    auto start = dyn_cast_or_null<AllReduceStartOp>(def);
    if (!start)
      return op->emitError("the request does not come from a "
                           "'ddp.allreduce_start' in this region");
    // In place or a copy, the buffer has the identity layout.
    auto tensor = cast<RankedTensorType>(start.getInputs()[index].getType());
    return cast<BufferLikeType>(identityBuffer(tensor));
  }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &,
                          BufferizationState &) const {
    auto wait = cast<WaitOp>(op);
    auto start = wait.getRequest().getDefiningOp<BufferAllReduceStartOp>();
    if (!start)
      return op->emitError("the request does not come from a "
                           "'ddp.allreduce_start' in this region");
    BufferWaitOp::create(rewriter, op->getLoc(), wait.getRequest());
    replaceOpWithBufferizedValues(rewriter, op, start.getBuffers());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Fresh outputs: cast, projections, reconstruct, random_normal, top_k
//===----------------------------------------------------------------------===//

/// The analysis side of ops that read their tensor operands and write
/// new tensors: fresh identity-layout buffers.
template <typename ConcreteModel, typename OpTy>
struct FreshBuffersModel : NonAliasingModel<ConcreteModel, OpTy,
                                            /*Reads=*/true, /*Writes=*/false> {
  bool bufferizesToAllocation(Operation *, Value) const { return true; }
  FailureOr<BufferLikeType> getBufferType(Operation *, Value value,
                                          const BufferizationOptions &,
                                          const BufferizationState &,
                                          SmallVector<Value> &) const {
    auto type = cast<RankedTensorType>(value.getType());
    return cast<BufferLikeType>(identityBuffer(type));
  }
};

/// Ops that read their tensor operands and write new tensors of their
/// operands' shapes (or static ones).
template <typename ConcreteModel, typename OpTy>
struct FreshResultModel : FreshBuffersModel<ConcreteModel, OpTy> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    SmallVector<Value> tensors;
    for (Value operand : op->getOperands())
      if (isa<TensorType>(operand.getType()))
        tensors.push_back(operand);
    FailureOr<SmallVector<Value>> inputs =
        contiguousBuffers(rewriter, op->getLoc(), tensors, options, state);
    if (failed(inputs))
      return failure();
    // Only cast can have dynamic shapes; its result i has input i's shape.
    FailureOr<SmallVector<Value>> outputs =
        allocateResults(rewriter, op, *inputs, options);
    if (failed(outputs))
      return failure();
    ConcreteModel::create(rewriter, cast<OpTy>(op), *inputs, *outputs);
    replaceOpWithBufferizedValues(rewriter, op, *outputs);
    return success();
  }
};

struct CastModel : FreshResultModel<CastModel, CastOp> {
  static void create(RewriterBase &b, CastOp op, ArrayRef<Value> inputs,
                     ArrayRef<Value> outputs) {
    BufferCastOp::create(b, op.getLoc(), inputs, outputs, op.getFactorAttr());
  }
};

/// project, backproject and their _residual forms: operands are the
/// matrices, [the residuals,] then the factors.
template <typename OpTy, bool Transposed, bool Residual>
struct ProjectionModel
    : FreshResultModel<ProjectionModel<OpTy, Transposed, Residual>, OpTy> {
  static void create(RewriterBase &b, OpTy op, ArrayRef<Value> inputs,
                     ArrayRef<Value> outputs) {
    size_t n = outputs.size();
    ArrayRef<Value> matrices = inputs.take_front(n);
    ArrayRef<Value> residuals =
        Residual ? inputs.slice(n, n) : ArrayRef<Value>();
    ArrayRef<Value> factors = inputs.take_back(n);
    BufferProjectOp::create(b, op.getLoc(), matrices, residuals, factors,
                            outputs, Transposed);
  }
};

struct ReconstructModel : FreshResultModel<ReconstructModel, ReconstructOp> {
  static void create(RewriterBase &b, ReconstructOp op, ArrayRef<Value> inputs,
                     ArrayRef<Value> outputs) {
    size_t n = outputs.size();
    BufferReconstructOp::create(b, op.getLoc(), inputs.take_front(n),
                                inputs.take_back(n), ValueRange(), ValueRange(),
                                outputs);
  }
};

struct RandomNormalModel : FreshResultModel<RandomNormalModel, RandomNormalOp> {
  static void create(RewriterBase &b, RandomNormalOp op, ArrayRef<Value>,
                     ArrayRef<Value> outputs) {
    BufferRandomNormalOp::create(b, op.getLoc(), op.getStep(), op.getSeedAttr(),
                                 op.getStreamAttr(), outputs.front());
  }
};

struct TopKModel : FreshResultModel<TopKModel, TopKOp> {
  static void create(RewriterBase &b, TopKOp op, ArrayRef<Value> inputs,
                     ArrayRef<Value> outputs) {
    BufferTopKOp::create(b, op.getLoc(), inputs.front(), outputs[0],
                         outputs[1]);
  }
};

/// allgather: reads its inputs, writes fresh buffers of world size times
/// their shape (the leading dimension is the world size, known at run time).
struct AllGatherModel : FreshBuffersModel<AllGatherModel, AllGatherOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto gather = cast<AllGatherOp>(op);
    Location loc = op->getLoc();
    FailureOr<SmallVector<Value>> inputs =
        contiguousBuffers(rewriter, loc, gather.getInputs(), options, state);
    if (failed(inputs))
      return failure();
    Value world = WorldSizeOp::create(rewriter, loc, rewriter.getIndexType());
    SmallVector<Value> outputs;
    for (auto [input, result] : llvm::zip(*inputs, gather.getResults())) {
      SmallVector<Value> sizes{world};
      llvm::append_range(sizes, dynamicSizes(rewriter, loc, input));
      FailureOr<Value> output =
          allocate(rewriter, loc, cast<RankedTensorType>(result.getType()),
                   sizes, options);
      if (failed(output))
        return failure();
      outputs.push_back(*output);
    }
    BufferAllGatherOp::create(rewriter, loc, *inputs, outputs,
                              gather.getRole());
    replaceOpWithBufferizedValues(rewriter, op, outputs);
    return success();
  }
};

/// inspect: reads its operand, returns flags (no tensor results).
struct InspectModel : NonAliasingModel<InspectModel, InspectOp,
                                       /*Reads=*/true, /*Writes=*/false> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto inspect = cast<InspectOp>(op);
    FailureOr<SmallVector<Value>> input = contiguousBuffers(
        rewriter, op->getLoc(), inspect.getInput(), options, state);
    if (failed(input))
      return failure();
    auto flags =
        BufferInspectOp::create(rewriter, op->getLoc(), input->front());
    replaceOpWithBufferizedValues(rewriter, op, flags.getResults());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// reconstruct_residual
//===----------------------------------------------------------------------===//

struct ReconstructResidualModel
    : public BufferizableOpInterface::ExternalModel<ReconstructResidualModel,
                                                    ReconstructResidualOp> {
  /// Which group operand `operand` belongs to: 0 P, 1 Q, 2 G, 3 E.
  static unsigned group(ReconstructResidualOp op, OpOperand &operand) {
    unsigned n = op.getPs().size();
    return operand.getOperandNumber() / n;
  }
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *op, OpOperand &operand,
                               const AnalysisState &) const {
    return group(cast<ReconstructResidualOp>(op), operand) >= 2;
  }
  /// G becomes M_hat (result i), E becomes E' (result n + i).
  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &) const {
    auto reconstruct = cast<ReconstructResidualOp>(op);
    unsigned n = reconstruct.getPs().size();
    unsigned which = group(reconstruct, operand);
    if (which < 2)
      return {};
    unsigned index = operand.getOperandNumber() % n;
    return {
        {op->getResult((which - 2) * n + index), BufferRelation::Equivalent}};
  }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto reconstruct = cast<ReconstructResidualOp>(op);
    Location loc = op->getLoc();
    FailureOr<SmallVector<Value>> ps =
        contiguousBuffers(rewriter, loc, reconstruct.getPs(), options, state);
    FailureOr<SmallVector<Value>> qs =
        contiguousBuffers(rewriter, loc, reconstruct.getQs(), options, state);
    if (failed(ps) || failed(qs))
      return failure();
    // G and E are updated in place: keep their buffers for the results and
    // copy back what a strided view had to be copied out of.
    FailureOr<InPlaceBuffers> updated = InPlaceBuffers::get(
        rewriter, loc,
        llvm::to_vector(llvm::concat<Value>(reconstruct.getMatrices(),
                                            reconstruct.getResiduals())),
        options, state);
    if (failed(updated))
      return failure();
    size_t n = ps->size();
    ArrayRef<Value> matrices = ArrayRef<Value>(updated->work).take_front(n);
    ArrayRef<Value> residuals = ArrayRef<Value>(updated->work).take_back(n);
    BufferReconstructOp::create(rewriter, loc, *ps, *qs, matrices, residuals,
                                matrices);
    if (failed(updated->copyBack(rewriter, loc, options)))
      return failure();
    replaceOpWithBufferizedValues(rewriter, op, updated->buffers);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// state_load and state_store
//===----------------------------------------------------------------------===//

struct StateLoadModel : NonAliasingModel<StateLoadModel, StateLoadOp,
                                         /*Reads=*/false, /*Writes=*/false> {
  FailureOr<BufferLikeType> getBufferType(Operation *, Value value,
                                          const BufferizationOptions &,
                                          const BufferizationState &,
                                          SmallVector<Value> &) const {
    auto type = cast<RankedTensorType>(value.getType());
    return cast<BufferLikeType>(identityBuffer(type));
  }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &) const {
    auto load = cast<StateLoadOp>(op);
    auto type = cast<RankedTensorType>(load.getType());
    Value state = BufferStateOp::create(
        rewriter, op->getLoc(), identityBuffer(type), load.getStateAttr());
    if (mayAliasStateBuffer(load, options)) {
      replaceOpWithBufferizedValues(rewriter, op, state);
      return success();
    }
    FailureOr<Value> copy =
        allocate(rewriter, op->getLoc(), type, ValueRange(), options);
    if (failed(copy))
      return failure();
    BufferCopyOp::create(rewriter, op->getLoc(), ValueRange(state),
                         ValueRange(*copy));
    replaceOpWithBufferizedValues(rewriter, op, *copy);
    return success();
  }
};

struct StateStoreModel : NonAliasingModel<StateStoreModel, StateStoreOp,
                                          /*Reads=*/true, /*Writes=*/false> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto store = cast<StateStoreOp>(op);
    FailureOr<Value> source =
        getBuffer(rewriter, store.getValue(), options, state);
    if (failed(source))
      return failure();
    // Computed in place in the state's own buffer: nothing to copy.
    auto inPlace = source->getDefiningOp<BufferStateOp>();
    if (!inPlace || inPlace.getState() != store.getState()) {
      FailureOr<Value> usable =
          contiguous(rewriter, op->getLoc(), *source, options);
      if (failed(usable))
        return failure();
      auto type = cast<RankedTensorType>(store.getValue().getType());
      Value destination = BufferStateOp::create(
          rewriter, op->getLoc(), identityBuffer(type), store.getStateAttr());
      BufferCopyOp::create(rewriter, op->getLoc(), ValueRange(*usable),
                           ValueRange(destination));
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// add_residual and update_residual have no runtime call of their own:
/// ddp-fuse-kernels folds them into the projections and the reconstruction.
template <typename OpTy>
struct UnfusedModel : NonAliasingModel<UnfusedModel<OpTy>, OpTy,
                                       /*Reads=*/true, /*Writes=*/false> {
  LogicalResult bufferize(Operation *op, RewriterBase &,
                          const BufferizationOptions &,
                          BufferizationState &) const {
    return op->emitOpError()
           << "has no runtime call of its own; run --ddp-fuse-kernels first, "
              "which folds it into ddp.project_residual, "
              "ddp.backproject_residual and ddp.reconstruct_residual";
  }
};

} // namespace

void mlir::ddp::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, DDPDialect *) {
    AllReduceOp::attachInterface<AllReduceModel>(*context);
    AllReduceStartOp::attachInterface<AllReduceStartModel>(*context);
    WaitOp::attachInterface<WaitModel>(*context);
    ScaleOp::attachInterface<ScaleModel>(*context);
    CastOp::attachInterface<CastModel>(*context);
    ProjectOp::attachInterface<ProjectionModel<ProjectOp, false, false>>(
        *context);
    BackprojectOp::attachInterface<ProjectionModel<BackprojectOp, true, false>>(
        *context);
    ProjectResidualOp::attachInterface<
        ProjectionModel<ProjectResidualOp, false, true>>(*context);
    BackprojectResidualOp::attachInterface<
        ProjectionModel<BackprojectResidualOp, true, true>>(*context);
    OrthogonalizeOp::attachInterface<OrthogonalizeModel>(*context);
    ReconstructOp::attachInterface<ReconstructModel>(*context);
    ReconstructResidualOp::attachInterface<ReconstructResidualModel>(*context);
    RandomNormalOp::attachInterface<RandomNormalModel>(*context);
    TopKOp::attachInterface<TopKModel>(*context);
    InspectOp::attachInterface<InspectModel>(*context);
    AllGatherOp::attachInterface<AllGatherModel>(*context);
    StateLoadOp::attachInterface<StateLoadModel>(*context);
    StateStoreOp::attachInterface<StateStoreModel>(*context);
    AddResidualOp::attachInterface<UnfusedModel<AddResidualOp>>(*context);
    UpdateResidualOp::attachInterface<UnfusedModel<UpdateResidualOp>>(*context);
    context->loadDialect<memref::MemRefDialect>();
  });
}
