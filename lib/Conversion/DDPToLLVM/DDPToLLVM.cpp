//===- DDPToLLVM.cpp - ddp buffer ops to runtime calls --------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every ddp.buffer op becomes one call of the runtime's C ABI (ddprt.h) for
// the whole bucket: the memrefs are packed into stack arrays of
// ddprt_buffer / ddprt_matrix structs, the context is the runtime's current
// context, and every status goes to ddprt_check, which reports a failure
// with the op's name and source location. The step counter (an i64
// ddp.state) is read and written in place: the runtime keeps it in host
// memory. ddp.state declarations disappear; the runtime creates a state on
// first use.
//
//===----------------------------------------------------------------------===//

#include "ddp/Conversion/DDPToLLVM/DDPToLLVM.h"

#include "RuntimeCall.h"

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/IR/RuntimeABI.h"

#include "mlir/Conversion/ConvertToLLVM/ToLLVMInterface.h"
#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::ddp;
using namespace mlir::ddp::lowering;

namespace {

/// Lowers an op to runtime calls. Before any IR is built it checks that the
/// runtime has every buffer's element type.
template <typename OpTy>
struct RuntimePattern : public ConvertOpToLLVMPattern<OpTy> {
  using OpAdaptor = typename OpTy::Adaptor;

  RuntimePattern(const LLVMTypeConverter &converter,
                 std::shared_ptr<SharedState> shared)
      : ConvertOpToLLVMPattern<OpTy>(converter), shared(std::move(shared)) {}

  virtual LogicalResult lower(OpTy op, OpAdaptor adaptor,
                              RuntimeCall &rt) const = 0;

  LogicalResult
  matchAndRewrite(OpTy op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const final {
    // The verifiers admit only element types the runtime has; this catches
    // IR built without verification.
    for (Type type :
         llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes()))
      if (auto memref = dyn_cast<MemRefType>(type);
          memref && !getRuntimeDtype(memref.getElementType()))
        return op->emitOpError()
               << "the runtime has no element type " << memref.getElementType()
               << " (it takes " << computeElementTypeNames(op->getContext())
               << ")";
    RuntimeCall rt(rewriter, op, *this->getTypeConverter(), shared.get());
    return lower(op, adaptor, rt);
  }

  /// The op becomes one checked call of `name` and nothing else.
  LogicalResult replaceWithCall(OpTy op, RuntimeCall &rt, StringRef name,
                                ArrayRef<Value> args) const {
    if (llvm::is_contained(args, Value()) || failed(rt.checkedCall(name, args)))
      return failure();
    rt.b.eraseOp(op);
    return success();
  }

  std::shared_ptr<SharedState> shared;
};

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

struct AllReduceLowering : RuntimePattern<BufferAllReduceOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferAllReduceOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    SmallVector<Value> args = {
        rt.constantI32(getRuntimeReduction(op.getKind())),
        rt.constantI32(getRuntimeRole(op.getRole())),
        rt.buffers(adaptor.getBuffers(), op.getBuffers()),
        rt.constantI32(op.getNumTensors())};
    // Over the world: the plain entry point, as before groups existed.
    if (op.getGroup() == CommGroup::world)
      return replaceWithCall(op, rt, "ddprt_allreduce", args);
    args.insert(args.begin(), rt.constantI32(getRuntimeGroup(op.getGroup())));
    return replaceWithCall(op, rt, "ddprt_allreduce_group", args);
  }
};

struct AllReduceStartLowering : RuntimePattern<BufferAllReduceStartOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferAllReduceStartOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    Value buffers = rt.buffers(adaptor.getBuffers(), op.getBuffers());
    Value slot = rt.entryAlloca(rt.ptr, 1);
    LLVM::StoreOp::create(rt.b, rt.loc, rt.nullPointer(), slot);
    SmallVector<Value> args = {
        rt.constantI32(getRuntimeReduction(op.getKind())),
        rt.constantI32(getRuntimeRole(op.getRole())), buffers,
        rt.constantI32(op.getBuffers().size()), slot};
    bool world = op.getGroup() == CommGroup::world;
    if (!world)
      args.insert(args.begin(), rt.constantI32(getRuntimeGroup(op.getGroup())));
    if (failed(rt.checkedCall(world ? "ddprt_allreduce_start"
                                    : "ddprt_allreduce_group_start",
                              args)))
      return failure();
    rt.b.replaceOp(op, LLVM::LoadOp::create(rt.b, rt.loc, rt.ptr, slot));
    return success();
  }
};

