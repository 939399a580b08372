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
/// Also adds the type conversions above. With `symbolTables`, runtime
/// function and string lookups go through its cached table of the module
/// (a large step has thousands of calls); it must outlive the conversion
/// and serve only it. Without, they search the module.
void populateDDPToLLVMConversionPatterns(
    LLVMTypeConverter &converter, RewritePatternSet &patterns,
    SymbolTableCollection *symbolTables = nullptr);

/// Registers the ddp dialect's ConvertToLLVMPatternInterface (the patterns
/// above), which the dialect promises.
void registerConvertDDPToLLVMInterface(DialectRegistry &registry);

} // namespace ddp
} // namespace mlir

#endif // DDP_CONVERSION_DDPTOLLVM_DDPTOLLVM_H
