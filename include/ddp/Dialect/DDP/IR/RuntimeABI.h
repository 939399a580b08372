//===- RuntimeABI.h - the runtime's ABI as the compiler sees it -*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The compiler targets the runtime's C ABI (ddprt/ddprt.h), which defines the
// element types, enums and struct layouts once, without MLIR: this header
// maps MLIR types and the dialect's enums onto it. The dialect's verifiers
// accept exactly the element types the runtime lists (DDPRT_FOR_EACH_DTYPE),
// and the lowering passes the runtime's own enumerators, so the layers
// cannot drift apart. Passes never call the runtime; they only use its
// header.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_IR_RUNTIMEABI_H
#define DDP_DIALECT_DDP_IR_RUNTIMEABI_H

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddprt/ddprt.h"

#include <optional>

namespace mlir::ddp {

/// The runtime's dtype of an element type, from ddprt.h's list; nothing for
/// a type the runtime does not have.
std::optional<ddprt_dtype> getRuntimeDtype(Type type);

/// The runtime's reduction, scale factor and counter role of the dialect's
/// enums.
ddprt_reduction getRuntimeReduction(ReductionKind kind);
ddprt_world_scale getRuntimeScale(std::optional<WorldScale> scale);
ddprt_role getRuntimeRole(CommRole role);
ddprt_group getRuntimeGroup(CommGroup group);

} // namespace mlir::ddp

#endif // DDP_DIALECT_DDP_IR_RUNTIMEABI_H