struct WaitLowering : RuntimePattern<BufferWaitOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferWaitOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(op, rt, "ddprt_wait", {adaptor.getRequest()});
  }
};

struct HostBarrierLowering : RuntimePattern<BufferHostBarrierOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferHostBarrierOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(op, rt, "ddprt_host_barrier", {});
  }
};

struct AllGatherLowering : RuntimePattern<BufferAllGatherOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferAllGatherOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(op, rt, "ddprt_allgather",
                           {rt.constantI32(getRuntimeRole(op.getRole())),
                            rt.buffers(adaptor.getInputs(), op.getInputs()),
                            rt.buffers(adaptor.getOutputs(), op.getOutputs()),
                            rt.constantI32(op.getNumTensors())});
  }
};

/// ddprt_world_size(context), widened to the index type.
struct WorldSizeLowering : RuntimePattern<WorldSizeOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(WorldSizeOp op, OpAdaptor,
                      RuntimeCall &rt) const override {
    Value size = rt.call("ddprt_world_size", {rt.context()}, rt.i32);
    Type index = getTypeConverter()->convertType(op.getType());
    if (!size || !index)
      return op.emitOpError("cannot declare the runtime function "
                            "'ddprt_world_size'");
    rt.b.replaceOp(op, LLVM::SExtOp::create(rt.b, rt.loc, index, size));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Scale, cast, copy, random_normal, top_k
//===----------------------------------------------------------------------===//

struct ScaleLowering : RuntimePattern<BufferScaleOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferScaleOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(op, rt, "ddprt_scale",
                           {rt.constantI32(getRuntimeScale(op.getFactor())),
                            rt.buffers(adaptor.getBuffers(), op.getBuffers()),
                            rt.constantI32(op.getNumTensors())});
  }
};

struct CastLowering : RuntimePattern<BufferCastOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferCastOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(op, rt, "ddprt_cast",
                           {rt.constantI32(getRuntimeScale(op.getFactor())),
                            rt.buffers(adaptor.getInputs(), op.getInputs()),
                            rt.buffers(adaptor.getOutputs(), op.getOutputs()),
                            rt.constantI32(op.getNumTensors())});
  }
};

struct CopyLowering : RuntimePattern<BufferCopyOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferCopyOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(
        op, rt, "ddprt_copy",
        {rt.buffers(adaptor.getSources(), op.getSources()),
         rt.buffers(adaptor.getDestinations(), op.getDestinations()),
         rt.constantI32(op.getNumTensors())});
  }
};

struct RandomNormalLowering : RuntimePattern<BufferRandomNormalOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferRandomNormalOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(
        op, rt, "ddprt_random_normal",
        {rt.buffers(adaptor.getOutput(), op.getOutputMutable()),
         rt.constantI64(op.getSeed()), rt.constantI64(op.getStream()),
         adaptor.getStep()});
  }
};

struct CountUncompressedLowering : RuntimePattern<CountUncompressedOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(CountUncompressedOp op, OpAdaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(op, rt, "ddprt_count_uncompressed",
                           {rt.constantI64(op.getElements())});
  }
};

struct TopKLowering : RuntimePattern<BufferTopKOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferTopKOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(
        op, rt, "ddprt_top_k",
        {rt.buffers(adaptor.getInput(), op.getInputMutable()),
         rt.buffers(adaptor.getValues(), op.getValuesMutable()),
         rt.buffers(adaptor.getIndices(), op.getIndicesMutable())});
  }
};

//===----------------------------------------------------------------------===//
// PowerSGD
//===----------------------------------------------------------------------===//

struct ProjectLowering : RuntimePattern<BufferProjectOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferProjectOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(
        op, rt, op.getTransposed() ? "ddprt_backproject" : "ddprt_project",
        {rt.matrices(adaptor.getMatrices(), op.getMatrices()),
         rt.matrices(adaptor.getResiduals(), op.getResiduals()),
         rt.matrices(adaptor.getFactors(), op.getFactors()),
         rt.matrices(adaptor.getOutputs(), op.getOutputs()),
         rt.constantI32(op.getNumTensors())});
  }
};

