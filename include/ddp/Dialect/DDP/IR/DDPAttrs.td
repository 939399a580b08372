//===- DDPAttrs.td - ddp enums and attributes --------------*- tablegen -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDP_DIALECT_DDP_IR_DDPATTRS_TD
#define DDP_DIALECT_DDP_IR_DDPATTRS_TD

include "ddp/Dialect/DDP/IR/DDPDialect.td"
include "mlir/IR/EnumAttr.td"

// Each enum is a C++ enum (its *Enum info) and a dialect attribute holding
// one (EnumAttr), which prints as a bare keyword in the ops' syntax
// (`ddp.allreduce mean ...`) and as `#ddp<reduction mean>` on its own.

// An I32 enum of the dialect, for an EnumAttr: a keyword that is none of its
// cases is an error that names what was expected, in the dialect's words
// (`what`), not its C++ type.
class DDP_I32Enum<string name, string what, string summary,
                  list<I32EnumAttrCase> cases>
    : I32EnumAttr<name, summary, cases> {
  let cppNamespace = "::mlir::ddp";
  let genSpecializedAttr = 0;
  let parameterParser = [{[&]() -> ::mlir::FailureOr<}] # cppType # [{> {
    auto loc = $_parser.getCurrentLocation();
    std::string keyword;
    if (::mlir::failed($_parser.parseKeywordOrString(&keyword)))
      return ::mlir::failure();
    if (auto value = }] # cppNamespace # "::" # stringToSymbolFnName # [{(keyword))
      return *value;
    return {(::llvm::LogicalResult)($_parser.emitError(loc)
        << "expected }] # what # [{ (}] #
        !interleave(!foreach(c, cases, c.str), ", ") # [{), got '" << keyword << "'")};
  }()}];
}

def DDP_ReductionKindEnum : DDP_I32Enum<"ReductionKind", "a reduction",
    "how an allreduce combines the ranks' tensors", [
  I32EnumAttrCase<"sum", 0>,
  // The sum divided by the world size (DDP's gradient average).
  I32EnumAttrCase<"mean", 1>
]>;
def DDP_ReductionKind : EnumAttr<DDP_Dialect, DDP_ReductionKindEnum, "reduction">;

def DDP_WorldScaleEnum : DDP_I32Enum<"WorldScale", "a world-size factor",
    "a factor known only at run time, derived from the world size", [
  I32EnumAttrCase<"inverse_world_size", 0>,
  I32EnumAttrCase<"world_size", 1>,
  // The number of nodes (a mean across nodes divides by it).
  I32EnumAttrCase<"inverse_node_count", 2>,
  I32EnumAttrCase<"node_count", 3>
]>;
def DDP_WorldScale : EnumAttr<DDP_Dialect, DDP_WorldScaleEnum, "world_scale">;

// What an allreduce carries. Passes use it not to compress twice; reports and
// runtime counters use it to attribute bytes to phases. The cases are the
// runtime's roles (DDPRT_FOR_EACH_ROLE in ddprt.h), names and values:
// RuntimeABI.cpp checks them against that list when it compiles.
def DDP_CommRoleEnum : DDP_I32Enum<"CommRole", "a role", "what a collective carries", [
  // Gradients nobody has compressed yet.
  I32EnumAttrCase<"gradient", 0>,
  // Tensors a scheme leaves uncompressed (biases, small layers), averaged.
  I32EnumAttrCase<"uncompressed", 1>,
  // The plain averaged allreduce before a scheme's start iteration.
  I32EnumAttrCase<"warmup", 2>,
  // What a scheme sends instead of gradients: PowerSGD's P and Q factors, a
  // quantized payload and its scales, top-k's values and indices, a hook's
  // collectives. Already compressed: no pass compresses it again.
  I32EnumAttrCase<"compressed", 3>
]>;
def DDP_CommRole : EnumAttr<DDP_Dialect, DDP_CommRoleEnum, "role">;

// Which ranks an allreduce joins. The cases are the runtime's groups
// (ddprt_group in ddprt.h), names and values: RuntimeABI.cpp checks them.
def DDP_CommGroupEnum : DDP_I32Enum<"CommGroup", "a group", "which ranks a collective joins", [
  // Every rank of the job.
  I32EnumAttrCase<"world", 0>,
  // The ranks of this rank's node (one machine), through shared memory.
  I32EnumAttrCase<"node", 1>,
  // One member per node over the network, for values that are the same on
  // every rank of a node (what a `node` allreduce left). With a `node` mean
  // before it, a two-level allreduce.
  I32EnumAttrCase<"across_nodes", 2>
]>;
def DDP_CommGroup : EnumAttr<DDP_Dialect, DDP_CommGroupEnum, "group">;

// What a compression scheme does to a bucket, as the scheme says it: its
// name and its options. The op where gradients enter the scheme carries it
// (ddp.flatten for a scheme over flat buckets, PowerSGD's projections, the
// narrowing ddp.cast of fp16/bf16), and ddp-plan's decisions are written
// with it, so that what reads the IR (the compression report, a later pass)
// learns the decision from the IR, not from the ops the scheme emitted.
def DDP_CompressionAttr : AttrDef<DDP_Dialect, "Compression"> {
  let mnemonic = "compression";
  let summary = "a compression scheme and its options";
  let description = [{
    The scheme that reduces a bucket (`ddp.flatten`'s `scheme`): its name
    (`topk`, `quantize-per-tensor`, `hook:sign_ef_hook`) and the options it
    was applied with, which the compression report prints. PowerSGD's
    projections carry `<"powersgd">` and the casts that send tensors narrow
    `<"fp16">` or `<"bf16">` (what the report calls `powersgd+fp16`);
    ddp-plan writes its decisions in the same form (`ddp.planned`).

    ```mlir
    #ddp.compression<"quantize-per-channel", {channel_size = 512 : i64, exchange = "fused"}>
    ```
  }];
  let parameters = (ins StringRefParameter<"the scheme's name">:$scheme,
                        OptionalParameter<"::mlir::DictionaryAttr">:$options);
  let assemblyFormat = "`<` $scheme (`,` $options^)? `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "::llvm::StringRef":$scheme), [{
      return $_get($_ctxt, scheme, ::mlir::DictionaryAttr());
    }]>
  ];
}

#endif // DDP_DIALECT_DDP_IR_DDPATTRS_TD
