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
#include "ddp/Conversion/Passes.h"
#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/IR/GradientNames.h"
#include "ddp/Dialect/DDP/IR/RuntimeABI.h"

#include "mlir/Analysis/DataLayoutAnalysis.h"
#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMInterface.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/MemRefBuilder.h"
#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/IR/Threading.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/DialectConversion.h"

#include "llvm/Support/SwapByteOrder.h"
#include "llvm/Support/xxhash.h"

#include <cstddef>

namespace mlir::ddp {
#define GEN_PASS_DEF_CONVERTDDPTOLLVM
#include "ddp/Conversion/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

//===----------------------------------------------------------------------===//
// The runtime's ABI, as the LLVM dialect sees it
//===----------------------------------------------------------------------===//

// Compiled code builds ddprt_buffer and ddprt_matrix as the LLVM structs
// {ptr, i32, i64} and {ptr, i32, i64, i64} with the target's natural
// alignment; ddprt.h defines them. The lowering assumes a 64-bit target, as
// the runtime does.
static_assert(sizeof(void *) == 8, "the runtime's ABI is 64-bit");
static_assert(sizeof(ddprt_dtype) == sizeof(int32_t) &&
                  sizeof(ddprt_reduction) == sizeof(int32_t) &&
                  sizeof(ddprt_role) == sizeof(int32_t) &&
                  sizeof(ddprt_world_scale) == sizeof(int32_t),
              "the lowering passes the runtime's enums as i32");
static_assert(offsetof(ddprt_buffer, data) == 0 &&
                  offsetof(ddprt_buffer, dtype) == 8 &&
                  offsetof(ddprt_buffer, numel) == 16 &&
                  sizeof(ddprt_buffer) == 24,
              "ddprt_buffer is not the LLVM struct {ptr, i32, i64}");
static_assert(offsetof(ddprt_matrix, data) == 0 &&
                  offsetof(ddprt_matrix, dtype) == 8 &&
                  offsetof(ddprt_matrix, rows) == 16 &&
                  offsetof(ddprt_matrix, cols) == 24 &&
                  sizeof(ddprt_matrix) == 32,
              "ddprt_matrix is not the LLVM struct {ptr, i32, i64, i64}");

static_assert(llvm::sys::IsLittleEndianHost,
              "ddprt_buffer and ddprt_matrix tables are written as i64 words "
              "in the host's byte order, little-endian");

/// Builds runtime calls for one op.
class RuntimeCall {
public:
  RuntimeCall(ConversionPatternRewriter &rewriter, Operation *op,
              const LLVMTypeConverter &converter, DDPToLLVMCache *cache)
      : b(rewriter), op(op), loc(op->getLoc()), converter(converter),
        ptr(LLVM::LLVMPointerType::get(op->getContext())), i32(b.getI32Type()),
        i64(b.getI64Type()), cache(cache) {
    module = op->getParentOfType<ModuleOp>();
  }

  Value constantI32(int32_t value) {
    return constant(i32, b.getI32IntegerAttr(value));
  }
  Value constantI64(int64_t value) {
    return constant(i64, b.getI64IntegerAttr(value));
  }
  Value nullPointer() {
    return cached(TypeAttr::get(ptr),
                  [&] { return LLVM::ZeroOp::create(b, loc, ptr); });
  }

  /// An llvm.mlir.constant: with a cache, one per function and value, at
  /// the start of the function's entry block.
  Value constant(Type type, TypedAttr value) {
    return cached(value, [&] {
      return LLVM::ConstantOp::create(b, loc, type, value).getResult();
    });
  }