struct OrthogonalizeLowering : RuntimePattern<BufferOrthogonalizeOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferOrthogonalizeOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(
        op, rt, "ddprt_orthogonalize",
        {rt.matrices(adaptor.getBuffers(), op.getBuffers()),
         rt.constantI32(op.getNumTensors()),
         rt.constant(rt.b.getF64Type(), op.getEpsilonAttr())});
  }
};

struct ReconstructLowering : RuntimePattern<BufferReconstructOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferReconstructOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(
        op, rt, "ddprt_reconstruct",
        {rt.matrices(adaptor.getPs(), op.getPs()),
         rt.matrices(adaptor.getQs(), op.getQs()),
         rt.matrices(adaptor.getMatrices(), op.getMatrices()),
         rt.matrices(adaptor.getResiduals(), op.getResiduals()),
         rt.matrices(adaptor.getOutputs(), op.getOutputs()),
         rt.constantI32(op.getNumTensors())});
  }
};

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

/// The data pointer of state `name` holding `numel` elements of `type`.
FailureOr<Value> stateData(RuntimeCall &rt, StringRef name, Type element,
                           int64_t numel) {
  std::optional<ddprt_dtype> dtype = getRuntimeDtype(element);
  if (!dtype)
    return rt.op->emitOpError()
           << "the runtime cannot hold state of element type " << element;
  Value slot = rt.entryAlloca(rt.ptr, 1);
  LLVM::StoreOp::create(rt.b, rt.loc, rt.nullPointer(), slot);
  if (failed(rt.checkedCall("ddprt_state_get",
                            {rt.string(name), rt.constantI32(*dtype),
                             rt.constantI64(numel), slot})))
    return failure();
  Value state = LLVM::LoadOp::create(rt.b, rt.loc, rt.ptr, slot);
  return rt.call("ddprt_state_data", {state}, rt.ptr);
}

struct BufferStateLowering : RuntimePattern<BufferStateOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferStateOp op, OpAdaptor,
                      RuntimeCall &rt) const override {
    MemRefType type = op.getBuffer().getType();
    FailureOr<Value> data = stateData(rt, op.getState(), type.getElementType(),
                                      type.getNumElements());
    if (failed(data))
      return failure();
    Value descriptor = MemRefDescriptor::fromStaticShape(
        rt.b, rt.loc, *getTypeConverter(), type, *data);
    rt.b.replaceOp(op, descriptor);
    return success();
  }
};

/// The step counter: an i64 state read and written in place (host memory).
/// Tensor states were bufferized into ddp.buffer.state.
struct ScalarStateLoadLowering : RuntimePattern<StateLoadOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(StateLoadOp op, OpAdaptor,
                      RuntimeCall &rt) const override {
    if (isa<ShapedType>(op.getType()))
      return rt.b.notifyMatchFailure(op, "tensor state is bufferized");
    FailureOr<Value> data = stateData(rt, op.getState(), op.getType(), 1);
    if (failed(data))
      return failure();
    rt.b.replaceOp(op, LLVM::LoadOp::create(rt.b, rt.loc, op.getType(), *data));
    return success();
  }
};

struct ScalarStateStoreLowering : RuntimePattern<StateStoreOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(StateStoreOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    Type type = op.getValue().getType();
    if (isa<ShapedType>(type))
      return rt.b.notifyMatchFailure(op, "tensor state is bufferized");
    FailureOr<Value> data = stateData(rt, op.getState(), type, 1);
    if (failed(data))
      return failure();
    LLVM::StoreOp::create(rt.b, rt.loc, adaptor.getValue(), *data);
    rt.b.eraseOp(op);
    return success();
  }
};

/// ddprt_inspect of one buffer into two stack words, read back as i1s.
struct InspectLowering : RuntimePattern<BufferInspectOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferInspectOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    Value flags = rt.entryAlloca(rt.i32, 2);
    Value nonzero = LLVM::GEPOp::create(rt.b, rt.loc, rt.ptr, rt.i32, flags,
                                        ArrayRef<LLVM::GEPArg>{1});
    // Written by the call; "finite, nonzero" if a failed call leaves them.
    LLVM::StoreOp::create(rt.b, rt.loc, rt.constantI32(1), flags);
    LLVM::StoreOp::create(rt.b, rt.loc, rt.constantI32(1), nonzero);
    Value buffer = rt.buffers(adaptor.getInput(), op.getInputMutable());
    if (!buffer ||
        failed(rt.checkedCall("ddprt_inspect",
                              {buffer, rt.constantI32(1), flags, nonzero})))
      return failure();
    SmallVector<Value> results;
    for (Value slot : {flags, nonzero}) {
      Value word = LLVM::LoadOp::create(rt.b, rt.loc, rt.i32, slot);
      results.push_back(LLVM::ICmpOp::create(
          rt.b, rt.loc, LLVM::ICmpPredicate::ne, word, rt.constantI32(0)));
    }
    rt.b.replaceOp(op, results);
    return success();
  }
};

