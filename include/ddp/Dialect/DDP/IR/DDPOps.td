//===- DDPOps.td - ddp operations --------------------------*- tablegen -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Four families of ops:
//   * communication: allreduce, allreduce_start / wait, allgather,
//     world_size;
//   * buckets for compression schemes: flatten, unflatten;
//   * local compression steps: scale, cast, and PowerSGD's add_residual,
//     project, orthogonalize, backproject, reconstruct, update_residual, plus
//     the fused forms the runtime runs as single kernels;
//   * sparsification: top_k;
//   * persistent state: state, state_load, state_store, random_normal.
// Every compute op is variadic: one op over N tensors is one multi-tensor
// kernel launch. Tensor i of every operand group belongs together.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_IR_DDPOPS_TD
#define DDP_DIALECT_DDP_IR_DDPOPS_TD

include "ddp/Dialect/DDP/IR/DDPDialect.td"
include "ddp/Dialect/DDP/IR/DDPAttrs.td"
include "ddp/Dialect/DDP/IR/DDPTypes.td"
include "ddp/Dialect/DDP/IR/DDPInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// The element types the runtime computes with and communicates: the compute
// rows of ddprt.h's DDPRT_FOR_EACH_DTYPE, through isComputeElementType (the
// summary repeats them for messages; test/Dialect/DDP/runtime-types.mlir
// checks both against the runtime's list).
def DDP_ComputeElement : Type<
    CPred<"::mlir::ddp::isComputeElementType($_self)">,
    "f32, f16, bf16 or f64 (the runtime's float types)">;
def DDP_CommTensor : RankedTensorOf<[DDP_ComputeElement]>;
// Every element type of the runtime's list, integers included: what an
// allgather moves (it copies bytes, it does not add them).
def DDP_RuntimeElement : Type<
    CPred<"::mlir::ddp::isStateElementType($_self)">,
    "f32, f16, bf16, f64, i64, i8 or i32 (the runtime's types)">;
def DDP_GatherTensor : RankedTensorOf<[DDP_RuntimeElement]>;
def DDP_Matrix : ConfinedType<2DTensorOf<[DDP_ComputeElement]>,
    [HasStaticShapePred], "statically shaped 2-D tensor">;

def DDP_StateResource : Resource<"::mlir::ddp::StateResource">;

// Ops whose results have exactly the types of their `inputs`.
class DDP_SameTypesOp<string mnemonic, list<Trait> traits = []>
    : DDP_Op<mnemonic, !listconcat(traits,
        [InferTypeOpAdaptor])>;

//===----------------------------------------------------------------------===//
// Communication
//===----------------------------------------------------------------------===//

def DDP_AllReduceOp : DDP_SameTypesOp<"allreduce", [DDP_MultiTensorOpInterface]> {
  let summary = "reduce tensors over all ranks; every rank gets the result";
  let description = [{
    One collective over all ranks of the job for all `inputs` together (a
    bucket). `sum` adds the ranks' tensors element-wise; `mean` divides that
    sum by the world size. Every rank gets bitwise-identical results, in the
    inputs' types. `role` records what the collective carries.

    `group` narrows the ranks: `node` reduces over the ranks of this rank's
    machine only (shared memory), `across_nodes` reduces one copy per node
    over the network, for inputs that are the same on every rank of a node.
    A mean divides by the group's members: the world size, the ranks on the
    node, the number of nodes. A `node` mean followed by an `across_nodes`
    mean is the world's mean (the runtime refuses the latter where nodes
    have different numbers of ranks), with one copy per node on the
    network (`ddp-two-level`).

    The op has side effects: it is a collective that every rank must execute
    in the same order.

    ```mlir
    %r:2 = ddp.allreduce mean %w, %b : tensor<64x32xf32>, tensor<64xf32>
    %p = ddp.allreduce sum %p0 role compressed : tensor<64x2xf32>
    %n = ddp.allreduce mean %w group node : tensor<64x32xf32>
    %m = ddp.allreduce mean %n group across_nodes : tensor<64x32xf32>
    ```
  }];
  let arguments = (ins DDP_ReductionKind:$kind,
                       Variadic<DDP_CommTensor>:$inputs,
                       DefaultValuedAttr<DDP_CommRole,
                                         "::mlir::ddp::CommRole::gradient">:$role,
                       DefaultValuedAttr<DDP_CommGroup,
                                         "::mlir::ddp::CommGroup::world">:$group);
  let results = (outs Variadic<DDP_CommTensor>:$results);
  // MLIR 22's enum attribute printers start with a space of their own: the
  // `` before each enum keeps one space between words (test: IR/printing.mlir).
  let assemblyFormat = [{
    `` $kind $inputs (`role` `` $role^)? (`group` `` $group^)? attr-dict `:` type($inputs)
  }];
  let extraClassDeclaration = [{
    /// Gradients nobody has compressed yet, sent over the network: what a
    /// compression pass may rewrite. A sum within a node stays exact.
    bool isCompressible() {
      return getRole() == ::mlir::ddp::CommRole::gradient &&
             getGroup() != ::mlir::ddp::CommGroup::node;
    }
  }];
  let hasVerifier = 1;
}

