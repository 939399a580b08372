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

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace mlir {
class DialectRegistry;
class LLVMTypeConverter;
class RewritePatternSet;
class SymbolTableCollection;

namespace ddp {

/// !ddp.request<...> becomes an opaque pointer (a ddprt_request *).
void populateDDPToLLVMTypeConversions(LLVMTypeConverter &converter);

/// The patterns that turn every ddp.buffer op, ddp.state_load/state_store of
/// the i64 step counter and ddp.state into runtime calls (one call per op,
/// for its whole bucket). Tensor-typed ddp ops must be bufferized first.
/// Also adds the type conversions above.
///
/// Without `symbolTables`, the patterns look up and add the runtime's
/// declarations and constants through the rewriter, by a scan of the module,
/// and every op gets its own constants and ddprt_current_context() call
/// (what convert-to-llvm, which reuses these patterns, gets). With
/// `symbolTables`, DDPRuntimeDeclarations::declare must have run on the
/// module with the same tables: the patterns then only look symbols up and
/// add nothing outside the function they convert, so that the functions of
/// a module may be converted in parallel, each by its own rewriter; and the
/// calls of one function share one context call, one copy of each constant
/// and the stack arrays they pass, at the function's entry. The patterns'
/// per-function values serve one conversion: populate a pattern set for
/// each.
void populateDDPToLLVMConversionPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    SymbolTableCollection *symbolTables = nullptr);

/// gpu.launch_func (of a kernel compiled into a gpu.binary) as a call of
/// ddprt_launch_kernel, the image embedded as a constant: the runtime
/// launches it on its compute stream. `symbolTables` as above.
void populateDDPLaunchToLLVMConversionPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    SymbolTableCollection *symbolTables = nullptr);

/// cf.assert as a report through the runtime: on failure,
/// ddprt_fail(context, "cf.assert at <location>", message), so that a host
/// reports it as it reports a failed runtime call and stops the job; abort()
/// if the host's handler returns. It takes precedence over upstream's
/// lowering (puts and abort: a crash). For compiled steps, whose host links
/// the runtime; `symbolTables` as above.
void populateDDPAssertToLLVMConversionPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    SymbolTableCollection *symbolTables = nullptr);

/// The symbols the runtime calls of a module refer to, declared before its
/// functions are converted: every runtime function compiled code calls
/// (DDPRT_FOR_EACH_STEP_FUNCTION, with the signatures of their prototypes)
/// and the constant globals of the ops that call the runtime (their
/// descriptions for ddprt_check, state names, messages, and the tables of
/// the fields of their operands' ddprt_buffer and ddprt_matrix records).
/// It declares what the calls may refer to, a little more than they do:
/// `eraseUnused`, after the conversion, removes what it added that nothing
/// refers to.
class DDPRuntimeDeclarations {
public:
  /// Declares them in `module`, through `symbolTables`. Fails, with an
  /// error, if the module already has a runtime function of another type.
  static FailureOr<DDPRuntimeDeclarations>
  declare(ModuleOp module, SymbolTableCollection &symbolTables);

  /// Erases the declarations and globals `declare` added that no
  /// llvm.call or llvm.mlir.addressof refers to.
  void eraseUnused();

private:
  DDPRuntimeDeclarations(ModuleOp module, SymbolTableCollection &symbolTables)
      : module(module), symbolTables(&symbolTables) {}

  ModuleOp module;
  SymbolTableCollection *symbolTables;
  SmallVector<Operation *> added;
};

/// Registers the ddp dialect's ConvertToLLVMPatternInterface (the patterns
/// above, without symbol tables), which the dialect promises.
void registerConvertDDPToLLVMInterface(DialectRegistry &registry);

} // namespace ddp
} // namespace mlir

#endif // DDP_CONVERSION_DDPTOLLVM_DDPTOLLVM_H