/// A check in a step: the block split at the op, the rest of it
/// (`continuation`) and a new block for when the check fails (`failed`,
/// where the rewriter now inserts).
struct CheckBlocks {
  Block *block, *continuation, *failed;
};

CheckBlocks splitForCheck(ConversionPatternRewriter &rewriter) {
  Block *block = rewriter.getInsertionBlock();
  Block *continuation =
      rewriter.splitBlock(block, rewriter.getInsertionPoint());
  Block *failed = rewriter.createBlock(block->getParent());
  return {block, continuation, failed};
}

/// Replaces the check `op` with a branch on `passed`: on to the rest of
/// the block, or into the failure block.
void branchOnCheck(ConversionPatternRewriter &rewriter, Operation *op,
                   Value passed, const CheckBlocks &blocks) {
  rewriter.setInsertionPointToEnd(blocks.block);
  rewriter.replaceOpWithNewOp<LLVM::CondBrOp>(op, passed, blocks.continuation,
                                              blocks.failed);
}

/// cf.assert in a step (e.g. ddp-apply-hook's check of the size a hook
/// returns, where it is known only at run time): on failure
/// ddprt_fail(context, "cf.assert at <location>", message), so that the host
/// reports it as it reports a failed runtime call and stops the job; abort()
/// if the host's handler returns. Preferred over upstream's lowering (puts
/// and abort: a crash, with LLVM's stack dump in a host that installed it).
struct AssertLowering : ConvertOpToLLVMPattern<cf::AssertOp> {
  AssertLowering(const LLVMTypeConverter &converter,
                 std::shared_ptr<SharedState> shared)
      : ConvertOpToLLVMPattern(converter, /*benefit=*/2),
        shared(std::move(shared)) {}

  LogicalResult
  matchAndRewrite(cf::AssertOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    CheckBlocks blocks = splitForCheck(rewriter);
    RuntimeCall rt(rewriter, op, *getTypeConverter(), shared.get());
    Type voidType = LLVM::LLVMVoidType::get(op->getContext());
    Value context = rt.context();
    rt.call("ddprt_fail",
            {context, rt.string(describe(op)), rt.string(op.getMsg())},
            voidType);
    rt.call("abort", {}, voidType);
    LLVM::UnreachableOp::create(rewriter, op.getLoc());
    branchOnCheck(rewriter, op, adaptor.getArg(), blocks);
    return success();
  }

  std::shared_ptr<SharedState> shared;
};

/// memref.alloc with ddp.device_memory (ddp-device-allocations): the
/// buffer from ddprt_device_alloc, an identity-layout descriptor around it
/// (its allocated and aligned pointers the same: the runtime's memory is
/// aligned for every element type).
struct DeviceAllocLowering : ConvertOpToLLVMPattern<memref::AllocOp> {
  DeviceAllocLowering(const LLVMTypeConverter &converter,
                      std::shared_ptr<SharedState> shared)
      : ConvertOpToLLVMPattern(converter, /*benefit=*/2),
        shared(std::move(shared)) {}

  LogicalResult
  matchAndRewrite(memref::AllocOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    MemRefType type = op.getType();
    if (!op->hasAttr(DDPDialect::DeviceMemoryAttrHelper::getNameStr()) ||
        !isConvertibleAndHasIdentityMaps(type))
      return failure();
    Location loc = op.getLoc();
    SmallVector<Value, 4> sizes, strides;
    Value bytes;
    getMemRefDescriptorSizes(loc, type, adaptor.getDynamicSizes(), rewriter,
                             sizes, strides, bytes, /*sizeInBytes=*/true);
    RuntimeCall rt(rewriter, op, *getTypeConverter(), shared.get());
    Value slot = rt.entryAlloca(rt.ptr, 1);
    if (failed(rt.checkedCall("ddprt_device_alloc", {bytes, slot})))
      return failure();
    Value pointer = LLVM::LoadOp::create(rewriter, loc, rt.ptr, slot);
    MemRefDescriptor descriptor = createMemRefDescriptor(
        loc, type, pointer, pointer, sizes, strides, rewriter);
    rewriter.replaceOp(op, Value(descriptor));
    return success();
  }

