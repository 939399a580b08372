//===- DDPDialect.cpp - ddp dialect registration --------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Dialect/DDP/IR/DDP.h"

#include "mlir/Conversion/ConvertToLLVM/ToLLVMInterface.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"

#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::ddp;

#include "ddp/Dialect/DDP/IR/DDPOpsDialect.cpp.inc"

#include "ddp/Dialect/DDP/IR/DDPEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ddp/Dialect/DDP/IR/DDPAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "ddp/Dialect/DDP/IR/DDPOpsTypes.cpp.inc"

namespace {
/// Prints large literal LLVM struct types once, as an alias. A lowered step
/// returns one struct of a memref descriptor per gradient, and each of its
/// thousands of `llvm.insertvalue`s (and the function's own type) would
/// otherwise spell the whole struct out: text and print time that grow with
/// the square of the gradient count. The interface is consulted for every
/// type the printer sees, whichever dialect defines it.
struct DDPOpAsmDialectInterface : public OpAsmDialectInterface {
  using OpAsmDialectInterface::OpAsmDialectInterface;

  /// Structs of fewer members print in place (a memref descriptor has 5).
  static constexpr unsigned kMinAliasedMembers = 16;

  AliasResult getAlias(Type type, raw_ostream &os) const override {
    auto structType = dyn_cast<LLVM::LLVMStructType>(type);
    if (!structType || structType.isIdentified() ||
        structType.getBody().size() < kMinAliasedMembers)
      return AliasResult::NoAlias;
    os << "llvm_struct";
    return AliasResult::OverridableAlias;
  }
};
} // namespace

void DDPDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ddp/Dialect/DDP/IR/DDPOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ddp/Dialect/DDP/IR/DDPAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "ddp/Dialect/DDP/IR/DDPOpsTypes.cpp.inc"
      >();
  addInterfaces<DDPOpAsmDialectInterface>();
  // The models live with the transformations
  // (registerBufferizableOpInterfaceExternalModels); a context that uses
  // them without registering them gets an error that says so.
  declarePromisedInterfaces<
      bufferization::BufferizableOpInterface, AllReduceOp, AllReduceStartOp,
      WaitOp, ScaleOp, CastOp, ProjectOp, BackprojectOp, ProjectResidualOp,
      BackprojectResidualOp, OrthogonalizeOp, ReconstructOp,
      ReconstructResidualOp, RandomNormalOp, InspectOp, StateLoadOp,
      StateStoreOp, AddResidualOp, UpdateResidualOp, AllGatherOp, TopKOp>();
  // The lowering registers it (registerConvertDDPToLLVMInterface).
  declarePromisedInterface<ConvertToLLVMPatternInterface, DDPDialect>();
}

LogicalResult DDPDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attribute) {
  StringAttr name = attribute.getName();
  if (name == getDonateArgumentsAttrHelper().getName()) {
    if (!isa<UnitAttr>(attribute.getValue()) || !isa<FunctionOpInterface>(op))
      return op->emitError()
             << "'" << name.getValue() << "' is a unit attribute of functions";
    return success();
  }
  if (name == getStartIterAttrHelper().getName()) {
    auto value = dyn_cast<IntegerAttr>(attribute.getValue());
    if (!value || !value.getType().isSignlessInteger(64) || !isa<StateOp>(op))
      return op->emitError() << "'" << name.getValue()
                             << "' is an i64 attribute of a 'ddp.state'";
    return success();
  }
  if (name == getWorldSizeAttrHelper().getName()) {
    auto value = dyn_cast<IntegerAttr>(attribute.getValue());
    if (!value || !value.getType().isSignlessInteger(64) ||
        value.getInt() < 1 || !isa<FunctionOpInterface>(op))
      return op->emitError() << "'" << name.getValue()
                             << "' is an i64 attribute >= 1 of a function";
    return success();
  }
  if (name == getDeviceMemoryAttrHelper().getName()) {
    if (!isa<UnitAttr>(attribute.getValue()) ||
        !isa<memref::AllocOp, memref::DeallocOp>(op))
      return op->emitError() << "'" << name.getValue()
                             << "' is a unit attribute of a 'memref.alloc' "
                                "or 'memref.dealloc'";
    return success();
  }
  if (name == getPlannedAttrHelper().getName()) {
    auto allreduce = dyn_cast<AllReduceOp>(op);
    if (!isa<CompressionAttr>(attribute.getValue()) || !allreduce ||
        !allreduce.isCompressible())
      return op->emitError() << "'" << name.getValue()
                             << "' is a #ddp.compression attribute of a "
                                "gradient 'ddp.allreduce' (role gradient, "
                                "group world or across_nodes)";
    return success();
  }
  if (name == getPlanAttrHelper().getName()) {
    auto plan = dyn_cast<DictionaryAttr>(attribute.getValue());
    if (!plan || !isa<ModuleOp>(op) ||
        !isa_and_nonnull<ArrayAttr>(plan.get("buckets")))
      return op->emitError() << "'" << name.getValue()
                             << "' is a dictionary attribute of a module, "
                                "with an array of 'buckets'";
    return success();
  }
  return op->emitError() << "unknown ddp attribute '" << name.getValue() << "'";
}

/// `ddp.name` on a function's argument or result: a non-empty string.
static LogicalResult verifyValueName(Operation *op, NamedAttribute attribute,
                                     StringRef what, unsigned index) {
  auto name = dyn_cast<StringAttr>(attribute.getValue());
  if (!isa<FunctionOpInterface>(op) || !name || name.getValue().empty())
    return op->emitError() << "'" << attribute.getName().getValue()
                           << "' on " << what << " " << index
                           << " must be a non-empty string on a function";
  return success();
}

LogicalResult DDPDialect::verifyRegionArgAttribute(Operation *op,
                                                   unsigned regionIndex,
                                                   unsigned argIndex,
                                                   NamedAttribute attribute) {
  if (attribute.getName() == getNameAttrHelper().getName())
    return verifyValueName(op, attribute, "argument", argIndex);
  return op->emitError() << "unknown ddp argument attribute '"
                         << attribute.getName().getValue() << "'";
}

LogicalResult DDPDialect::verifyRegionResultAttribute(
    Operation *op, unsigned regionIndex, unsigned resultIndex,
    NamedAttribute attribute) {
  if (attribute.getName() == getNameAttrHelper().getName())
    return verifyValueName(op, attribute, "result", resultIndex);
  return op->emitError() << "unknown ddp result attribute '"
                         << attribute.getName().getValue() << "'";
}
