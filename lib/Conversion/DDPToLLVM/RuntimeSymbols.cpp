//===- RuntimeSymbols.cpp - what runtime calls refer to -------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "RuntimeSymbols.h"

#include "ddp/Conversion/DDPToLLVM/DDPToLLVM.h"
#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/IR/RuntimeABI.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Threading.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/Support/SwapByteOrder.h"

#include "ddprt/ddprt.h"

#include <cstddef>
#include <cstring>
#include <type_traits>

using namespace mlir;
using namespace mlir::ddp;
using namespace mlir::ddp::lowering;

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

/// The fields of `type` known at compile time in `layout`: a 0 for the
/// data pointer, the dtype, and the sizes (0 where unknown, for the call to
/// store). Null if the type has no such record (the
/// runtime's dtypes, and static matrices, only: the verifiers admit no
/// other).
std::optional<SmallVector<int64_t, 4>> recordOf(Type type, Layout layout) {
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
  record.push_back(memref.hasStaticShape() ? memref.getNumElements() : 0);
  return record;
}

} // namespace

namespace mlir::ddp::lowering {

FailureOr<StringRef> kernelImage(Operation *op, bool report,
                                 SymbolTableCollection *tables) {
  auto launch = cast<gpu::LaunchFuncOp>(op);
  gpu::BinaryOp binary;
  if (tables) {
    Operation *symbolTable = SymbolTable::getNearestSymbolTable(op);
    binary = tables->lookupSymbolIn<gpu::BinaryOp>(
        symbolTable, launch.getKernelModuleName());
  } else {
    binary = SymbolTable::lookupNearestSymbolFrom<gpu::BinaryOp>(
        op, launch.getKernelModuleName());
  }
  if (!report && (!binary || binary.getObjects().size() != 1 ||
                  !isa<gpu::ObjectAttr>(binary.getObjects()[0])))
    return failure();
  if (!binary)
    return op->emitOpError()
           << "launches a kernel of @"
           << launch.getKernelModuleName().getValue()
           << ", which is not a gpu.binary: compile the GPU modules first "
              "(gpu-module-to-binary)";
  ArrayRef<Attribute> objects = binary.getObjects().getValue();
  auto object = objects.size() == 1 ? dyn_cast<gpu::ObjectAttr>(objects[0])
                                    : gpu::ObjectAttr();
  if (!object)
    return op->emitOpError()
           << "launches a kernel of @"
           << launch.getKernelModuleName().getValue() << ", which has "
           << objects.size() << " objects: the runtime loads exactly one";
  return object.getObject().getValue();
}

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

unsigned wordsPerRecord(Layout layout) {
  return layout == Layout::Buffer ? 3 : 4;
}

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
  return ConstantGlobal(
      "__ddp_tab_",
      std::string(reinterpret_cast<const char *>(table.data()),
                  table.size() * sizeof(int64_t)),
      ConstantGlobal::Kind::Table);
}

Type ConstantGlobal::type(MLIRContext *context) const {
  if (kind == Kind::String)
    return LLVM::LLVMArrayType::get(IntegerType::get(context, 8),
                                    content.size());
  return LLVM::LLVMArrayType::get(IntegerType::get(context, 64),
                                  content.size() / sizeof(int64_t));
}

Attribute ConstantGlobal::value(MLIRContext *context) const {
  if (kind == Kind::String)
    return StringAttr::get(context, content);
  ArrayRef<int64_t> words(reinterpret_cast<const int64_t *>(content.data()),
                          content.size() / sizeof(int64_t));
  auto tensor = RankedTensorType::get({int64_t(words.size())},
                                      IntegerType::get(context, 64));
  return DenseElementsAttr::get(tensor, words);
}

bool ConstantGlobal::isHeldBy(LLVM::GlobalOp global) const {
  Attribute held = global.getValueAttr();
  if (kind == Kind::String) {
    auto text = dyn_cast_or_null<StringAttr>(held);
    return text && text.getValue() == content;
  }
  auto table = dyn_cast_or_null<DenseIntElementsAttr>(held);
  if (!table || table.getNumElements() * sizeof(int64_t) != content.size())
    return false;
  const char *word = content.data();
  for (const APInt &value : table.getValues<APInt>()) {
    int64_t expected;
    std::memcpy(&expected, word, sizeof(expected));
    if (value.getSExtValue() != expected)
      return false;
    word += sizeof(expected);
  }
  return true;
}

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

} // namespace mlir::ddp::lowering

namespace {

/// Whether the runtime-call patterns (with the assert lowering) convert
/// `op`.
bool callsRuntime(Operation *op) {
  return isa<cf::AssertOp, gpu::LaunchFuncOp>(op) ||
         isa<DDPDialect>(op->getDialect()) ||
         (isa<memref::AllocOp, memref::DeallocOp>(op) &&
          op->hasAttr(DDPDialect::DeviceMemoryAttrHelper::getNameStr()));
}

/// The constant globals the runtime calls that replace `op` may refer to:
/// its description, the state it names, its message, and its operands'
/// tables in either layout. Every op has at least its description.
void constantsOf(Operation *op, std::vector<ConstantGlobal> &constants,
                 llvm::DenseSet<StringAttr> &images) {
  constants.push_back(ConstantGlobal::string(describe(op)));
  for (StringRef name : {"state", "msg", "message"}) {
    std::optional<Attribute> attribute = op->getInherentAttr(name);
    if (!attribute)
      continue;
    if (auto text = dyn_cast_or_null<StringAttr>(*attribute))
      constants.push_back(ConstantGlobal::string(text.getValue()));
    else if (auto symbol = dyn_cast_or_null<FlatSymbolRefAttr>(*attribute))
      constants.push_back(ConstantGlobal::string(symbol.getValue()));
  }
  for (Layout layout : {Layout::Buffer, Layout::Matrix})
    if (std::optional<ConstantGlobal> table = operandTable(op, layout))
      constants.push_back(std::move(*table));
  // A kernel launch: its kernel's name and its module's image.
  // A kernel launch: its kernel's name and its module's image (once per
  // module: an image is all of a step's kernels).
  if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op)) {
    constants.push_back(
        ConstantGlobal::string(launch.getKernelName().getValue()));
    if (images.insert(launch.getKernelModuleName()).second)
      if (FailureOr<StringRef> image = kernelImage(op, /*report=*/false);
          succeeded(image))
        constants.push_back(ConstantGlobal::string(*image));
  }
}

} // namespace

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
    add(LLVM::GlobalOp::create(builder, module.getLoc(), constant.type(context),
                               /*isConstant=*/true, LLVM::Linkage::Internal,
                               name, constant.value(context)));
  };

  // What each top-level op's runtime calls refer to, found on the
  // context's threads (a description per op, and its tables), then added in
  // the module's order.
  SmallVector<Operation *> roots;
  for (Operation &op : *module.getBody())
    roots.push_back(&op);
  std::vector<std::vector<ConstantGlobal>> constants(roots.size());
  parallelFor(context, 0, roots.size(), [&](size_t i) {
    llvm::DenseSet<StringAttr> images;
    roots[i]->walk([&](Operation *op) {
      if (callsRuntime(op))
        constantsOf(op, constants[i], images);
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
  // Each content once, whichever op needs it.
  llvm::DenseSet<std::pair<unsigned, StringRef>> seen;
  for (const std::vector<ConstantGlobal> &list : constants)
    for (const ConstantGlobal &constant : list)
      if (seen.insert({unsigned(constant.kind), constant.content}).second)
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