  std::shared_ptr<SharedState> shared;
};

/// memref.dealloc with ddp.device_memory: ddprt_device_free, in stream
/// order.
struct DeviceDeallocLowering : ConvertOpToLLVMPattern<memref::DeallocOp> {
  DeviceDeallocLowering(const LLVMTypeConverter &converter,
                        std::shared_ptr<SharedState> shared)
      : ConvertOpToLLVMPattern(converter, /*benefit=*/2),
        shared(std::move(shared)) {}

  LogicalResult
  matchAndRewrite(memref::DeallocOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!op->hasAttr(DDPDialect::DeviceMemoryAttrHelper::getNameStr()))
      return failure();
    RuntimeCall rt(rewriter, op, *getTypeConverter(), shared.get());
    Value pointer = MemRefDescriptor(adaptor.getMemref())
                        .allocatedPtr(rewriter, op.getLoc());
    if (failed(rt.checkedCall("ddprt_device_free", {pointer})))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }

  std::shared_ptr<SharedState> shared;
};

/// gpu.launch_func of an outlined kernel whose gpu.binary holds its image
/// (ddp-lower-to-llvm{target=cuda}): ddprt_launch_kernel(context, image,
/// name, grid, block, shared memory, params), the image a constant global
/// (NUL-terminated: PTX is text), each parameter a stack slot and `params`
/// an array of pointers to them, as cuLaunchKernel takes them. Memrefs are
/// passed as the kernel takes them (convert-gpu-to-nvvm): their
/// descriptors' fields, one parameter each. No module loading at program
/// start (upstream's translation of gpu.binary), so a library loaded before
/// its host functions are bound is safe; the runtime loads each image once,
/// on first launch, on the context's device.
struct LaunchFuncLowering : ConvertOpToLLVMPattern<gpu::LaunchFuncOp> {
  LaunchFuncLowering(const LLVMTypeConverter &converter,
                     std::shared_ptr<SharedState> shared)
      : ConvertOpToLLVMPattern(converter), shared(std::move(shared)) {}

  LogicalResult
  matchAndRewrite(gpu::LaunchFuncOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getAsyncToken() || !op.getAsyncDependencies().empty() ||
        op.hasClusterSize() || op.getAsyncObject())
      return rewriter.notifyMatchFailure(
          op, "an async, clustered or stream-given launch");
    FailureOr<StringRef> image = kernelImage(
        op, /*report=*/true, shared ? &shared->symbolTables : nullptr);
    if (failed(image))
      return failure();
    RuntimeCall rt(rewriter, op, *getTypeConverter(), shared.get());
    Location loc = op.getLoc();
    SmallVector<Value, 4> params = getTypeConverter()->promoteOperands(
        loc, op.getKernelOperands(), adaptor.getKernelOperands(), rewriter,
        /*useBarePtrCallConv=*/false);
    Value array = params.empty() ? rt.nullPointer()
                                 : rt.entryAlloca(rt.ptr, params.size());
    for (auto [i, param] : llvm::enumerate(params)) {
      Value slot = rt.entryAlloca(param.getType(), 1);
      LLVM::StoreOp::create(rewriter, loc, param, slot);
      Value element = LLVM::GEPOp::create(rewriter, loc, rt.ptr, rt.ptr, array,
                                          ArrayRef<LLVM::GEPArg>{int32_t(i)});
      LLVM::StoreOp::create(rewriter, loc, slot, element);
    }
    Value shared = adaptor.getDynamicSharedMemorySize();
    if (!shared)
      shared = rt.constantI32(0);
    // One lookup of the image (all of the step's kernels) per function.
    Value imageGlobal = rt.cachedString(
        StringAttr::get(op.getContext(),
                        "ddp.kernel_image:" +
                            op.getKernelModuleName().getValue()),
        [&] { return image->str(); });
    Value name = rt.string(op.getKernelName().getValue());
    if (!imageGlobal || !name ||
        failed(rt.checkedCall("ddprt_launch_kernel",
                              {imageGlobal, name, adaptor.getGridSizeX(),
                               adaptor.getGridSizeY(), adaptor.getGridSizeZ(),
                               adaptor.getBlockSizeX(), adaptor.getBlockSizeY(),
                               adaptor.getBlockSizeZ(), shared, array})))
      return failure();
    rewriter.eraseOp(op);
    return success();
  }

  std::shared_ptr<SharedState> shared;
};

