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

/// What comes before the conversion: a gradient reduction (sum or average)
/// over part of its grid (the data-parallel axis of a data x
/// tensor-parallel grid) is an error that says why, since ddp's collectives
/// span every rank; and each function gets the number of devices of the
/// grids its convertible all_reduces span (`ddp.world_size`, which hosts
/// check against the job's ranks). Two different sizes in one function are
/// an error too.
LogicalResult checkShardAllReduces(Operation *root,
                                   SymbolTableCollection &symbols);

/// The number of devices of the grid of the shard.all_reduces under `root`
/// that will become ddp collectives (the ranks of the job they were written
/// for), or 0 if there are none or a grid's size is dynamic.
int64_t shardWorldSize(Operation *root);

/// Rewrites every convertible shard.all_reduce in `module` (a remark on each
/// one left, with the reason) and erases the grids that only those used.
/// Every other op is left as it was (no folding, no dead-code removal).
/// Runs checkShardAllReduces first.
/// With `complete`, nothing of the shard dialect may be left: a grid nothing
/// refers to is erased too, and any other shard op is an error at its
/// location; returns failure then.
LogicalResult convertShardAllReduces(ModuleOp module, bool complete = false);

} // namespace mlir::ddp

#endif // DDP_CONVERSION_SHARDTODDP_SHARDTODDP_H
