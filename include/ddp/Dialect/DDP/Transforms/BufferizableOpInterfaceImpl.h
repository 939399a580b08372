//===- BufferizableOpInterfaceImpl.h - bufferizing ddp ops ------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDP_DIALECT_DDP_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
#define DDP_DIALECT_DDP_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H

namespace mlir {
class DialectRegistry;

namespace ddp {
/// Lets One-Shot Bufferize turn the ddp tensor ops into ddp.buffer ops:
/// collectives, scale and orthogonalize work in place on their operands'
/// buffers, the PowerSGD projections write into fresh buffers, and
/// reconstruct_residual decompresses into the gradient and updates the
/// residual in place. ddp.state_load yields the runtime-owned state buffer
/// itself where that is safe.
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);
} // namespace ddp
} // namespace mlir

#endif // DDP_DIALECT_DDP_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