  /// ddprt_current_context(): with a cache, one call per function, at its
  /// entry (the host sets the context before it calls the step, and the
  /// step does not change it); else one per op.
  Value context() {
    if (contextValue)
      return contextValue;
    if (!cache)
      return contextValue = call("ddprt_current_context", {}, ptr);
    Region *body = functionBody();
    Value &slot = cache->function(body).context;
    if (!slot) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&body->front());
      slot = call("ddprt_current_context", {}, ptr);
    }
    return contextValue = slot;
  }

  /// Calls `name` and returns its result (null for void).
  Value call(StringRef name, ValueRange args, Type result = {}) {
    SmallVector<Type> types(args.getTypes());
    FailureOr<LLVM::LLVMFuncOp> function;
    atModule([&](OpBuilder &builder) {
      function = LLVM::lookupOrCreateFn(builder, module, name, types, result,
                                        /*isVarArg=*/false,
                                        /*isReserved=*/false, symbolTables());
    });
    if (failed(function))
      return {};
    auto called = LLVM::CallOp::create(b, loc, *function, args);
    return result ? called.getResult() : Value();
  }

  /// Calls a runtime function that returns a ddprt_status and passes the
  /// status to ddprt_check with this op's name and location.
  LogicalResult checkedCall(StringRef name, ArrayRef<Value> args) {
    SmallVector<Value> all{context()};
    all.append(args.begin(), args.end());
    Value status = call(name, all, i32);
    if (!status)
      return op->emitOpError()
             << "cannot declare the runtime function '" << name << "'";
    call("ddprt_check", {context(), status, string(describe())},
         LLVM::LLVMVoidType::get(op->getContext()));
    return success();
  }

  /// A pointer to a NUL-terminated constant string, one global per text.
  Value string(StringRef text) {
    std::string data = text.str();
    data.push_back('\0');
    auto type = LLVM::LLVMArrayType::get(b.getI8Type(), data.size());
    return global("__ddp_str_", data, type, b.getStringAttr(data));
  }

  /// The address of an internal constant global holding `value`, whose
  /// bytes are `content`: one global per content (named `prefix` + a hash of
  /// the bytes; a global of that name with other content, a hash collision,
  /// gets a suffix).
  Value global(StringRef prefix, StringRef content, Type type,
               Attribute value) {
    std::string base =
        (prefix + llvm::utohexstr(llvm::xxh3_64bits(content))).str();
    LLVM::GlobalOp global;
    atModule([&](OpBuilder &builder) {
      SymbolTableCollection *tables = symbolTables();
      auto lookup = [&](StringRef name) {
        return tables
                   ? tables->getSymbolTable(module).lookup<LLVM::GlobalOp>(name)
                   : module.lookupSymbol<LLVM::GlobalOp>(name);
      };
      std::string name = base;
      global = lookup(name);
      for (unsigned n = 1; global && global.getValueAttr() != value; ++n) {
        name = base + "_" + std::to_string(n);
        global = lookup(name);
      }
      if (global)
        return;
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointToStart(module.getBody());
      global = LLVM::GlobalOp::create(builder, loc, type, /*isConstant=*/true,
                                      LLVM::Linkage::Internal, name, value);
      if (tables)
        tables->getSymbolTable(module).insert(global);
    });
    return LLVM::AddressOfOp::create(b, loc, global);
  }

  /// An alloca of `count` elements of `type` at the start of the function,
  /// so that calls in loops do not grow the stack. With a cache, the n-th
  /// array of an op is shared with the n-th array of the same type and size
  /// of every other op of the function: the runtime reads what it is passed
  /// during the call only (docs/runtime.md), and each op fills its arrays
  /// right before its call.
  Value entryAlloca(Type type, int64_t count) {
    unsigned ordinal = numAllocas++;
    Value *slot = nullptr;
    if (cache) {
      slot = &cache->function(functionBody()).allocas[{type, count, ordinal}];
      if (*slot)
        return *slot;
    }
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&functionBody()->front());
    Value size =
        LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(count));
    Value array = LLVM::AllocaOp::create(b, loc, ptr, type, size);
    if (slot)
      *slot = array;
    return array;
  }

  /// The element pointer (aligned base plus offset) of a converted memref.
  Value dataPointer(Value descriptor, MemRefType type) {
    return MemRefDescriptor(descriptor).bufferPtr(b, loc, converter, type);
  }

  /// The number of elements of a memref, if its shape is static.
  static std::optional<int64_t> staticNumElements(MemRefType type) {
    if (!type.hasStaticShape())
      return std::nullopt;
    return type.getNumElements();
  }

  Value numElements(Value descriptor, MemRefType type) {
    int64_t known = 1;
    Value product;
    MemRefDescriptor memref(descriptor);
    for (int64_t i = 0; i < type.getRank(); ++i) {
      if (!type.isDynamicDim(i)) {
        known *= type.getDimSize(i);
        continue;
      }
      Value size = memref.size(b, loc, i);
      product = product ? LLVM::MulOp::create(b, loc, product, size) : size;
    }
    Value constant = constantI64(known);
    return product ? LLVM::MulOp::create(b, loc, product, constant).getResult()
                   : constant;
  }

  /// A stack array of ddprt_buffer {data, dtype, numel} for `values`.
  Value buffers(ValueRange converted, TypeRange memrefs) {
    auto structType =
        LLVM::LLVMStructType::getLiteral(op->getContext(), {ptr, i32, i64});
    return packArray(
        structType, converted, memrefs,
        [&](MemRefType t) {
          std::optional<int64_t> numel = staticNumElements(t);
          return SmallVector<std::optional<int64_t>>{numel};
        },
        [&](Value d, MemRefType t) {
          return SmallVector<Value>{numElements(d, t)};
        });
  }

  /// A stack array of ddprt_matrix {data, dtype, rows, cols}, or a null
  /// pointer for an empty group. The verifiers admit static matrices only.
  Value matrices(ValueRange converted, TypeRange memrefs) {
    if (converted.empty())
      return nullPointer();
    auto structType = LLVM::LLVMStructType::getLiteral(op->getContext(),
                                                       {ptr, i32, i64, i64});
    return packArray(
        structType, converted, memrefs,
        [&](MemRefType t) {
          return SmallVector<std::optional<int64_t>>{t.getDimSize(0),
                                                     t.getDimSize(1)};
        },
        [&](Value, MemRefType t) -> SmallVector<Value> {
          llvm_unreachable("a matrix has a static shape");
        });
  }

  /// The text ddprt_check reports: the op and where it came from.
  std::string describe() {
    std::string text;
    llvm::raw_string_ostream os(text);
    StringRef name = op->getName().getStringRef();
    os << (name.consume_front("ddp.buffer.") ? "ddp." + name.str()
                                             : name.str());
    if (auto file = dyn_cast<FileLineColLoc>(loc))
      os << " at " << file.getFilename().getValue() << ":" << file.getLine()
         << ":" << file.getColumn();
    else if (auto fused = loc->findInstanceOf<FileLineColLoc>())
      os << " at " << fused.getFilename().getValue() << ":" << fused.getLine()
         << ":" << fused.getColumn();
    // The gradients' names (a fused op carries one per tensor, in order), so
    // that a runtime message about "tensor #i" can be read.
    SmallVector<StringRef> names;
    loc->walk([&](Location inner) {
      if (auto named = dyn_cast<NameLoc>(inner))
        names.push_back(named.getName().getValue());
      return WalkResult::advance();
    });
    if (!names.empty()) {
      os << " (";
      llvm::interleaveComma(names, os);
      os << ")";
    }
    return text;
  }

  ConversionPatternRewriter &b;
  Operation *op;
  Location loc;
  const LLVMTypeConverter &converter;
  Type ptr, i32, i64;