def DDP_AllReduceStartOp : DDP_Op<"allreduce_start", [InferTypeOpAdaptor]> {
  let summary = "start an allreduce; its result is waited for with ddp.wait";
  let description = [{
    Same semantics as `ddp.allreduce`, split in two so that local compute can
    run while the collective is in flight. The request must have exactly one
    use, a `ddp.wait`. The inputs must not be changed until the wait returns
    (with value semantics they cannot be).

    ```mlir
    %h = ddp.allreduce_start mean %b role uncompressed : tensor<64xf32>
    ...
    %r = ddp.wait %h : !ddp.request<tensor<64xf32>>
    ```
  }];
  let arguments = (ins DDP_ReductionKind:$kind,
                       Variadic<DDP_CommTensor>:$inputs,
                       DefaultValuedAttr<DDP_CommRole,
                                         "::mlir::ddp::CommRole::gradient">:$role,
                       DefaultValuedAttr<DDP_CommGroup,
                                         "::mlir::ddp::CommGroup::world">:$group);
  let results = (outs DDP_RequestType:$request);
  let assemblyFormat = [{
    `` $kind $inputs (`role` `` $role^)? (`group` `` $group^)? attr-dict `:` type($inputs)
  }];
  let hasVerifier = 1;
}

def DDP_WaitOp : DDP_Op<"wait", [InferTypeOpAdaptor]> {
  let summary = "wait for an allreduce started by ddp.allreduce_start";
  let description = [{
    Blocks until the collective of `request` is complete and returns its
    results, in the order of the start op's inputs.
  }];
  let arguments = (ins DDP_RequestType:$request);
  let results = (outs Variadic<DDP_CommTensor>:$results);
  let assemblyFormat = "$request attr-dict `:` qualified(type($request))";
}

def DDP_AllGatherOp : DDP_Op<"allgather", [InferTypeOpAdaptor]> {
  let summary = "gather every rank's tensors on every rank";
  let description = [{
    One collective over all ranks for all `inputs` together. Result `i` has
    a leading dimension of the world size (dynamic: known at run time) and
    holds every rank's input `i` in rank order, identical on every rank.
    Integer tensors may be gathered (a quantized payload in `i8`, indices in
    `i32`): nothing is added up. `role` records what the collective carries;
    a compression scheme's collectives are `compressed`.

    ```mlir
    %s, %q = ddp.allgather %scales, %payload : tensor<2xf32>, tensor<4096xi8>
    // %s : tensor<?x2xf32>, %q : tensor<?x4096xi8>
    ```
  }];
  let arguments = (ins Variadic<DDP_GatherTensor>:$inputs,
                       DefaultValuedAttr<DDP_CommRole,
                                         "::mlir::ddp::CommRole::compressed">:$role);
  let results = (outs Variadic<DDP_GatherTensor>:$results);
  let assemblyFormat = [{
    $inputs (`role` `` $role^)? attr-dict `:` type($inputs)
  }];
  let hasVerifier = 1;
}

