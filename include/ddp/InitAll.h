//===- InitAll.h - register everything ddp-opt offers -----------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDP_INITALL_H
#define DDP_INITALL_H

namespace mlir {
class DialectRegistry;
namespace ddp {

/// The ddp dialect and the upstream dialects training steps are written in
/// (func, arith, math, scf, cf, tensor, linalg, memref, bufferization,
/// ml_program, shard).
void registerAllDialects(DialectRegistry &registry);

/// ddp passes, conversions and pipelines, and the upstream generic
/// transformation passes (canonicalize, cse, ...).
void registerAllPasses();

} // namespace ddp
} // namespace mlir

#endif // DDP_INITALL_H