/// ddp.report_nonfinite: when the flag is false,
/// ddprt_report_nonfinite(context, "<op> at <location>", message,
/// this_rank_only); the host warns or stops, and the step goes on if it
/// returns.
struct ReportNonFiniteLowering : ConvertOpToLLVMPattern<ReportNonFiniteOp> {
  ReportNonFiniteLowering(const LLVMTypeConverter &converter,
                          std::shared_ptr<SharedState> shared)
      : ConvertOpToLLVMPattern(converter), shared(std::move(shared)) {}

  LogicalResult
  matchAndRewrite(ReportNonFiniteOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    CheckBlocks blocks = splitForCheck(rewriter);
    RuntimeCall rt(rewriter, op, *getTypeConverter(), shared.get());
    Type voidType = LLVM::LLVMVoidType::get(op->getContext());
    rt.call("ddprt_report_nonfinite",
            {rt.context(), rt.string(describe(op)), rt.string(op.getMessage()),
             rt.constantI32(op.getThisRankOnly() ? 1 : 0)},
            voidType);
    LLVM::BrOp::create(rewriter, op.getLoc(), blocks.continuation);
    branchOnCheck(rewriter, op, adaptor.getFinite(), blocks);
    return success();
  }

  std::shared_ptr<SharedState> shared;
};

/// ddp.state declarations disappear: the runtime creates a state on first
/// use (and ddp-run before it loads a checkpoint).
struct StateLowering : ConvertOpToLLVMPattern<StateOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult
  matchAndRewrite(StateOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.eraseOp(op);
    return success();
  }
};

/// What convert-to-llvm asks of the dialect.
struct DDPToLLVMDialectInterface : public ConvertToLLVMPatternInterface {
  using ConvertToLLVMPatternInterface::ConvertToLLVMPatternInterface;
  void loadDependentDialects(MLIRContext *context) const final {
    context->loadDialect<LLVM::LLVMDialect>();
  }
  void populateConvertToLLVMConversionPatterns(
      ConversionTarget &target, LLVMTypeConverter &typeConverter,
      RewritePatternSet &patterns) const final {
    target.addIllegalDialect<DDPDialect>();
    populateDDPToLLVMConversionPatterns(typeConverter, patterns);
  }
};

} // namespace

void mlir::ddp::populateDDPToLLVMTypeConversions(LLVMTypeConverter &converter) {
  converter.addConversion([](RequestType type) {
    return LLVM::LLVMPointerType::get(type.getContext());
  });
}

void mlir::ddp::populateDDPToLLVMConversionPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    SymbolTableCollection *symbolTables) {
  populateDDPToLLVMTypeConversions(converter);
  std::shared_ptr<SharedState> shared;
  if (symbolTables)
    shared = std::make_shared<SharedState>(*symbolTables);
  patterns.add<AllReduceLowering, AllReduceStartLowering, WaitLowering,
               AllGatherLowering, WorldSizeLowering, HostBarrierLowering,
               ScaleLowering, CastLowering, CopyLowering, RandomNormalLowering,
               TopKLowering, CountUncompressedLowering, InspectLowering,
               ProjectLowering, OrthogonalizeLowering, ReconstructLowering,
               BufferStateLowering, ScalarStateLoadLowering,
               ScalarStateStoreLowering, ReportNonFiniteLowering>(converter,
                                                                  shared);
  patterns.add<StateLowering>(converter);
}

void mlir::ddp::populateDDPLaunchToLLVMConversionPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    SymbolTableCollection *symbolTables) {
  std::shared_ptr<SharedState> shared;
  if (symbolTables)
    shared = std::make_shared<SharedState>(*symbolTables);
  patterns.add<LaunchFuncLowering, DeviceAllocLowering, DeviceDeallocLowering>(
      converter, shared);
}

void mlir::ddp::populateDDPAssertToLLVMConversionPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    SymbolTableCollection *symbolTables) {
  std::shared_ptr<SharedState> shared;
  if (symbolTables)
    shared = std::make_shared<SharedState>(*symbolTables);
  patterns.add<AssertLowering>(converter, shared);
}

void mlir::ddp::registerConvertDDPToLLVMInterface(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *, DDPDialect *dialect) {
    dialect->addInterfaces<DDPToLLVMDialectInterface>();
  });
}
