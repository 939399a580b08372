//===- Passes.td - ddp transformation passes ---------------*- tablegen -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDP_DIALECT_DDP_TRANSFORMS_PASSES_TD
#define DDP_DIALECT_DDP_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

// The passes that bucket, compress, plan and schedule the collectives (the
// ddp-compress pipeline's).
include "ddp/Dialect/DDP/Transforms/CompressionPasses.td"

// The passes of ddp-lower-to-llvm, from tensors to loops, kernels and
// runtime calls.
include "ddp/Dialect/DDP/Transforms/LoweringPasses.td"

def DDPCompressionReport : Pass<"ddp-compression-report", "::mlir::ModuleOp"> {
  let summary = "Print what each gradient sends, per tensor and in total";
  let description = [{
    Reads the communication in the module as it stands (after whatever
    insertion passes ran) and prints, for every gradient, where it comes
    from, its shape and type, whether PowerSGD compresses it and at which
    rank, and the elements and bytes before and after. Totals count the same
    elements as PyTorch's PowerSGDState.compression_stats(). After
    `ddp-plan` (the module's `ddp.plan` attribute) it also prints the plan:
    each bucket's predicted time under every choice, the choice and why,
    and the totals. The IR is not changed.
  }];
  let options = [
    Option<"output", "output", "std::string", "\"\"",
           "Where the text table goes: empty for stderr, - for stdout, or a "
           "file">,
    Option<"json", "json", "std::string", "\"\"",
           "Also write the report as JSON to this file">
  ];
}

#endif // DDP_DIALECT_DDP_TRANSFORMS_PASSES_TD
