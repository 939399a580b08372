//===- RuntimeCall.h - building runtime calls in a pattern ------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// RuntimeCall builds the calls of one op's lowering (its arguments packed
// into stack arrays, the status checked), and SharedState is what the
// patterns of one conversion share. Private to the lowering.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_LIB_CONVERSION_DDPTOLLVM_RUNTIMECALL_H
#define DDP_LIB_CONVERSION_DDPTOLLVM_RUNTIMECALL_H

#include "RuntimeSymbols.h"

#include "ddp/Dialect/DDP/IR/RuntimeABI.h"

#include "mlir/Conversion/LLVMCommon/MemRefBuilder.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Support/ThreadLocalCache.h"
#include "mlir/Transforms/DialectConversion.h"

#include "llvm/ADT/DenseMap.h"

#include <memory>
#include <tuple>

namespace mlir::ddp::lowering {

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
  Value string(StringRef text) { return global(ConstantGlobal::string(text)); }

  /// string(text()) for `key`, looked up once per function (for large
  /// texts, such as a kernel image, which are hashed to be found).
  Value cachedString(Attribute key, function_ref<std::string()> text) {
    return cached(key, [&] { return string(text()); });
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
            b, loc, constant.type(op->getContext()), /*isConstant=*/true,
            LLVM::Linkage::Internal, name, constant.value(op->getContext()));
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
      // A buffer's numel the table could not hold (matrices are static).
      if (layout == Layout::Buffer && !memref.hasStaticShape()) {
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

} // namespace mlir::ddp::lowering

#endif // DDP_LIB_CONVERSION_DDPTOLLVM_RUNTIMECALL_H