private:
  Region *functionBody() {
    return &op->getParentOfType<FunctionOpInterface>().getFunctionBody();
  }

  SymbolTableCollection *symbolTables() {
    return cache ? &cache->symbolTables : nullptr;
  }

  /// Runs `add`, which looks up or adds declarations and globals of the
  /// module, with the builder to add them with. With a cache, under its
  /// mutex and with a builder outside the rewriter: the functions of the
  /// module may be converted in parallel, each by a rewriter of its own.
  void atModule(function_ref<void(OpBuilder &)> add) {
    if (!cache)
      return add(b);
    std::lock_guard<std::mutex> lock(cache->mutex);
    OpBuilder builder(op->getContext());
    add(builder);
  }

  /// `build()` at the start of the function's entry block, once per
  /// function and `key` with a cache; where the op is without.
  Value cached(Attribute key, function_ref<Value()> build) {
    if (!cache)
      return build();
    Region *body = functionBody();
    DDPToLLVMCache::Function &function = cache->function(body);
    if (Value known = function.constants.lookup(key))
      return known;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&body->front());
    // `build` may add to the map (a constant it uses), so not a reference.
    Value value = build();
    function.constants[key] = value;
    return value;
  }

  /// A stack array of `structType` ({ptr, i32, i64...}) for `converted`:
  /// the fields known at compile time (dtype, and the sizes `known` gives)
  /// are copied from a constant table, then each element's data pointer
  /// (and each size `known` leaves unknown, from `dynamic`) is stored: three
  /// ops per tensor rather than a struct built field by field. The element
  /// types were checked by RuntimePattern.
  Value
  packArray(LLVM::LLVMStructType structType, ValueRange converted,
            TypeRange memrefs,
            function_ref<SmallVector<std::optional<int64_t>>(MemRefType)> known,
            function_ref<SmallVector<Value>(Value, MemRefType)> dynamic) {
    // Every field is one i64 word: {ptr, i32 (+4 padding), i64, ...}.
    Value array = entryAlloca(structType, converted.size());
    SmallVector<int64_t> table;
    SmallVector<bool> anyDynamic;
    for (Type type : memrefs) {
      auto memref = cast<MemRefType>(type);
      table.push_back(0);
      table.push_back(*getRuntimeDtype(memref.getElementType()));
      bool unknown = false;
      for (std::optional<int64_t> size : known(memref)) {
        table.push_back(size.value_or(0));
        unknown |= !size;
      }
      anyDynamic.push_back(unknown);
    }
    auto tableType = RankedTensorType::get({int64_t(table.size())}, i64);
    Value source =
        global("__ddp_tab_",
               StringRef(reinterpret_cast<const char *>(table.data()),
                         table.size() * sizeof(int64_t)),
               LLVM::LLVMArrayType::get(i64, table.size()),
               DenseElementsAttr::get(tableType, ArrayRef(table)));
    LLVM::MemcpyOp::create(b, loc, array, source,
                           constantI64(table.size() * sizeof(int64_t)),
                           /*isVolatile=*/false);
    for (auto [i, pair] : llvm::enumerate(llvm::zip(converted, memrefs))) {
      auto [descriptor, type] = pair;
      auto memref = cast<MemRefType>(type);
      auto field = [&](int32_t f) {
        return LLVM::GEPOp::create(b, loc, ptr, structType, array,
                                   ArrayRef<LLVM::GEPArg>{int32_t(i), f});
      };
      LLVM::StoreOp::create(b, loc, dataPointer(descriptor, memref), field(0));
      if (!anyDynamic[i])
        continue;
      for (auto [f, size] : llvm::enumerate(dynamic(descriptor, memref)))
        LLVM::StoreOp::create(b, loc, size, field(int32_t(f) + 2));
    }
    return array;
  }

  ModuleOp module;
  Value contextValue;
  /// The stack arrays this op asked for so far.
  unsigned numAllocas = 0;
  DDPToLLVMCache *cache;
};

/// Lowers an op to runtime calls. Before any IR is built it checks that the
/// runtime has every buffer's element type.
/// With a DDPToLLVMCache, the patterns share lookups and per-function values
/// (see DDPToLLVM.h): a lookup by name in the module is a scan of its body,
/// and a large step has thousands of runtime calls.
template <typename OpTy>
struct RuntimePattern : public ConvertOpToLLVMPattern<OpTy> {
  using OpAdaptor = typename OpTy::Adaptor;

