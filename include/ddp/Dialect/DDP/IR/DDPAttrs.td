//===- DDPAttrs.td - ddp enums and attributes --------------*- tablegen -*-===//

#ifndef DDP_DIALECT_DDP_IR_DDPATTRS_TD
#define DDP_DIALECT_DDP_IR_DDPATTRS_TD

include "ddp/Dialect/DDP/IR/DDPDialect.td"
include "mlir/IR/EnumAttr.td"

// The enums are specialized integer attributes that print as bare keywords
// (`ddp.allreduce mean ...`), like arith.cmpi predicates.

def DDP_ReductionKind : I32EnumAttr<"ReductionKind",
    "how an allreduce combines the ranks' tensors", [
  I32EnumAttrCase<"sum", 0>,
  // The sum divided by the world size (DDP's gradient average).
  I32EnumAttrCase<"mean", 1>
]> {
  let cppNamespace = "::mlir::ddp";
}

def DDP_WorldScale : I32EnumAttr<"WorldScale",
    "a factor known only at run time, derived from the world size", [
  I32EnumAttrCase<"inverse_world_size", 0>,
  I32EnumAttrCase<"world_size", 1>
]> {
  let cppNamespace = "::mlir::ddp";
}

// What an allreduce carries. Passes use it not to compress twice; reports and
// runtime counters use it to attribute bytes to phases.
def DDP_CommRole : I32EnumAttr<"CommRole", "what an allreduce carries", [
  // Gradients nobody has compressed yet.
  I32EnumAttrCase<"gradient", 0>,
  // Tensors PowerSGD leaves uncompressed (biases, small layers), averaged.
  I32EnumAttrCase<"uncompressed", 1>,
  // The plain averaged allreduce used before PowerSGD's start iteration.
  I32EnumAttrCase<"warmup", 2>,
  // PowerSGD's P factors (summed, not averaged).
  I32EnumAttrCase<"powersgd_p", 3>,
  // PowerSGD's Q factors (averaged).
  I32EnumAttrCase<"powersgd_q", 4>
]> {
  let cppNamespace = "::mlir::ddp";
}

#endif // DDP_DIALECT_DDP_IR_DDPATTRS_TD
