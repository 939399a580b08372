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
#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/IR/RuntimeABI.h"

#include "mlir/Conversion/ConvertToLLVM/ToLLVMInterface.h"
#include "mlir/Conversion/LLVMCommon/MemRefBuilder.h"
#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Threading.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Support/ThreadLocalCache.h"
#include "mlir/Transforms/DialectConversion.h"

#include "llvm/Support/SwapByteOrder.h"
#include "llvm/Support/xxhash.h"

#include "ddprt/ddprt.h"

#include <cstddef>
#include <type_traits>

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

/// The LLVM type of a parameter or result of C type `T` in the runtime's
/// ABI: a pointer, an integer or enum of its width, or a double.
template <typename T> Type abiType(MLIRContext *context) {
  if constexpr (std::is_void_v<T>) {
    return LLVM::LLVMVoidType::get(context);
  } else if constexpr (std::is_pointer_v<T>) {
    return LLVM::LLVMPointerType::get(context);
  } else if constexpr (std::is_floating_point_v<T>) {
    static_assert(std::is_same_v<T, double>, "the ABI passes doubles only");
    return Float64Type::get(context);
  } else {
    static_assert(std::is_integral_v<T> || std::is_enum_v<T>,
                  "a runtime function takes pointers, integers, enums and "
                  "doubles");
    return IntegerType::get(context, 8 * sizeof(T));
  }
}

/// The LLVM function type of the C function type `F`.
template <typename F> struct AbiSignature;
template <typename R, typename... Args> struct AbiSignature<R(Args...)> {
  static LLVM::LLVMFunctionType get(MLIRContext *context) {
    return LLVM::LLVMFunctionType::get(abiType<R>(context),
                                       {abiType<Args>(context)...});
  }
};

/// A function compiled code calls, with its signature derived from its
/// prototype (no reference to the function itself: the compiler does not
/// link the runtime).
struct RuntimeFunction {
  StringLiteral name;
  LLVM::LLVMFunctionType (*type)(MLIRContext *);
};

constexpr RuntimeFunction kRuntimeFunctions[] = {
#define DDP_RUNTIME_FUNCTION(name)                                             \
  {#name, &AbiSignature<decltype(::name)>::get},
    DDPRT_FOR_EACH_STEP_FUNCTION(DDP_RUNTIME_FUNCTION)
#undef DDP_RUNTIME_FUNCTION
    // abort(), after ddprt_fail in case the host's handler returns.
    {"abort", &AbiSignature<void()>::get},
};

/// The signature of runtime function `name`, if it is one.
LLVM::LLVMFunctionType runtimeFunctionType(MLIRContext *context,
                                           StringRef name) {
  for (const RuntimeFunction &function : kRuntimeFunctions)
    if (function.name == name)
      return function.type(context);
  return {};
}

//===----------------------------------------------------------------------===//
// Constant globals
//===----------------------------------------------------------------------===//

/// A constant global: its name is `prefix` and a hash of `content`, its
/// bytes; a global of that name with other content (a hash collision) makes
/// the next one take a suffix.
struct ConstantGlobal {
  std::string base;
  Type type;
  Attribute value;

  ConstantGlobal(StringRef prefix, StringRef content, Type type,
                 Attribute value)
      : base((prefix + llvm::utohexstr(llvm::xxh3_64bits(content))).str()),
        type(type), value(value) {}

  /// A NUL-terminated string.
  static ConstantGlobal string(MLIRContext *context, StringRef text) {
    std::string data = text.str();
    data.push_back('\0');
    auto type =
        LLVM::LLVMArrayType::get(IntegerType::get(context, 8), data.size());
    return ConstantGlobal("__ddp_str_", data, type,
                          StringAttr::get(context, data));
  }

  /// The global holding it, or the name it would take (`*free`).
  LLVM::GlobalOp find(function_ref<LLVM::GlobalOp(StringRef)> lookup,
                      std::string *free = nullptr) const {
    std::string name = base;
    for (unsigned n = 1;; ++n) {
      LLVM::GlobalOp global = lookup(name);
      if (!global || global.getValueAttr() == value) {
        if (free)
          *free = name;
        return global;
      }
      name = base + "_" + std::to_string(n);
    }
  }
};

/// How the runtime's calls take a memref: as a ddprt_buffer {data, dtype,
/// numel} or a ddprt_matrix {data, dtype, rows, cols}.
enum class Layout { Buffer, Matrix };

/// Every field is one i64 word: {ptr, i32 (+4 padding), i64, ...}.
unsigned wordsPerRecord(Layout layout) {
  return layout == Layout::Buffer ? 3 : 4;
}

/// The fields of `type` known at compile time in `layout`: a 0 for the
/// data pointer, the dtype, and the sizes (0 where unknown); whether a size
/// is unknown, in `dynamic`. Null if the type has no such record (the
/// runtime's dtypes, and static matrices, only: the verifiers admit no
/// other).
std::optional<SmallVector<int64_t, 4>> recordOf(Type type, Layout layout,
                                                bool *dynamic = nullptr) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref)
    return std::nullopt;
  std::optional<ddprt_dtype> dtype = getRuntimeDtype(memref.getElementType());
  if (!dtype)
    return std::nullopt;
  SmallVector<int64_t, 4> record{0, *dtype};
  if (layout == Layout::Matrix) {
    if (memref.getRank() != 2 || !memref.hasStaticShape())
      return std::nullopt;
    record.append({memref.getDimSize(0), memref.getDimSize(1)});
    return record;
  }
  bool unknown = !memref.hasStaticShape();
  record.push_back(unknown ? 0 : memref.getNumElements());
  if (dynamic)
    *dynamic = unknown;
  return record;
}