  RuntimePattern(const LLVMTypeConverter &converter, DDPToLLVMCache *cache)
      : ConvertOpToLLVMPattern<OpTy>(converter), cache(cache) {}

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
    RuntimeCall rt(rewriter, op, *this->getTypeConverter(), cache);
    return lower(op, adaptor, rt);
  }

  /// The op becomes one checked call of `name` and nothing else.
  LogicalResult replaceWithCall(OpTy op, RuntimeCall &rt, StringRef name,
                                ArrayRef<Value> args) const {
    if (failed(rt.checkedCall(name, args)))
      return failure();
    rt.b.eraseOp(op);
    return success();
  }

  DDPToLLVMCache *cache;
};

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

struct AllReduceLowering : RuntimePattern<BufferAllReduceOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferAllReduceOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(
        op, rt, "ddprt_allreduce",
        {rt.constantI32(getRuntimeReduction(op.getKind())),
         rt.constantI32(getRuntimeRole(op.getRole())),
         rt.buffers(adaptor.getBuffers(), op.getBuffers().getTypes()),
         rt.constantI32(op.getNumTensors())});
  }
};

struct AllReduceStartLowering : RuntimePattern<BufferAllReduceStartOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferAllReduceStartOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    Value buffers =
        rt.buffers(adaptor.getBuffers(), op.getBuffers().getTypes());
    Value slot = rt.entryAlloca(rt.ptr, 1);
    LLVM::StoreOp::create(rt.b, rt.loc, rt.nullPointer(), slot);
    if (failed(rt.checkedCall(
            "ddprt_allreduce_start",
            {rt.constantI32(getRuntimeReduction(op.getKind())),
             rt.constantI32(getRuntimeRole(op.getRole())), buffers,
             rt.constantI32(op.getBuffers().size()), slot})))
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
    return replaceWithCall(
        op, rt, "ddprt_allgather",
        {rt.constantI32(getRuntimeRole(op.getRole())),
         rt.buffers(adaptor.getInputs(), op.getInputs().getTypes()),
         rt.buffers(adaptor.getOutputs(), op.getOutputs().getTypes()),
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
    return replaceWithCall(
        op, rt, "ddprt_scale",
        {rt.constantI32(getRuntimeScale(op.getFactor())),
         rt.buffers(adaptor.getBuffers(), op.getBuffers().getTypes()),
         rt.constantI32(op.getNumTensors())});
  }
};

struct CastLowering : RuntimePattern<BufferCastOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferCastOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(
        op, rt, "ddprt_cast",
        {rt.constantI32(getRuntimeScale(op.getFactor())),
         rt.buffers(adaptor.getInputs(), op.getInputs().getTypes()),
         rt.buffers(adaptor.getOutputs(), op.getOutputs().getTypes()),
         rt.constantI32(op.getNumTensors())});
  }
};

struct CopyLowering : RuntimePattern<BufferCopyOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferCopyOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(
        op, rt, "ddprt_copy",
        {rt.buffers(adaptor.getSources(), op.getSources().getTypes()),
         rt.buffers(adaptor.getDestinations(), op.getDestinations().getTypes()),
         rt.constantI32(op.getNumTensors())});
  }
};

struct RandomNormalLowering : RuntimePattern<BufferRandomNormalOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferRandomNormalOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(op, rt, "ddprt_random_normal",
                           {rt.buffers(ValueRange(adaptor.getOutput()),
                                       TypeRange(op.getOutput().getType())),
                            rt.constantI64(op.getSeed()),
                            rt.constantI64(op.getStream()), adaptor.getStep()});
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
    auto one = [&](Value converted, Value buffer) {
      return rt.buffers(ValueRange(converted), TypeRange(buffer.getType()));
    };
    return replaceWithCall(op, rt, "ddprt_top_k",
                           {one(adaptor.getInput(), op.getInput()),
                            one(adaptor.getValues(), op.getValues()),
                            one(adaptor.getIndices(), op.getIndices())});
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
        {rt.matrices(adaptor.getMatrices(), op.getMatrices().getTypes()),
         rt.matrices(adaptor.getResiduals(), op.getResiduals().getTypes()),
         rt.matrices(adaptor.getFactors(), op.getFactors().getTypes()),
         rt.matrices(adaptor.getOutputs(), op.getOutputs().getTypes()),
         rt.constantI32(op.getNumTensors())});
  }
};