def DDP_WorldSizeOp : DDP_Op<"world_size", [Pure]> {
  let summary = "the number of ranks in the job";
  let description = [{
    Known only at run time (`ddp-run --np`), the same on every rank and for
    the whole run. A compression scheme divides by it to average what it
    gathered.

    ```mlir
    %w = ddp.world_size : index
    ```
  }];
  let results = (outs Index:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Buckets
//===----------------------------------------------------------------------===//

def DDP_FlattenOp : DDP_Op<"flatten", [Pure]> {
  let summary = "concatenate gradients into one flat bucket for a compression scheme";
  let description = [{
    The flat view PyTorch's `GradBucket.buffer()` gives a communication
    hook: the elements of every input, in order, one after the other, in
    a 1-D tensor. `scheme` says which compression scheme reduces the
    bucket and with which options (`#ddp.compression`; the compression
    report prints them); `ddp.unflatten` splits the reduced bucket back
    into the gradients' shapes. Inputs share one element type and are
    statically shaped.

    ```mlir
    %flat = ddp.flatten %w, %b scheme <"quantize-per-channel", {channel_size = 512 : i64, exchange = "fused"}>
        : tensor<64x32xf32>, tensor<64xf32> -> tensor<2112xf32>
    ```
  }];
  let arguments = (ins Variadic<StaticShapeTensorOf<[DDP_ComputeElement]>>:$inputs,
                       DDP_CompressionAttr:$scheme);
  let results = (outs StaticShapeTensorOf<[DDP_ComputeElement]>:$result);
  let assemblyFormat = [{
    $inputs `scheme` $scheme attr-dict `:` type($inputs) `->` type($result)
  }];
  let hasVerifier = 1;
}

// It writes the runtime's counters: declared, so that nothing removes it.
def DDP_CountUncompressedOp : DDP_Op<"count_uncompressed", [
    MemoryEffects<[MemWrite<DDP_StateResource>]>]> {
  let summary = "count a bucket a compression scheme sends in another form";
  let description = [{
    Tells the runtime's counters (`ddprt_count_uncompressed`) that a bucket
    of `elements` gradient elements is sent this step in the form a
    compression scheme chose: what the scheme's collectives (role
    `compressed`) send then counts as after compression, and these
    elements as before, so that `ddp-run`'s summary says how much less the
    scheme sent. Every compression scheme has one per bucket, where it
    flattens the bucket.

    ```mlir
    ddp.count_uncompressed 2112
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntNonNegative]>:$elements);
  let assemblyFormat = "$elements attr-dict";
}

def DDP_UnflattenOp : DDP_Op<"unflatten", [Pure]> {
  let summary = "split a flat bucket back into its gradients' shapes";
  let description = [{
    The inverse of `ddp.flatten`: result `i` takes the next elements of
    `input`, as many as its (static) shape holds, in order; together they
    take all of them.

    ```mlir
    %w, %b = ddp.unflatten %mean : tensor<2112xf32> -> tensor<64x32xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[DDP_ComputeElement]>:$input);
  let results = (outs Variadic<StaticShapeTensorOf<[DDP_ComputeElement]>>:$results);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($results)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Scaling and casting (FP16/BF16 compression)
//===----------------------------------------------------------------------===//

def DDP_ScaleOp : DDP_SameTypesOp<"scale", [DDP_MultiTensorOpInterface, Pure]> {
  let summary = "multiply tensors by a factor derived from the world size";
  let description = [{
    `inverse_world_size` multiplies by 1/W, `world_size` by W, where W is the
    number of ranks. The product is rounded once, in the element type.

    ```mlir
    %s = ddp.scale %g by inverse_world_size : tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<DDP_CommTensor>:$inputs,
                       DDP_WorldScale:$factor);
  let results = (outs Variadic<DDP_CommTensor>:$results);
  let assemblyFormat = "$inputs `by` `` $factor attr-dict `:` type($inputs)";
  let hasVerifier = 1;
}

def DDP_CastOp : DDP_Op<"cast", [DDP_MultiTensorOpInterface, Pure]> {
  let summary = "convert float tensors to another float type, optionally scaled";
  let description = [{
    Converts each input element-wise to the element type of the matching
    result, rounding to nearest even. With `scaled by`, the element is first
    multiplied by the factor in the wider of the two types (one rounding),
    which is the fused form of `ddp.scale` followed by `ddp.cast`.

    A cast that narrows what is sent as a compression (fp16 or bf16, as
    insert-fp16/bf16-compression and a plan's `+fp16` send it) carries that
    decision as `scheme`, which the compression report reads; only a cast
    to narrower types may.

    ```mlir
    %h = ddp.cast %g scaled by inverse_world_size scheme <"fp16"> : tensor<64xf32> to tensor<64xf16>
    %f = ddp.cast %h : tensor<64xf16> to tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<DDP_CommTensor>:$inputs,
                       OptionalAttr<DDP_WorldScale>:$factor,
                       OptionalAttr<DDP_CompressionAttr>:$scheme);
  let results = (outs Variadic<DDP_CommTensor>:$results);
  let assemblyFormat = [{
    $inputs (`scaled` `by` `` $factor^)? (`scheme` $scheme^)? attr-dict `:` type($inputs) `to` type($results)
  }];
  let builders = [
    // A cast that is no compression's (no `scheme`).
    OpBuilder<(ins "::mlir::TypeRange":$results, "::mlir::ValueRange":$inputs,
                   "::mlir::ddp::WorldScaleAttr":$factor), [{
      build($_builder, $_state, results, inputs, factor,
            ::mlir::ddp::CompressionAttr());
    }]>
  ];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// PowerSGD steps, fine-grained
//===----------------------------------------------------------------------===//

def DDP_AddResidualOp : DDP_SameTypesOp<"add_residual", [DDP_MultiTensorOpInterface, Pure, AttrSizedOperandSegments]> {
  let summary = "error feedback: M = G + E";
  let description = [{
    Adds each gradient matrix its error-feedback residual.

    ```mlir
    %m = ddp.add_residual %g plus %e : tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Variadic<DDP_Matrix>:$inputs,
                       Variadic<DDP_Matrix>:$residuals);
  let results = (outs Variadic<DDP_Matrix>:$results);
  let assemblyFormat = [{
    $inputs `plus` $residuals attr-dict `:`
    custom<PairedTypes>(type($inputs), type($residuals))
  }];
  let hasVerifier = 1;
}

def DDP_ProjectOp : DDP_Op<"project",
    [DDP_MultiTensorOpInterface, Pure, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "PowerSGD's projection P = M * Q";
  let description = [{
    For each i, `M_i` is n x m and `Q_i` is m x r; the result `P_i = M_i Q_i`
    is n x r. `scheme` names the compression the projection belongs to
    (insert-powersgd writes `<"powersgd">`; the rank is the factors'
    width), which the compression report prints for the gradients it
    compresses.

    ```mlir
    %p = ddp.project %m times %q scheme <"powersgd"> : tensor<64x32xf32> times tensor<32x2xf32>
    ```
  }];
  let arguments = (ins Variadic<DDP_Matrix>:$matrices,
                       Variadic<DDP_Matrix>:$factors,
                       OptionalAttr<DDP_CompressionAttr>:$scheme);
  let results = (outs Variadic<DDP_Matrix>:$results);
  let assemblyFormat = [{
    $matrices `times` $factors (`scheme` $scheme^)? attr-dict `:` type($matrices) `times` type($factors)
  }];
  let hasVerifier = 1;
}

def DDP_BackprojectOp : DDP_Op<"backproject",
    [DDP_MultiTensorOpInterface, Pure, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "PowerSGD's second projection Q = M^T * P";
  let description = [{
    For each i, `M_i` is n x m and `P_i` is n x r; the result `Q_i = M_i^T P_i`
    is m x r. `scheme` as `ddp.project`'s.

    ```mlir
    %q = ddp.backproject %m times %p scheme <"powersgd"> : tensor<64x32xf32> times tensor<64x2xf32>
    ```
  }];
  let arguments = (ins Variadic<DDP_Matrix>:$matrices,
                       Variadic<DDP_Matrix>:$factors,
                       OptionalAttr<DDP_CompressionAttr>:$scheme);
  let results = (outs Variadic<DDP_Matrix>:$results);
  let assemblyFormat = [{
    $matrices `times` $factors (`scheme` $scheme^)? attr-dict `:` type($matrices) `times` type($factors)
  }];
  let hasVerifier = 1;
}

def DDP_OrthogonalizeOp : DDP_SameTypesOp<"orthogonalize", [DDP_MultiTensorOpInterface, Pure]> {
  let summary = "make the columns of each matrix orthonormal (Gram-Schmidt)";
  let description = [{
    Modified Gram-Schmidt over the columns of each n x r input, left to
    right: column j is normalized as `v / (norm(v) + epsilon)`, then its
    projection is removed from the columns after it. A column whose norm is
    exactly zero becomes zero (never NaN, whatever `epsilon` is), so columns
    that were zero stay zero and P^T P is the identity on the others.

    ```mlir
    %o = ddp.orthogonalize %p {epsilon = 0.0 : f64} : tensor<64x2xf32>
    ```
  }];
  let arguments = (ins Variadic<DDP_Matrix>:$inputs,
                       DefaultValuedAttr<F64Attr, "0.0">:$epsilon);
  let results = (outs Variadic<DDP_Matrix>:$results);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
  let hasVerifier = 1;
}

def DDP_ReconstructOp : DDP_Op<"reconstruct",
    [DDP_MultiTensorOpInterface, Pure, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "PowerSGD's decompression M_hat = P * Q^T";
  let description = [{
    For each i, `P_i` is n x r and `Q_i` is m x r; the result is n x m.

    ```mlir
    %mh = ddp.reconstruct %p times %q : tensor<64x2xf32> times tensor<32x2xf32>
    ```
  }];
  let arguments = (ins Variadic<DDP_Matrix>:$ps, Variadic<DDP_Matrix>:$qs);
  let results = (outs Variadic<DDP_Matrix>:$results);
  let assemblyFormat = "$ps `times` $qs attr-dict `:` type($ps) `times` type($qs)";
  let hasVerifier = 1;
}

def DDP_UpdateResidualOp : DDP_SameTypesOp<"update_residual", [DDP_MultiTensorOpInterface, Pure, AttrSizedOperandSegments]> {
  let summary = "error feedback: E' = M - M_hat";
  let description = [{
    The part of each (residual-corrected) gradient that compression lost,
    carried to the next step.

    ```mlir
    %e1 = ddp.update_residual %m minus %mh : tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Variadic<DDP_Matrix>:$inputs,
                       Variadic<DDP_Matrix>:$reconstructions);
  let results = (outs Variadic<DDP_Matrix>:$results);
  let assemblyFormat = [{
    $inputs `minus` $reconstructions attr-dict `:`
    custom<PairedTypes>(type($inputs), type($reconstructions))
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// PowerSGD steps, fused (one kernel each in the runtime)
//===----------------------------------------------------------------------===//

def DDP_ProjectResidualOp : DDP_Op<"project_residual",
    [DDP_MultiTensorOpInterface, Pure, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "fused P = (G + E) * Q, reading G and E once";
  let description = [{
    `ddp.add_residual` fused into `ddp.project`: the sum G + E is never
    stored. `scheme` as `ddp.project`'s.

    ```mlir
    %p = ddp.project_residual %g plus %e times %q
        : tensor<64x32xf32> times tensor<32x2xf32>
    ```
  }];
  let arguments = (ins Variadic<DDP_Matrix>:$matrices,
                       Variadic<DDP_Matrix>:$residuals,
                       Variadic<DDP_Matrix>:$factors,
                       OptionalAttr<DDP_CompressionAttr>:$scheme);
  let results = (outs Variadic<DDP_Matrix>:$results);
  let assemblyFormat = [{
    $matrices `plus` $residuals `times` $factors (`scheme` $scheme^)? attr-dict `:`
    custom<PairedTypes>(type($matrices), type($residuals))
    `times` type($factors)
  }];
  let hasVerifier = 1;
}

def DDP_BackprojectResidualOp : DDP_Op<"backproject_residual",
    [DDP_MultiTensorOpInterface, Pure, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "fused Q = (G + E)^T * P";
  let description = [{
    `ddp.add_residual` fused into `ddp.backproject`. `scheme` as
    `ddp.project`'s.

    ```mlir
    %q = ddp.backproject_residual %g plus %e times %p
        : tensor<64x32xf32> times tensor<64x2xf32>
    ```
  }];
  let arguments = (ins Variadic<DDP_Matrix>:$matrices,
                       Variadic<DDP_Matrix>:$residuals,
                       Variadic<DDP_Matrix>:$factors,
                       OptionalAttr<DDP_CompressionAttr>:$scheme);
  let results = (outs Variadic<DDP_Matrix>:$results);
  let assemblyFormat = [{
    $matrices `plus` $residuals `times` $factors (`scheme` $scheme^)? attr-dict `:`
    custom<PairedTypes>(type($matrices), type($residuals))
    `times` type($factors)
  }];
  let hasVerifier = 1;
}

def DDP_ReconstructResidualOp : DDP_Op<"reconstruct_residual",
    [DeclareOpInterfaceMethods<DDP_MultiTensorOpInterface, ["getNumResultGroups"]>, Pure, AttrSizedOperandSegments, InferTypeOpAdaptor]> {
  let summary = "fused M_hat = P * Q^T and E' = G + E - M_hat in one pass";
  let description = [{
    Reads G, E, P and Q once and writes the reconstruction and the new
    residual. For N tensors the op has 2N results: the N reconstructions,
    then the N new residuals. A tensor whose P or Q holds a NaN or an Inf
    keeps its residual (E' = E: error feedback skips the step for it, so
    one bad gradient does not poison every later step); the runtime
    reports it with DDPRT_NONFINITE.

    ```mlir
    %mh, %e1 = ddp.reconstruct_residual %p times %q from %g plus %e
        : tensor<64x2xf32> times tensor<32x2xf32> from tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Variadic<DDP_Matrix>:$ps,
                       Variadic<DDP_Matrix>:$qs,
                       Variadic<DDP_Matrix>:$matrices,
                       Variadic<DDP_Matrix>:$residuals);
  let results = (outs Variadic<DDP_Matrix>:$results);
  let assemblyFormat = [{
    $ps `times` $qs `from` $matrices `plus` $residuals attr-dict
    `:` type($ps) `times` type($qs) `from`
    custom<PairedTypes>(type($matrices), type($residuals))
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The reconstructions M_hat, one per tensor.
    ::mlir::ResultRange getReconstructions() {
      return getResults().take_front(getPs().size());
    }
    /// The new residuals E', one per tensor.
    ::mlir::ResultRange getNewResiduals() {
      return getResults().drop_front(getPs().size());
    }
  }];
}

//===----------------------------------------------------------------------===//
// Sparsification
//===----------------------------------------------------------------------===//

def DDP_TopKOp : DDP_Op<"top_k", [Pure]> {
  let summary = "the k elements largest in magnitude and their positions";
  let description = [{
    Selects the `k` elements of the 1-D `input` largest in magnitude, `k`
    being the size of both results: `values` holds them, `indices` their
    positions (`i32`, or `i64` for an input too large for `i32`), largest
    first, equal magnitudes in index order. The order is total and the same
    on every backend (`ddprt_top_k`): `-0` equals `+0`, and NaN is larger
    than any number, so a non-finite element is selected, not hidden.
    Top-k sparsification (`insert-topk`) sends what it selects.

    ```mlir
    %values, %indices = ddp.top_k %m : tensor<2112xf32> -> tensor<21xf32>, tensor<21xi32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[DDP_ComputeElement]>:$input);
  let results = (outs StaticShapeTensorOf<[DDP_ComputeElement]>:$values,
                      StaticShapeTensorOf<[I32, I64]>:$indices);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($values) `,` type($indices)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Persistent state
//===----------------------------------------------------------------------===//

def DDP_StateOp : DDP_Op<"state", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a runtime-owned buffer that lives across step calls";
  let description = [{
    Declares persistent compression state: a statically shaped tensor (Q for
    warm start, an error-feedback residual) or an `i64` scalar (a step
    counter). It starts as zeros on every rank. The runtime owns the buffer
    (device memory on GPUs), and saves and restores it with checkpoints.

    ```mlir
    ddp.state @ddp.step.train : i64
    ddp.state @ddp.error.train.0 : tensor<64x32xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttr:$type);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
}

def DDP_StateLoadOp : DDP_Op<"state_load", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead<DDP_StateResource>]>]> {
  let summary = "read a ddp.state";
  let arguments = (ins FlatSymbolRefAttr:$state);
  let results = (outs AnyType:$result);
  let assemblyFormat = "$state attr-dict `:` type($result)";
}

def DDP_StateStoreOp : DDP_Op<"state_store", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemWrite<DDP_StateResource>]>]> {
  let summary = "overwrite a ddp.state";
  let arguments = (ins AnyType:$value, FlatSymbolRefAttr:$state);
  let assemblyFormat = "$value `,` $state attr-dict `:` type($value)";
}

def DDP_RandomNormalOp : DDP_Op<"random_normal", [Pure]> {
  let summary = "standard normal samples, identical on every rank";
  let description = [{
    Fills a tensor with independent standard normal samples that are a pure
    function of (`seed`, `stream`, `step`, element index): every rank draws
    the same values without communicating, and a resumed run draws what an
    uninterrupted run would have. PowerSGD's initial Q uses one stream per
    compressed tensor.

    ```mlir
    %q = ddp.random_normal %step seed 0 stream 3 : tensor<32x2xf32>
    ```
  }];
  let arguments = (ins I64:$step, I64Attr:$seed, I64Attr:$stream);
  let results = (outs StaticShapeTensorOf<[DDP_ComputeElement]>:$result);
  let assemblyFormat = [{
    $step `seed` $seed `stream` $stream attr-dict `:` type($result)
  }];
}

def DDP_InspectOp : DDP_Op<"inspect", [Pure]> {
  let summary = "whether a tensor is all finite and whether it is all zero";
  let description = [{
    Two flags about every element of `input`: `finite` is true when none is
    NaN or infinite, `nonzero` when some element is not zero. The values
    live in backend memory (a GPU's), so the runtime looks at them and the
    flags come back to the host: use it where control flow depends on data,
    as PowerSGD does to re-draw a Q that collapsed to zero or holds NaN
    (then every rank decides the same: Q is averaged over the ranks).

    ```mlir
    %finite, %nonzero = ddp.inspect %q : tensor<32x2xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[DDP_ComputeElement]>:$input);
  let results = (outs I1:$finite, I1:$nonzero);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

// It writes the runtime's state (its counters, and the job's fate with
// --on-nonfinite=fail): declared, so that nothing removes or reorders it
// across the state it reports on, and buffer deallocation accepts it.
def DDP_ReportNonFiniteOp : DDP_Op<"report_nonfinite", [
    MemoryEffects<[MemWrite<DDP_StateResource>]>]> {
  let summary = "report values that were not finite, when a flag says so";
  let description = [{
    When `finite` is false, reports `message` as the runtime reports a
    PowerSGD tensor whose factors were not finite (`DDPRT_NONFINITE`,
    through `ddprt_report_nonfinite`): `ddp-run` and `ddprt-step-runner`
    warn and go on (`--on-nonfinite=skip`) or stop the job (`fail`).
    `this_rank_only` says that what was found is this rank's own (a state),
    not the same on every rank (an average): that rank warns, not rank 0.
    The compression schemes put one after each bucket's average and after
    each state they recovered (`ddp.inspect` found it not finite and it was
    reset to zeros).

    ```mlir
    %finite, %nonzero = ddp.inspect %mean : tensor<96xf32>
    ddp.report_nonfinite %finite, "non-finite values in the average"
    ```
  }];
  let arguments = (ins I1:$finite, StrAttr:$message, UnitAttr:$this_rank_only);
  let assemblyFormat = [{
    $finite `,` $message (`this_rank_only` $this_rank_only^)? attr-dict
  }];
  let hasVerifier = 1;
}

include "ddp/Dialect/DDP/IR/DDPBufferOps.td"

#endif // DDP_DIALECT_DDP_IR_DDPOPS_TD
