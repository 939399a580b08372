//===- DDPInterfaces.td - ddp op interfaces ----------------*- tablegen -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDP_DIALECT_DDP_IR_DDPINTERFACES_TD
#define DDP_DIALECT_DDP_IR_DDPINTERFACES_TD

include "mlir/IR/OpBase.td"

def DDP_MultiTensorOpInterface : OpInterface<"MultiTensorOpInterface"> {
  let cppNamespace = "::mlir::ddp";
  let description = [{
    An op over a bucket of N tensors, run as one collective or one
    multi-tensor kernel launch. Its operands come in groups (the variadic
    operand segments, or one group when the op has no segments) and its
    results in `getNumResultGroups()` groups; each group holds N values
    (an optional operand group of a buffer op may be empty), and tensor i
    of every group belongs together.

    Passes use it instead of knowing each op: kernel fusion merges ops of
    one kind and configuration into one op over all their tensors
    (`mergeMultiTensorOps`), the compression report follows a tensor back
    through them, and the lowering passes N to the runtime.
  }];

  let methods = [
    InterfaceMethod<
      "The number of tensors N the op works on.",
      "unsigned", "getNumTensors", (ins), "",
      [{
        if constexpr (ConcreteOp::template hasTrait<
                          ::mlir::OpTrait::AttrSizedOperandSegments>())
          return $_op.getProperties().operandSegmentSizes[0];
        return $_op->getNumOperands();
      }]>,
    InterfaceMethod<
      "The number of operand groups.",
      "unsigned", "getNumOperandGroups", (ins), "",
      [{
        if constexpr (ConcreteOp::template hasTrait<
                          ::mlir::OpTrait::AttrSizedOperandSegments>())
          return $_op.getProperties().operandSegmentSizes.size();
        return 1;
      }]>,
    InterfaceMethod<
      "The number of result groups (N results each).",
      "unsigned", "getNumResultGroups", (ins), "",
      [{ return $_op->getNumResults() ? 1 : 0; }]>,
    InterfaceMethod<
      "The operands of group `group`: N values, or none for an empty optional group.",
      "::mlir::OperandRange", "getOperandGroup", (ins "unsigned":$group), "",
      [{
        if constexpr (ConcreteOp::template hasTrait<
                          ::mlir::OpTrait::AttrSizedOperandSegments>())
          return $_op.getODSOperands(group);
        return $_op->getOperands();
      }]>,
    InterfaceMethod<
      "The results of group `group`.",
      "::mlir::ResultRange", "getResultGroup", (ins "unsigned":$group), "",
      [{
        unsigned n = $_op->getNumResults() /
                     ::llvm::cast<MultiTensorOpInterface>($_op.getOperation())
                         .getNumResultGroups();
        return $_op->getResults().slice(group * n, n);
      }]>,
    InterfaceMethod<
      [{The op's configuration: what must be equal for two ops of its kind
        to merge into one (its inherent attributes, not its group sizes).}],
      "::mlir::Attribute", "getConfiguration", (ins), "",
      [{
        if constexpr (ConcreteOp::template hasTrait<
                          ::mlir::OpTrait::AttrSizedOperandSegments>()) {
          auto properties = $_op.getProperties();
          properties.operandSegmentSizes.fill(0);
          return ConcreteOp::getPropertiesAsAttr($_op->getContext(),
                                                 properties);
        }
        return $_op->getPropertiesAsAttribute();
      }]>,
    InterfaceMethod<
      [{Sets every operand group's size to `count` (after the operands were
        replaced by groups of that size).}],
      "void", "setNumTensors", (ins "unsigned":$count), "",
      [{
        if constexpr (ConcreteOp::template hasTrait<
                          ::mlir::OpTrait::AttrSizedOperandSegments>())
          $_op.getProperties().operandSegmentSizes.fill(count);
      }]>,
  ];

  let verify = [{
    return ::mlir::ddp::detail::verifyMultiTensorOp($_op);
  }];
}

#endif // DDP_DIALECT_DDP_IR_DDPINTERFACES_TD
