//===- ShardToDDP.h - shard.all_reduce to ddp.allreduce ---------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDP_CONVERSION_SHARDTODDP_SHARDTODDP_H
#define DDP_CONVERSION_SHARDTODDP_SHARDTODDP_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::ddp {

/// Adds the pattern that rewrites whole-grid shard.all_reduce sum/average on
/// ranked tensors into ddp.allreduce. `symbols` caches the grid lookups and
/// must outlive the patterns; with `remarks`, an all_reduce left unchanged
/// gets a remark that says why.
void populateShardToDDPPatterns(RewritePatternSet &patterns,
                                SymbolTableCollection &symbols,
                                bool remarks = true);

/// Rewrites every convertible shard.all_reduce in `module` (a remark on each
/// one left, with the reason) and erases the grids that only those used.
/// Every other op is left as it was (no folding, no dead-code removal).
/// With `complete`, nothing of the shard dialect may be left: a grid nothing
/// refers to is erased too, and any other shard op is an error at its
/// location; returns failure then.
LogicalResult convertShardAllReduces(ModuleOp module, bool complete = false);

} // namespace mlir::ddp

#endif // DDP_CONVERSION_SHARDTODDP_SHARDTODDP_H
