//===- Passes.td - conversions into and out of ddp ---------*- tablegen -*-===//

#ifndef DDP_CONVERSION_PASSES_TD
#define DDP_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertShardToDDP : Pass<"convert-shard-to-ddp", "::mlir::ModuleOp"> {
  let summary = "Turn upstream shard.all_reduce gradient averages into ddp.allreduce";
  let description = [{
    Rewrites `shard.all_reduce` with reduction `sum` or `average` on a ranked
    tensor, over every axis of its `shard.grid` that has more than one
    device, into `ddp.allreduce sum` or `ddp.allreduce mean`. Anything else
    (other reductions, a sub-grid, an element type change, memrefs) is left
    untouched with a remark that says why. The insertion passes run this
    conversion themselves, so upstream modules work unmodified.
  }];
  let dependentDialects = ["::mlir::ddp::DDPDialect"];
}

#endif // DDP_CONVERSION_PASSES_TD
