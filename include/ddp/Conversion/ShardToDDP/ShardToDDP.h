//===- ShardToDDP.h - shard.all_reduce to ddp.allreduce ---------*- C++ -*-===//

#ifndef DDP_CONVERSION_SHARDTODDP_SHARDTODDP_H
#define DDP_CONVERSION_SHARDTODDP_SHARDTODDP_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::ddp {

/// Adds the pattern that rewrites whole-grid shard.all_reduce sum/average on
/// ranked tensors into ddp.allreduce.
void populateShardToDDPPatterns(RewritePatternSet &patterns);

/// Rewrites every convertible shard.all_reduce under `root` and leaves every
/// other op as it was (no folding, no dead-code removal).
void convertShardAllReduces(Operation *root);

} // namespace mlir::ddp

#endif // DDP_CONVERSION_SHARDTODDP_SHARDTODDP_H
