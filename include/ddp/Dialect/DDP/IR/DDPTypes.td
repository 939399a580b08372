//===- DDPTypes.td - ddp types -----------------------------*- tablegen -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDP_DIALECT_DDP_IR_DDPTYPES_TD
#define DDP_DIALECT_DDP_IR_DDPTYPES_TD

include "ddp/Dialect/DDP/IR/DDPDialect.td"
include "mlir/IR/AttrTypeBase.td"

def DDP_RequestType : TypeDef<DDP_Dialect, "Request"> {
  let mnemonic = "request";
  let summary = "an allreduce in flight";
  let description = [{
    The handle of an allreduce started by `ddp.allreduce_start`. It names the
    types of the tensors that `ddp.wait` returns when the collective is done.

    Example: `!ddp.request<tensor<64xf32>, tensor<10xf32>>`
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::Type", "result types">:$types);
  let assemblyFormat = "`<` $types `>`";
  let genVerifyDecl = 1;
}

#endif // DDP_DIALECT_DDP_IR_DDPTYPES_TD
