//===- DDPToLLVM.h - ddp buffer ops to runtime calls ------------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The lowering of the bufferized ddp dialect to calls of the runtime's C ABI
// (ddprt/ddprt.h), in upstream's shape: patterns to compose with others
// (populateDDPToLLVMConversionPatterns), the convert-ddp-to-llvm pass, and
// a ConvertToLLVMPatternInterface so that upstream's convert-to-llvm lowers
// ddp ops together with func, memref, arith, ...
//
//===----------------------------------------------------------------------===//

#ifndef DDP_CONVERSION_DDPTOLLVM_DDPTOLLVM_H
#define DDP_CONVERSION_DDPTOLLVM_DDPTOLLVM_H

#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Value.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"

#include <memory>
#include <mutex>
#include <tuple>

namespace mlir {
class DialectRegistry;
class LLVMTypeConverter;
class RewritePatternSet;

namespace ddp {

/// What the patterns of one conversion share, so that a step with thousands
/// of runtime calls does not grow by an op per constant and a lookup per
/// name: a symbol table of the module (runtime functions and strings are
/// looked up in it rather than by a scan of the module's body), and, per
/// function, one ddprt_current_context() call and one copy of each constant,
/// built at the start of the function's entry block, and the stack arrays the
/// calls pass (see `Function::allocas`). It holds values of the IR being
/// converted: it must outlive that conversion and serve only it (keyed by
/// function bodies, which a conversion with pattern rollback, the default,
/// frees only when it ends).
///
/// The functions of a module may be converted in parallel with one cache:
/// `prepare` each body first. What the patterns add to the module (runtime
/// function declarations, constant globals) is guarded by `mutex`.
struct DDPToLLVMCache {
  /// One function's entries, touched only by the conversion of its body.
  struct Function {
    /// The constant's type and value -> the constant.
    llvm::DenseMap<Attribute, Value> constants;
    /// Its ddprt_current_context().
    Value context;
    /// (element type, count, the op's n-th array) -> a stack array at the
    /// function's entry. The runtime reads the arrays a call is given during
    /// the call only, so that every call of a function shares them: one
    /// alloca per array an op needs, not one per call.
    llvm::DenseMap<std::tuple<Type, int64_t, unsigned>, Value> allocas;
  };

  /// The entries of the function whose body is `body`, created on first
  /// use. A prepared body's are found without a lock.
  Function &function(Region *body) {
    if (prepared)
      if (auto found = functions.find(body); found != functions.end())
        return *found->second;
    std::lock_guard<std::mutex> lock(mutex);
    // Once prepared, `functions` is read without a lock: others go aside.
    std::unique_ptr<Function> &entry = (prepared ? others : functions)[body];
    if (!entry)
      entry = std::make_unique<Function>();
    return *entry;
  }

  /// Creates the entries of `bodies`, so that their conversions may run in
  /// parallel and find them without a lock; `reset` undoes it.
  void prepare(llvm::ArrayRef<Region *> bodies) {
    for (Region *body : bodies)
      functions[body] = std::make_unique<Function>();
    prepared = true;
  }
  /// Forgets every function (their bodies may move or be freed).
  void reset() {
    functions.clear();
    others.clear();
    prepared = false;
  }

  SymbolTableCollection symbolTables;
  /// Guards the module, `symbolTables`, `others` and, before `prepare`,
  /// `functions`.
  std::mutex mutex;

private:
  llvm::DenseMap<Region *, std::unique_ptr<Function>> functions, others;
  bool prepared = false;
};

/// !ddp.request<...> becomes an opaque pointer (a ddprt_request *).
void populateDDPToLLVMTypeConversions(LLVMTypeConverter &converter);

/// The patterns that turn every ddp.buffer op, ddp.state_load/state_store of
/// the i64 step counter and ddp.state into runtime calls (one call per op,
/// for its whole bucket). Tensor-typed ddp ops must be bufferized first.
/// Also adds the type conversions above. With `cache` (see DDPToLLVMCache),
/// lookups and per-function values are shared among the patterns; without,
/// every op gets its own constants and context call and lookups search the
/// module (what convert-to-llvm, which reuses its patterns, gets).
void populateDDPToLLVMConversionPatterns(LLVMTypeConverter &converter,
                                         RewritePatternSet &patterns,
                                         DDPToLLVMCache *cache = nullptr);

/// Registers the ddp dialect's ConvertToLLVMPatternInterface (the patterns
/// above), which the dialect promises.
void registerConvertDDPToLLVMInterface(DialectRegistry &registry);

} // namespace ddp
} // namespace mlir

#endif // DDP_CONVERSION_DDPTOLLVM_DDPTOLLVM_H