struct OrthogonalizeLowering : RuntimePattern<BufferOrthogonalizeOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferOrthogonalizeOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    return replaceWithCall(
        op, rt, "ddprt_orthogonalize",
        {rt.matrices(adaptor.getBuffers(), op.getBuffers().getTypes()),
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
        {rt.matrices(adaptor.getPs(), op.getPs().getTypes()),
         rt.matrices(adaptor.getQs(), op.getQs().getTypes()),
         rt.matrices(adaptor.getMatrices(), op.getMatrices().getTypes()),
         rt.matrices(adaptor.getResiduals(), op.getResiduals().getTypes()),
         rt.matrices(adaptor.getOutputs(), op.getOutputs().getTypes()),
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
    if (failed(rt.checkedCall(
            "ddprt_inspect",
            {rt.buffers(adaptor.getInput(), op.getInput().getType()),
             rt.constantI32(1), flags, nonzero})))
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
  AssertLowering(const LLVMTypeConverter &converter, DDPToLLVMCache *cache)
      : ConvertOpToLLVMPattern(converter, /*benefit=*/2), cache(cache) {}

  LogicalResult
  matchAndRewrite(cf::AssertOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    CheckBlocks blocks = splitForCheck(rewriter);
    RuntimeCall rt(rewriter, op, *getTypeConverter(), cache);
    Type voidType = LLVM::LLVMVoidType::get(op->getContext());
    Value context = rt.context();
    rt.call("ddprt_fail",
            {context, rt.string(rt.describe()), rt.string(op.getMsg())},
            voidType);
    rt.call("abort", {}, voidType);
    LLVM::UnreachableOp::create(rewriter, op.getLoc());
    branchOnCheck(rewriter, op, adaptor.getArg(), blocks);
    return success();
  }

  DDPToLLVMCache *cache;
};

/// ddp.report_nonfinite: when the flag is false,
/// ddprt_report_nonfinite(context, "<op> at <location>", message,
/// this_rank_only); the host warns or stops, and the step goes on if it
/// returns.
struct ReportNonFiniteLowering : ConvertOpToLLVMPattern<ReportNonFiniteOp> {
  ReportNonFiniteLowering(const LLVMTypeConverter &converter,
                          DDPToLLVMCache *cache)
      : ConvertOpToLLVMPattern(converter), cache(cache) {}

  LogicalResult
  matchAndRewrite(ReportNonFiniteOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    CheckBlocks blocks = splitForCheck(rewriter);
    RuntimeCall rt(rewriter, op, *getTypeConverter(), cache);
    Type voidType = LLVM::LLVMVoidType::get(op->getContext());
    rt.call("ddprt_report_nonfinite",
            {rt.context(), rt.string(rt.describe()), rt.string(op.getMessage()),
             rt.constantI32(op.getThisRankOnly() ? 1 : 0)},
            voidType);
    LLVM::BrOp::create(rewriter, op.getLoc(), blocks.continuation);
    branchOnCheck(rewriter, op, adaptor.getFinite(), blocks);
    return success();
  }

  DDPToLLVMCache *cache;
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

struct ConvertDDPToLLVM
    : public ddp::impl::ConvertDDPToLLVMBase<ConvertDDPToLLVM> {
  using Base::Base;

  void runOnOperation() override {
    // Hosts read the gradients' names before the lowering; the LLVM dialect
    // has no use for them.
    stripGradientNames(getOperation());
    if (includeUpstream)
      return runWithUpstream();
    MLIRContext *context = &getContext();
    LLVMTypeConverter converter(context);
    LLVMConversionTarget target(*context);
    target.addIllegalDialect<DDPDialect>();
    DDPToLLVMCache cache;
    RewritePatternSet patterns(context);
    populateDDPToLLVMConversionPatterns(converter, patterns, &cache);
    // A request may cross a call (ddp-split-functions cuts between a start
    // and its wait): signatures, calls and returns carry it as the pointer
    // it becomes; every other type stays for the conversions after this one.
    TypeConverter requests;
    requests.addConversion([](Type type) { return type; });
    requests.addConversion([](RequestType type) -> Type {
      return LLVM::LLVMPointerType::get(type.getContext());
    });
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns,
                                                                   requests);
    populateCallOpTypeConversionPattern(patterns, requests);
    populateReturnOpTypeConversionPattern(patterns, requests);
    target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp op) {
      return requests.isSignatureLegal(op.getFunctionType());
    });
    target.addDynamicallyLegalOp<func::CallOp, func::ReturnOp>(
        [&](Operation *op) { return requests.isLegal(op); });
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }

  /// ddp, cf, memref and func in one conversion, with the options
  /// finalize-memref-to-llvm{use-generic-functions} and convert-func-to-llvm
  /// would use, in three steps: the signatures, calls and returns, and
  /// everything outside the bodies of the module's functions (ddp.state,
  /// memref.global), in one conversion of the module that leaves the ops in
  /// those bodies as they are; then every body on its own, in parallel with
  /// the context's threads (each is one part of the step); then the
  /// unrealized casts left between them, per function again.
  void runWithUpstream() {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    const auto &layout = getAnalysis<DataLayoutAnalysis>();
    LowerToLLVMOptions options(context, layout.getAtOrAbove(module));
    options.useGenericFunctions = true;
    // Every buffer the module allocates has its allocated pointer equal to
    // its aligned one (one call, and what bare pointers need, below).
    options.allocLowering = LowerToLLVMOptions::AllocLowering::AlignedAlloc;
    LLVMTypeConverter converter(context, options, &layout);
    markBarePointerFunctions(module, converter);
    DDPToLLVMCache cache;
    // Without rollback: the patterns only build IR and replace the op they
    // match, and the conversion keeps less state per op.
    ConversionConfig config;
    config.allowPatternRollback = false;

    // Upstream's memref patterns look the allocation functions up in this
    // table (see step 2).
    SymbolTableCollection upstreamCollection;
    LockedSymbolTableCollection upstreamTables(upstreamCollection);

    // The runtime calls, cf (cf.assert reports through the runtime,
    // AssertLowering, not upstream's puts and abort) and memref.
    auto bodyPatterns = [&] {
      RewritePatternSet patterns(context);
      populateDDPToLLVMConversionPatterns(converter, patterns, &cache);
      cf::populateControlFlowToLLVMConversionPatterns(converter, patterns);
      patterns.add<AssertLowering>(converter, &cache);
      populateFinalizeMemRefToLLVMConversionPatterns(converter, patterns,
                                                     &upstreamTables);
      // What lower-affine, convert-scf-to-cf and convert-{math,arith,ub}-
      // to-llvm would do, in the same walk: five passes fewer over the
      // step, each of which verified it again.
      populateAffineToStdConversionPatterns(patterns);
      populateSCFToControlFlowConversionPatterns(patterns);
      populateMathToLLVMConversionPatterns(converter, patterns);
      arith::populateArithToLLVMConversionPatterns(converter, patterns);
      ub::populateUBToLLVMConversionPatterns(converter, patterns);
      return patterns;
    };

    // The signatures of plain functions first, in linear time.
    for (auto function :
         llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      convertSignature(function, converter);

    // 1. Signatures, calls, returns, and what is outside the bodies step 2
    // converts (module-level ddp.state and memref.global): the ops in those
    // bodies are legal here.
    {
      // (A body is a func.func's, or the llvm.func's it moved into.)
      auto inBody = [module](Operation *op) {
        auto function = op->getParentOfType<FunctionOpInterface>();
        return function && function->getParentOp() == module;
      };
      LLVMConversionTarget target(*context);
      target.addIllegalDialect<func::FuncDialect>();
      target.addDynamicallyLegalDialect<
          DDPDialect, cf::ControlFlowDialect, memref::MemRefDialect,
          affine::AffineDialect, scf::SCFDialect, math::MathDialect,
          arith::ArithDialect, ub::UBDialect>(inBody);
      for (ConvertToLLVMPatternInterface *other : otherDialects())
        target.addLegalDialect(other->getDialect()->getNamespace());
      RewritePatternSet patterns = bodyPatterns();
      populateFuncToLLVMConversionPatterns(converter, patterns,
                                           &cache.symbolTables);
      if (failed(applyPartialConversion(module, target, std::move(patterns),
                                        config)))
        return signalPassFailure();
    }

    // 2. The bodies. One converted in parallel must not declare the
    // allocation functions, so they are declared first (for the bodies that
    // allocate and free), and a body with a memref op that could declare
    // something else is converted alone, after the others.
    SmallVector<LLVM::LLVMFuncOp> parallelBodies, serialBodies;
    bool allocates = false, frees = false;
    for (auto function : module.getOps<LLVM::LLVMFuncOp>()) {
      if (function.isExternal())
        continue;
      bool alone = false;
      function.walk([&](Operation *nested) {
        if (isa<memref::AllocOp>(nested))
          allocates = true;
        else if (isa<memref::DeallocOp>(nested))
          frees = true;
        else if (isa_and_nonnull<memref::MemRefDialect>(nested->getDialect()) &&
                 !declaresNothing(nested))
          alone = true;
      });
      (alone ? serialBodies : parallelBodies).push_back(function);
    }
    OpBuilder builder(context);
    if (allocates &&
        failed(LLVM::lookupOrCreateGenericAlignedAllocFn(
            builder, module, converter.getIndexType(), &upstreamTables)))
      return signalPassFailure();
    if (frees && failed(LLVM::lookupOrCreateGenericFreeFn(builder, module,
                                                          &upstreamTables)))
      return signalPassFailure();
    {
      LLVMConversionTarget target(*context);
      target.addIllegalDialect<DDPDialect, cf::ControlFlowDialect,
                               memref::MemRefDialect, affine::AffineDialect,
                               scf::SCFDialect, math::MathDialect,
                               arith::ArithDialect, ub::UBDialect>();
      RewritePatternSet patterns = bodyPatterns();
      // Any other dialect in the bodies (omp, from convert-scf-to-openmp)
      // converts as convert-to-llvm would convert it: through its
      // ConvertToLLVMPatternInterface, patterns and legality.
      for (ConvertToLLVMPatternInterface *other : otherDialects())
        other->populateConvertToLLVMConversionPatterns(target, converter,
                                                       patterns);
      FrozenRewritePatternSet frozen(std::move(patterns));
      auto convert = [&](LLVM::LLVMFuncOp function) {
        return applyPartialConversion(function, target, frozen, config);
      };
      SmallVector<Region *> bodies;
      for (LLVM::LLVMFuncOp function : parallelBodies)
        bodies.push_back(&function.getBody());
      llvm::SmallPtrSet<Operation *, 16> before;
      for (Operation &op : *module.getBody())
        before.insert(&op);
      cache.prepare(bodies);
      LogicalResult done =
          failableParallelForEach(context, parallelBodies, convert);
      cache.reset();
      if (failed(done))
        return signalPassFailure();
      for (LLVM::LLVMFuncOp function : serialBodies)
        if (failed(convert(function)))
          return signalPassFailure();
      // The declarations and globals the bodies added, in the order of
      // their names rather than the threads': the output does not depend
      // on the schedule.
      // (The names are looked up once, not in every comparison.)
      SmallVector<std::pair<StringRef, Operation *>> added;
      for (Operation &op : *module.getBody())
        if (!before.contains(&op))
          added.push_back({SymbolTable::getSymbolName(&op).getValue(), &op});
      llvm::sort(added, llvm::less_first());
      Block *top = module.getBody();
      for (auto &[name, op] : llvm::reverse(added))
        op->moveBefore(top, top->begin());
    }

    // 3. What reconcile-unrealized-casts does, here rather than as a pass
    // of its own: one walk and one verification of the lowered step fewer.
    // Casts that do not reconcile stay, as they would with the pass.
    SmallVector<LLVM::LLVMFuncOp> functions(module.getOps<LLVM::LLVMFuncOp>());
    parallelForEach(context, functions, [](LLVM::LLVMFuncOp function) {
      SmallVector<UnrealizedConversionCastOp> casts;
      function.walk(
          [&](UnrealizedConversionCastOp cast) { casts.push_back(cast); });
      reconcileUnrealizedCasts(casts);
    });
  }

  /// The dialects beyond those runWithUpstream lists whose ops may be in a
  /// step's bodies, with their ConvertToLLVMPatternInterface: omp (the
  /// parallel loops), if loaded. (Not every dialect with the interface:
  /// some declare functions as they convert, which the bodies converted in
  /// parallel must not.)
  SmallVector<ConvertToLLVMPatternInterface *> otherDialects() {
    SmallVector<ConvertToLLVMPatternInterface *> others;
    if (Dialect *omp = getContext().getLoadedDialect<omp::OpenMPDialect>())
      if (auto *iface =
              omp->getRegisteredInterface<ConvertToLLVMPatternInterface>())
        others.push_back(iface);
    return others;
  }

  /// Converts `function` into an llvm.func as convert-func-to-llvm would
  /// (the same signature: a memref argument becomes its descriptor's
  /// fields), unless it has something convert-func-to-llvm treats specially
  /// (argument or result attributes, C wrappers, varargs, linkage, readnone,
  /// the bare-pointer convention), which is left to it. Each argument is
  /// rebuilt at the top of the body (a descriptor packed from its fields)
  /// and cast back to its type for the ops still to convert. Upstream's
  /// signature conversion orders the entry block again for every argument
  /// it replaces: quadratic in a step's gradients (1.9 of the pass's 19 s
  /// at 40k). This is linear.
  static void convertSignature(func::FuncOp function,
                               const LLVMTypeConverter &converter) {
    if (function.isExternal() || function.getAllArgAttrs() ||
        function.getAllResultAttrs() || function->hasAttr("llvm.bareptr") ||
        function->hasAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName()) ||
        function->hasAttr("func.varargs") || function->hasAttr("llvm.linkage"))
      return;
    TypeConverter::SignatureConversion signature(function.getNumArguments());
    auto type = dyn_cast_or_null<LLVM::LLVMFunctionType>(
        converter.convertFunctionSignature(function.getFunctionType(),
                                           /*isVariadic=*/false,
                                           /*useBarePtrCallConv=*/false,
                                           signature));
    if (!type || function->hasAttr(LLVM::LLVMDialect::getReadnoneAttrName()) ||
        llvm::any_of(
            llvm::enumerate(function.getArgumentTypes()), [&](auto argument) {
              return signature.getInputMapping(argument.index())->size != 1 &&
                     !isa<MemRefType>(argument.value());
            }))
      return; // upstream converts it, or reports why not
    SmallVector<NamedAttribute> attributes(function->getDiscardableAttrs());
    OpBuilder builder(function);
    auto lowered = LLVM::LLVMFuncOp::create(
        builder, function.getLoc(), function.getName(), type,
        LLVM::Linkage::External, /*dsoLocal=*/false, LLVM::CConv::C,
        /*comdat=*/nullptr, attributes);
    cast<FunctionOpInterface>(lowered.getOperation())
        .setVisibility(function.getVisibility());
    lowered.getBody().takeBody(function.getBody());
    function.erase();

    Block &entry = lowered.getBody().front();
    unsigned numOriginal = entry.getNumArguments();
    builder.setInsertionPointToStart(&entry);
    for (unsigned i = 0; i < numOriginal; ++i) {
      BlockArgument original = entry.getArgument(i);
      auto mapping = signature.getInputMapping(i);
      Location loc = original.getLoc();
      SmallVector<Value> fields;
      for (Type fieldType :
           signature.getConvertedTypes().slice(mapping->inputNo, mapping->size))
        fields.push_back(entry.addArgument(fieldType, loc));
      auto memref = dyn_cast<MemRefType>(original.getType());
      Value converted = memref ? MemRefDescriptor::pack(builder, loc, converter,
                                                        memref, fields)
                               : fields.front();
      if (converted.getType() != original.getType())
        converted = UnrealizedConversionCastOp::create(
                        builder, loc, original.getType(), converted)
                        .getResult(0);
      original.replaceAllUsesWith(converted);
    }
    entry.eraseArguments(0, numOriginal);
  }

  /// Gives upstream's bare-pointer calling convention (`llvm.bareptr`: one
  /// pointer per memref instead of a descriptor of 3 + 2 * rank values) to
  /// the private functions it is safe for: ddp-split-functions' parts, whose
  /// boundaries otherwise carry thousands of descriptors that are built,
  /// passed and taken apart again. The callee rebuilds a descriptor with
  /// allocated = aligned = the pointer, and returns its results' allocated
  /// pointers; so a function qualifies if it is a part (`ddp.part`: it
  /// frees only buffers it allocated, with allocated = aligned),
  /// every use of it is a func.call, its memrefs have static shapes and
  /// layouts, and every memref it returns is a buffer it allocated or a
  /// state buffer, not a view of an argument or a global.
  static void markBarePointerFunctions(ModuleOp module,
                                       const LLVMTypeConverter &converter) {
    // Functions referenced other than as a callee keep the descriptors.
    llvm::DenseSet<StringAttr> escaping;
    if (auto uses = SymbolTable::getSymbolUses(&module.getBodyRegion()))
      for (const SymbolTable::SymbolUse &use : *uses) {
        auto call = dyn_cast<func::CallOp>(use.getUser());
        if (!call || call.getCalleeAttr() != use.getSymbolRef())
          escaping.insert(use.getSymbolRef().getRootReference());
      }
    auto bareType = [&](Type type) {
      auto memref = dyn_cast<MemRefType>(type);
      if (!memref)
        return !isa<BaseMemRefType>(type);
      return memref.hasStaticShape() && converter.canConvertToBarePtr(memref);
    };
    auto *ddp = module.getContext()->getLoadedDialect<DDPDialect>();
    if (!ddp)
      return; // no ddp.part either
    auto part = ddp->getPartAttrHelper();
    for (auto function : module.getOps<func::FuncOp>()) {
      if (!part.isAttrPresent(function) || !function.isPrivate() ||
          function.isExternal() ||
          escaping.contains(function.getSymNameAttr()) ||
          !llvm::all_of(function.getArgumentTypes(), bareType) ||
          !llvm::all_of(function.getResultTypes(), bareType))
        continue;
      bool owned = true;
      function.walk([&](func::ReturnOp ret) {
        for (Value result : ret.getOperands())
          if (isa<MemRefType>(result.getType()) && !isOwnBuffer(result))
            owned = false;
      });
      if (owned)
        function->setAttr("llvm.bareptr", UnitAttr::get(module.getContext()));
    }
  }

  /// Whether `value` is, through views, branches and scf.ifs, always a
  /// buffer that its function allocated or a runtime state buffer.
  static bool isOwnBuffer(Value value) {
    SmallVector<Value> worklist{value};
    llvm::DenseSet<Value> seen;
    while (!worklist.empty()) {
      Value current = worklist.pop_back_val();
      if (!seen.insert(current).second)
        continue;
      if (auto argument = dyn_cast<BlockArgument>(current)) {
        Block *block = argument.getOwner();
        if (block->isEntryBlock())
          return false;
        for (auto it = block->pred_begin(); it != block->pred_end(); ++it) {
          auto branch = dyn_cast<BranchOpInterface>((*it)->getTerminator());
          if (!branch)
            return false;
          Value incoming = branch.getSuccessorOperands(
              it.getSuccessorIndex())[argument.getArgNumber()];
          if (!incoming)
            return false;
          worklist.push_back(incoming);
        }
        continue;
      }
      Operation *def = current.getDefiningOp();
      if (isa<memref::AllocOp, BufferStateOp>(def))
        continue;
      // What either branch yields (the scf is lowered in this pass).
      if (auto ifOp = dyn_cast<scf::IfOp>(def)) {
        unsigned index = cast<OpResult>(current).getResultNumber();
        worklist.push_back(ifOp.thenYield().getOperand(index));
        worklist.push_back(ifOp.elseYield().getOperand(index));
        continue;
      }
      if (auto view = dyn_cast<ViewLikeOpInterface>(def);
          view && view.getViewDest() == current &&
          !isa<memref::GetGlobalOp>(def)) {
        worklist.push_back(view.getViewSource());
        continue;
      }
      return false;
    }
    return true;
  }

  /// Whether upstream's lowering of memref op `op` adds nothing to the
  /// module but the allocation functions declared before the bodies are
  /// converted (a memref.copy between non-contiguous memrefs calls
  /// memrefCopy, which it declares).
  static bool declaresNothing(Operation *op) {
    if (auto copy = dyn_cast<memref::CopyOp>(op)) {
      auto contiguous = [](Type type) {
        auto memref = dyn_cast<MemRefType>(type);
        return memref && memref.getLayout().isIdentity();
      };
      return contiguous(copy.getSource().getType()) &&
             contiguous(copy.getTarget().getType());
    }
    return isa<
        memref::AllocOp, memref::AllocaOp, memref::DeallocOp, memref::LoadOp,
        memref::StoreOp, memref::CastOp, memref::ReinterpretCastOp,
        memref::ExtractAlignedPointerAsIndexOp,
        memref::ExtractStridedMetadataOp, memref::GetGlobalOp, memref::DimOp,
        memref::AssumeAlignmentOp, memref::ViewOp, memref::CollapseShapeOp,
        memref::ExpandShapeOp, memref::AtomicRMWOp, memref::MemorySpaceCastOp,
        memref::AllocaScopeOp, memref::AllocaScopeReturnOp>(op);
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
    DDPToLLVMCache *cache) {
  populateDDPToLLVMTypeConversions(converter);
  patterns.add<AllReduceLowering, AllReduceStartLowering, WaitLowering,
               AllGatherLowering, WorldSizeLowering, HostBarrierLowering,
               ScaleLowering, CastLowering, CopyLowering, RandomNormalLowering,
               TopKLowering, CountUncompressedLowering, InspectLowering,
               ProjectLowering, OrthogonalizeLowering, ReconstructLowering,
               BufferStateLowering, ScalarStateLoadLowering,
               ScalarStateStoreLowering>(converter, cache);
  patterns.add<StateLowering>(converter);
  patterns.add<ReportNonFiniteLowering>(converter, cache);
}

void mlir::ddp::registerConvertDDPToLLVMInterface(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *, DDPDialect *dialect) {
    dialect->addInterfaces<DDPToLLVMDialectInterface>();
  });
}
