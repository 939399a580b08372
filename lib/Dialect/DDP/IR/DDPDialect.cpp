//===- DDPDialect.cpp - ddp dialect registration --------------------------===//

#include "ddp/Dialect/DDP/IR/DDP.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::ddp;

#include "ddp/Dialect/DDP/IR/DDPOpsDialect.cpp.inc"

#include "ddp/Dialect/DDP/IR/DDPEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "ddp/Dialect/DDP/IR/DDPOpsTypes.cpp.inc"

void DDPDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ddp/Dialect/DDP/IR/DDPOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "ddp/Dialect/DDP/IR/DDPOpsTypes.cpp.inc"
      >();
}