/// The table of the fields known at compile time of every memref operand
/// of `op`, in `layout`: a call's array of buffers or matrices is copied
/// from the slice of its operands, then gets their data pointers. Null if
/// an operand has no record in `layout`.
std::optional<ConstantGlobal> operandTable(Operation *op, Layout layout) {
  SmallVector<int64_t> table;
  for (Type type : op->getOperandTypes()) {
    if (!isa<MemRefType>(type))
      continue;
    std::optional<SmallVector<int64_t, 4>> record = recordOf(type, layout);
    if (!record)
      return std::nullopt;
    table.append(*record);
  }
  if (table.empty())
    return std::nullopt;
  MLIRContext *context = op->getContext();
  auto i64 = IntegerType::get(context, 64);
  auto tableType = RankedTensorType::get({int64_t(table.size())}, i64);
  return ConstantGlobal("__ddp_tab_",
                        StringRef(reinterpret_cast<const char *>(table.data()),
                                  table.size() * sizeof(int64_t)),
                        LLVM::LLVMArrayType::get(i64, table.size()),
                        DenseElementsAttr::get(tableType, ArrayRef(table)));
}

/// The text ddprt_check reports for `op`: the op and where it came from.
std::string describe(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  Location loc = op->getLoc();
  StringRef name = op->getName().getStringRef();
  os << (name.consume_front("ddp.buffer.") ? "ddp." + name.str() : name.str());
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

/// Whether the runtime-call patterns (with the assert lowering) convert
/// `op`.
bool callsRuntime(Operation *op) {
  return isa<cf::AssertOp>(op) || isa<DDPDialect>(op->getDialect());
}

/// The constant globals the runtime calls that replace `op` may refer to:
/// its description, the state it names, its message, and its operands'
/// tables in either layout. Every op has at least its description.
void constantsOf(Operation *op, std::vector<ConstantGlobal> &constants) {
  MLIRContext *context = op->getContext();
  constants.push_back(ConstantGlobal::string(context, describe(op)));
  for (StringRef name : {"state", "msg", "message"}) {
    std::optional<Attribute> attribute = op->getInherentAttr(name);
    if (!attribute)
      continue;
    if (auto text = dyn_cast_or_null<StringAttr>(*attribute))
      constants.push_back(ConstantGlobal::string(context, text.getValue()));
    else if (auto symbol = dyn_cast_or_null<FlatSymbolRefAttr>(*attribute))
      constants.push_back(ConstantGlobal::string(context, symbol.getValue()));
  }
  for (Layout layout : {Layout::Buffer, Layout::Matrix})
    if (std::optional<ConstantGlobal> table = operandTable(op, layout))
      constants.push_back(std::move(*table));
}

//===----------------------------------------------------------------------===//
// What the patterns share
//===----------------------------------------------------------------------===//

/// One function's values that its runtime calls share, at the start of its
/// entry block.
struct FunctionValues {
  /// The constant's type and value -> the constant.
  llvm::DenseMap<Attribute, Value> constants;
  /// Its ddprt_current_context() (the host sets the context before it
  /// calls the step, and the step does not change it).
  Value context;
  /// (element type, count, the op's n-th array) -> a stack array. The
  /// runtime reads the arrays a call is given during the call only, so that
  /// every call of a function shares them: one alloca per array an op
  /// needs, not one per call.
  llvm::DenseMap<std::tuple<Type, int64_t, unsigned>, Value> allocas;
};

/// What the patterns of one populate call with symbol tables share: the
/// tables, which they only read (DDPRuntimeDeclarations added every symbol
/// the calls refer to before the conversion), and each function's values.
/// A function is converted by one thread, so that its values are that
/// thread's own: a thread-local map, and no lock. They are keyed by the
/// function's body, and serve one conversion (the pattern set's life).
struct SharedState {
  explicit SharedState(SymbolTableCollection &symbolTables)
      : symbolTables(symbolTables) {}

  FunctionValues &function(Region *body) {
    std::unique_ptr<FunctionValues> &entry = (*functions)[body];
    if (!entry)
      entry = std::make_unique<FunctionValues>();
    return *entry;
  }

  SymbolTableCollection &symbolTables;
  ThreadLocalCache<llvm::DenseMap<Region *, std::unique_ptr<FunctionValues>>>
      functions;
};

/// Builds runtime calls for one op. With a SharedState, every symbol is
/// looked up in the module's table and values are shared within the
/// function; without, declarations and globals are looked up by a scan of
/// the module and added through the rewriter, and every op gets its own
/// constants and context (convert-to-llvm's use).
class RuntimeCall {
public:
  RuntimeCall(ConversionPatternRewriter &rewriter, Operation *op,
              const LLVMTypeConverter &converter, SharedState *shared)
      : b(rewriter), op(op), loc(op->getLoc()), converter(converter),
        ptr(LLVM::LLVMPointerType::get(op->getContext())), i32(b.getI32Type()),
        i64(b.getI64Type()), shared(shared) {
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

  /// An llvm.mlir.constant: shared, one per function and value, at the
  /// start of the function's entry block.
  Value constant(Type type, TypedAttr value) {
    return cached(value, [&] {
      return LLVM::ConstantOp::create(b, loc, type, value).getResult();
    });
  }

  /// ddprt_current_context(): shared, one call per function at its entry;
  /// else one per op.
  Value context() {
    if (contextValue)
      return contextValue;
    if (!shared)
      return contextValue = call("ddprt_current_context", {}, ptr);
    Region *body = functionBody();
    Value &slot = shared->function(body).context;
    if (!slot) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&body->front());
      slot = call("ddprt_current_context", {}, ptr);
    }
    return contextValue = slot;
  }

  /// Calls `name` and returns its result (null for void, or when the
  /// function cannot be declared, which has been reported).
  Value call(StringRef name, ValueRange args, Type result = {}) {
    LLVM::LLVMFuncOp function = declaration(name, args, result);
    if (!function)
      return {};
    auto called = LLVM::CallOp::create(b, loc, function, args);
    return result ? called.getResult() : Value();
  }

  /// Calls a runtime function that returns a ddprt_status and passes the
  /// status to ddprt_check with this op's name and location.
  LogicalResult checkedCall(StringRef name, ArrayRef<Value> args) {
    SmallVector<Value> all{context()};
    all.append(args.begin(), args.end());
    Value status = call(name, all, i32);
    Value where = string(describe(op));
    if (!status || !where)
      return failure();
    call("ddprt_check", {context(), status, where},
         LLVM::LLVMVoidType::get(op->getContext()));
    return success();
  }

  /// A pointer to a NUL-terminated constant string, one global per text.
  Value string(StringRef text) {
    return global(ConstantGlobal::string(op->getContext(), text));
  }

  /// An alloca of `count` elements of `type` at the start of the function,
  /// so that calls in loops do not grow the stack. Shared, the n-th array
  /// of an op is the n-th array of the same type and size of every other op
  /// of the function: the runtime reads what it is passed during the call
  /// only (docs/runtime.md), and each op fills its arrays right before its
  /// call.
  Value entryAlloca(Type type, int64_t count) {
    unsigned ordinal = numAllocas++;
    Value *slot = nullptr;
    if (shared) {
      slot = &shared->function(functionBody()).allocas[{type, count, ordinal}];
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

  /// A stack array of ddprt_buffer {data, dtype, numel} for the operands
  /// `original` of the op, converted to `converted`.
  Value buffers(ValueRange converted, OperandRange original) {
    return packArray(Layout::Buffer, converted, original);
  }
  Value buffers(ValueRange converted, OpOperand &original) {
    return buffers(converted, operandRange(original));
  }

  /// A stack array of ddprt_matrix {data, dtype, rows, cols}, or a null
  /// pointer for an empty group. The verifiers admit static matrices only.
  Value matrices(ValueRange converted, OperandRange original) {
    if (converted.empty())
      return nullPointer();
    return packArray(Layout::Matrix, converted, original);
  }

  ConversionPatternRewriter &b;
  Operation *op;
  Location loc;
  const LLVMTypeConverter &converter;
  Type ptr, i32, i64;

private:
  static OperandRange operandRange(OpOperand &operand) {
    return operand.getOwner()->getOperands().slice(operand.getOperandNumber(),
                                                   1);
  }

  Region *functionBody() {
    return &op->getParentOfType<FunctionOpInterface>().getFunctionBody();
  }

  /// The declaration of `name`: a runtime function with its prototype's
  /// signature, anything else with the arguments' types.
  LLVM::LLVMFuncOp declaration(StringRef name, ValueRange args, Type result) {
    if (shared) {
      if (auto function = shared->symbolTables.lookupSymbolIn<LLVM::LLVMFuncOp>(
              module, b.getStringAttr(name)))
        return function;
      op->emitOpError() << "found no declaration of '" << name
                        << "': declare the runtime's symbols before the "
                           "conversion (DDPRuntimeDeclarations)";
      return {};
    }
    SmallVector<Type> params(args.getTypes());
    if (LLVM::LLVMFunctionType type =
            runtimeFunctionType(op->getContext(), name)) {
      params.assign(type.getParams().begin(), type.getParams().end());
      result = type.getReturnType();
    }
    FailureOr<LLVM::LLVMFuncOp> function =
        LLVM::lookupOrCreateFn(b, module, name, params, result);
    if (failed(function)) {
      op->emitOpError() << "cannot declare the runtime function '" << name
                        << "'";
      return {};
    }
    return *function;
  }

  /// The address of constant global `constant`: looked up (shared), or
  /// added through the rewriter at the start of the module.
  Value global(const ConstantGlobal &constant) {
    LLVM::GlobalOp global;
    if (shared) {
      SymbolTable &table = shared->symbolTables.getSymbolTable(module);
      global = constant.find(
          [&](StringRef name) { return table.lookup<LLVM::GlobalOp>(name); });
      if (!global) {
        op->emitOpError() << "found no constant '" << constant.base
                          << "': declare the runtime's symbols before the "
                             "conversion (DDPRuntimeDeclarations)";
        return {};
      }
    } else {
      std::string name;
      global = constant.find(
          [&](StringRef name) {
            return module.lookupSymbol<LLVM::GlobalOp>(name);
          },
          &name);
      if (!global) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(module.getBody());
        global = LLVM::GlobalOp::create(
            b, loc, constant.type,
            /*isConstant=*/true, LLVM::Linkage::Internal, name, constant.value);
      }
    }
    return LLVM::AddressOfOp::create(b, loc, global);
  }

  /// `build()` at the start of the function's entry block, once per
  /// function and `key` when shared; where the op is, without.
  Value cached(Attribute key, function_ref<Value()> build) {
    if (!shared)
      return build();
    Region *body = functionBody();
    FunctionValues &function = shared->function(body);
    if (Value known = function.constants.lookup(key))
      return known;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&body->front());
    // `build` may add to the map (a constant it uses), so not a reference.
    Value value = build();
    function.constants[key] = value;
    return value;
  }

  /// A stack array of records in `layout` for `converted`: the fields
  /// known at compile time (dtype, static sizes) are copied from the op's
  /// table (operandTable), then each element's data pointer (and its
  /// dynamic size) is stored: three ops per tensor rather than a struct
  /// built field by field. The element types were checked by
  /// RuntimePattern.
  Value packArray(Layout layout, ValueRange converted, OperandRange original) {
    unsigned words = wordsPerRecord(layout);
    SmallVector<Type, 4> fields{ptr, i32, i64};
    if (layout == Layout::Matrix)
      fields.push_back(i64);
    auto structType =
        LLVM::LLVMStructType::getLiteral(op->getContext(), fields);
    Value array = entryAlloca(structType, converted.size());
    if (converted.empty())
      return array;
    Value &table = tables[layout == Layout::Matrix];
    if (!table) {
      std::optional<ConstantGlobal> constant = operandTable(op, layout);
      if (!constant) {
        op->emitOpError("has an operand the runtime cannot take");
        return {};
      }
      table = global(*constant);
    }
    Value source = table;
    if (!source)
      return {};
    // The records of `original` start after those of the memref operands
    // before it.
    unsigned first = 0;
    for (Value operand : op->getOperands().take_front(
             original.empty() ? 0 : original.getBeginOperandIndex()))
      first += isa<MemRefType>(operand.getType());
    if (first)
      source =
          LLVM::GEPOp::create(b, loc, ptr, i64, source,
                              ArrayRef<LLVM::GEPArg>{int32_t(first * words)});
    LLVM::MemcpyOp::create(
        b, loc, array, source,
        constantI64(converted.size() * words * sizeof(int64_t)),
        /*isVolatile=*/false);
    for (auto [i, pair] : llvm::enumerate(llvm::zip(converted, original))) {
      auto [descriptor, value] = pair;
      auto memref = cast<MemRefType>(value.getType());
      auto field = [&](int32_t f) {
        return LLVM::GEPOp::create(b, loc, ptr, structType, array,
                                   ArrayRef<LLVM::GEPArg>{int32_t(i), f});
      };
      LLVM::StoreOp::create(b, loc, dataPointer(descriptor, memref), field(0));
      bool dynamic = false;
      recordOf(memref, layout, &dynamic);
      if (dynamic) {
        Value numel = numElements(descriptor, memref);
        LLVM::StoreOp::create(b, loc, numel, field(2));
      }
    }
    return array;
  }

  ModuleOp module;
  Value contextValue;
  /// The address of the op's table of buffers and of matrices.
  Value tables[2];
  /// The stack arrays this op asked for so far.
  unsigned numAllocas = 0;
  SharedState *shared;
};

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
    return replaceWithCall(op, rt, "ddprt_allreduce",
                           {rt.constantI32(getRuntimeReduction(op.getKind())),
                            rt.constantI32(getRuntimeRole(op.getRole())),
                            rt.buffers(adaptor.getBuffers(), op.getBuffers()),
                            rt.constantI32(op.getNumTensors())});
  }
};

