//===- Passes.h - conversions into and out of ddp ---------------*- C++ -*-===//

#ifndef DDP_CONVERSION_PASSES_H
#define DDP_CONVERSION_PASSES_H

#include "ddp/Conversion/ShardToDDP/ShardToDDP.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ddp {

#define GEN_PASS_DECL
#include "ddp/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ddp/Conversion/Passes.h.inc"

} // namespace mlir::ddp

#endif // DDP_CONVERSION_PASSES_H
