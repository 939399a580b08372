//===- RuntimeSymbols.h - what runtime calls refer to -----------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The module-level symbols that the runtime calls of lowered ddp ops refer
// to, private to the lowering: the runtime's functions (their LLVM
// signatures derived from ddprt.h), and constant globals (descriptions,
// names, the tables of buffer records). DDPRuntimeDeclarations declares
// them before a conversion, and RuntimeCall looks them up.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_LIB_CONVERSION_DDPTOLLVM_RUNTIMESYMBOLS_H
#define DDP_LIB_CONVERSION_DDPTOLLVM_RUNTIMESYMBOLS_H

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/xxhash.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::ddp::lowering {

/// A constant global: its name is `prefix` and a hash of `content`, its
/// bytes; a global of that name with other content (a hash collision) makes
/// the next one take a suffix.
struct ConstantGlobal {
  enum class Kind { String, Table };

  /// The bytes: a NUL-terminated string, or a table's i64 words.
  std::string content;
  Kind kind;
  /// `prefix` and the hash of `content`.
  std::string base;

  ConstantGlobal(StringRef prefix, std::string content, Kind kind)
      : content(std::move(content)), kind(kind),
        base((prefix + llvm::utohexstr(llvm::xxh3_64bits(this->content)))
                 .str()) {}

  /// A NUL-terminated string.
  static ConstantGlobal string(StringRef text) {
    std::string data = text.str();
    data.push_back('\0');
    return ConstantGlobal("__ddp_str_", std::move(data), Kind::String);
  }

  /// The global's type and value (built only to declare it: a lookup
  /// compares the bytes).
  Type type(MLIRContext *context) const;
  Attribute value(MLIRContext *context) const;
  /// Whether `global` holds these bytes.
  bool isHeldBy(LLVM::GlobalOp global) const;

  /// The global holding it, or the name it would take (`*free`).
  LLVM::GlobalOp find(function_ref<LLVM::GlobalOp(StringRef)> lookup,
                      std::string *free = nullptr) const {
    std::string name = base;
    for (unsigned n = 1;; ++n) {
      LLVM::GlobalOp global = lookup(name);
      if (!global || isHeldBy(global)) {
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
unsigned wordsPerRecord(Layout layout);

/// The table of the fields known at compile time of every memref operand
/// of `op`, in `layout`: a call's array of buffers or matrices is copied
/// from the slice of its operands, then gets their data pointers. Null if
/// an operand has no record in `layout`.
std::optional<ConstantGlobal> operandTable(Operation *op, Layout layout);

/// The text ddprt_check reports for `op`: the op and where it came from.
std::string describe(Operation *op);

/// The image a gpu.launch_func (`op`) launches: the one object of the
/// gpu.binary its kernel module names (looked up in `tables` if given: a
/// module's cached table, rather than a scan of the module per launch).
/// Fails where there is no such binary, or it has several objects, with an
/// error on `op` if `report`.
FailureOr<StringRef> kernelImage(Operation *op, bool report = true,
                                 SymbolTableCollection *tables = nullptr);

/// The signature of runtime function `name`, if it is one.
LLVM::LLVMFunctionType runtimeFunctionType(MLIRContext *context,
                                           StringRef name);

} // namespace mlir::ddp::lowering

#endif // DDP_LIB_CONVERSION_DDPTOLLVM_RUNTIMESYMBOLS_H