struct AllReduceStartLowering : RuntimePattern<BufferAllReduceStartOp> {
  using RuntimePattern::RuntimePattern;
  LogicalResult lower(BufferAllReduceStartOp op, OpAdaptor adaptor,
                      RuntimeCall &rt) const override {
    Value buffers = rt.buffers(adaptor.getBuffers(), op.getBuffers());
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

void mlir::ddp::populateDDPAssertToLLVMConversionPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    SymbolTableCollection *symbolTables) {
  std::shared_ptr<SharedState> shared;
  if (symbolTables)
    shared = std::make_shared<SharedState>(*symbolTables);
  patterns.add<AssertLowering>(converter, shared);
}

FailureOr<DDPRuntimeDeclarations>
DDPRuntimeDeclarations::declare(ModuleOp module,
                                SymbolTableCollection &symbolTables) {
  DDPRuntimeDeclarations declarations(module, symbolTables);
  MLIRContext *context = module.getContext();
  SymbolTable &table = symbolTables.getSymbolTable(module);
  // In the order they are added, at the top of the module.
  OpBuilder builder(context);
  builder.setInsertionPointToStart(module.getBody());
  auto add = [&](Operation *symbol) {
    table.insert(symbol);
    builder.setInsertionPointAfter(symbol);
    declarations.added.push_back(symbol);
  };
  auto addGlobal = [&](const ConstantGlobal &constant) {
    std::string name;
    if (constant.find(
            [&](StringRef name) { return table.lookup<LLVM::GlobalOp>(name); },
            &name))
      return;
    add(LLVM::GlobalOp::create(builder, module.getLoc(), constant.type,
                               /*isConstant=*/true, LLVM::Linkage::Internal,
                               name, constant.value));
  };

  // What each top-level op's runtime calls refer to, found on the
  // context's threads (a description per op, and its tables), then added in
  // the module's order.
  SmallVector<Operation *> roots;
  for (Operation &op : *module.getBody())
    roots.push_back(&op);
  std::vector<std::vector<ConstantGlobal>> constants(roots.size());
  parallelFor(context, 0, roots.size(), [&](size_t i) {
    roots[i]->walk([&](Operation *op) {
      if (callsRuntime(op))
        constantsOf(op, constants[i]);
    });
  });
  if (llvm::all_of(constants, [](const auto &list) { return list.empty(); }))
    return declarations;

  // The functions first, then the constants.
  for (const RuntimeFunction &runtime : kRuntimeFunctions) {
    LLVM::LLVMFunctionType type = runtime.type(context);
    if (Operation *existing = table.lookup(runtime.name)) {
      auto function = dyn_cast<LLVM::LLVMFuncOp>(existing);
      if (function && function.getFunctionType() == type)
        continue;
      return existing->emitError()
             << "'" << runtime.name
             << "' is a function of the runtime, which compiled code calls "
                "as "
             << type;
    }
    add(LLVM::LLVMFuncOp::create(builder, module.getLoc(), runtime.name, type));
  }
  // Each value once (the attributes are uniqued), whichever op needs it.
  llvm::DenseSet<Attribute> values;
  for (const std::vector<ConstantGlobal> &list : constants)
    for (const ConstantGlobal &constant : list)
      if (values.insert(constant.value).second)
        addGlobal(constant);
  return declarations;
}

void DDPRuntimeDeclarations::eraseUnused() {
  // What the module's functions refer to, each function's walk on a thread
  // of its own; and what other top-level ops do (a global's initializer).
  SmallVector<Operation *> functions, others;
  for (Operation &op : *module.getBody())
    (isa<FunctionOpInterface>(op) ? functions : others).push_back(&op);
  std::vector<SmallVector<StringAttr>> referenced(functions.size() + 1);
  auto collect = [](Operation *root, SmallVector<StringAttr> &names) {
    root->walk([&](Operation *op) {
      if (auto call = dyn_cast<LLVM::CallOp>(op)) {
        if (FlatSymbolRefAttr callee = call.getCalleeAttr())
          names.push_back(callee.getAttr());
      } else if (auto address = dyn_cast<LLVM::AddressOfOp>(op)) {
        names.push_back(address.getGlobalNameAttr().getAttr());
      }
    });
  };
  parallelFor(module.getContext(), 0, functions.size(),
              [&](size_t i) { collect(functions[i], referenced[i]); });
  for (Operation *op : others)
    collect(op, referenced.back());
  llvm::DenseSet<StringAttr> used;
  for (const SmallVector<StringAttr> &names : referenced)
    used.insert(names.begin(), names.end());

  SymbolTable &table = symbolTables->getSymbolTable(module);
  for (Operation *symbol : added)
    if (!used.contains(SymbolTable::getSymbolName(symbol)))
      table.erase(symbol);
  added.clear();
}

void mlir::ddp::registerConvertDDPToLLVMInterface(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *, DDPDialect *dialect) {
    dialect->addInterfaces<DDPToLLVMDialectInterface>();
  });
}
