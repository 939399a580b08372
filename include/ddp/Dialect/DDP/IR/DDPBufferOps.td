//===- DDPBufferOps.td - the ddp ops on buffers -------------*- tablegen -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What the tensor ops become after bufferization: the same computations on
// memrefs, with explicit outputs, one op per runtime call. Compute ops write
// into `into` buffers that bufferization allocated (or into their operands,
// where the tensor op was bufferized in place); nothing here allocates.
// convert-ddp-to-llvm turns each of them into one call of the runtime's C
// ABI (ddprt.h) for the whole bucket.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_IR_DDPBUFFEROPS_TD
#define DDP_DIALECT_DDP_IR_DDPBUFFEROPS_TD

// Row-major contiguous buffers (any offset): the runtime takes a pointer and
// a size, so a strided view must be copied first.
def DDP_CommBuffer : Type<
    And<[IsMemRefTypePred,
         CPred<"::mlir::ddp::isContiguousBuffer(::llvm::cast<::mlir::MemRefType>($_self))">,
         SubstLeaves<"$_self", "::llvm::cast<::mlir::MemRefType>($_self).getElementType()",
                     DDP_ComputeElement.predicate>]>,
    "contiguous row-major memref of f32, f16, bf16 or f64", "::mlir::MemRefType">;
// What an allgather moves: every type of the runtime's list.
def DDP_GatherBuffer : Type<
    And<[IsMemRefTypePred,
         CPred<"::mlir::ddp::isContiguousBuffer(::llvm::cast<::mlir::MemRefType>($_self))">,
         SubstLeaves<"$_self", "::llvm::cast<::mlir::MemRefType>($_self).getElementType()",
                     DDP_RuntimeElement.predicate>]>,
    "contiguous row-major memref of f32, f16, bf16, f64, i64, i8 or i32",
    "::mlir::MemRefType">;
// What a ddp.state holds (the compute types, and the step counter's i64).
def DDP_StateBuffer : Type<
    And<[IsMemRefTypePred,
         CPred<"::mlir::ddp::isContiguousBuffer(::llvm::cast<::mlir::MemRefType>($_self))">,
         CPred<"::mlir::ddp::isStateElementType(::llvm::cast<::mlir::MemRefType>($_self).getElementType())">]>,
    "contiguous row-major memref of a state's type (f32, f16, bf16, f64 or i64)",
    "::mlir::MemRefType">;
def DDP_MatrixBuffer : Type<
    And<[IsMemRefTypePred,
         CPred<"::mlir::ddp::isContiguousBuffer(::llvm::cast<::mlir::MemRefType>($_self))">,
         CPred<"::llvm::cast<::mlir::MemRefType>($_self).getRank() == 2">,
         CPred<"::llvm::cast<::mlir::MemRefType>($_self).hasStaticShape()">,
         SubstLeaves<"$_self", "::llvm::cast<::mlir::MemRefType>($_self).getElementType()",
                     DDP_ComputeElement.predicate>]>,
    "contiguous statically shaped 2-D memref of f32, f16, bf16 or f64", "::mlir::MemRefType">;

class DDP_BufferOp<string mnemonic, list<Trait> traits = []>
    : DDP_Op<"buffer." # mnemonic, traits>;

def DDP_BufferAllReduceOp : DDP_BufferOp<"allreduce", [DDP_MultiTensorOpInterface]> {
  let summary = "ddp.allreduce in place on buffers";
  let description = [{
    `ddp.allreduce` after bufferization: one collective over all ranks for
    all buffers, in place.

    ```mlir
    ddp.buffer.allreduce mean %w, %b : memref<64x32xf32>, memref<64xf32>
    ```
  }];
  let arguments = (ins DDP_ReductionKind:$kind,
                       Arg<Variadic<DDP_CommBuffer>, "", [MemRead, MemWrite]>:$buffers,
                       DefaultValuedAttr<DDP_CommRole,
                                         "::mlir::ddp::CommRole::gradient">:$role,
                       DefaultValuedAttr<DDP_CommGroup,
                                         "::mlir::ddp::CommGroup::world">:$group);
  let assemblyFormat = [{
    `` $kind $buffers (`role` `` $role^)? (`group` `` $group^)? attr-dict `:` type($buffers)
  }];
  let hasVerifier = 1;
}

def DDP_BufferAllReduceStartOp : DDP_BufferOp<"allreduce_start"> {
  let summary = "ddp.allreduce_start in place on buffers";
  let description = [{
    Starts an in-place allreduce; the buffers must not be touched until the
    `ddp.buffer.wait` of the request.
  }];
  let arguments = (ins DDP_ReductionKind:$kind,
                       Arg<Variadic<DDP_CommBuffer>, "", [MemRead, MemWrite]>:$buffers,
                       DefaultValuedAttr<DDP_CommRole,
                                         "::mlir::ddp::CommRole::gradient">:$role,
                       DefaultValuedAttr<DDP_CommGroup,
                                         "::mlir::ddp::CommGroup::world">:$group);
  let results = (outs DDP_RequestType:$request);
  let assemblyFormat = [{
    `` $kind $buffers (`role` `` $role^)? (`group` `` $group^)? attr-dict `:` type($buffers) `->` qualified(type($request))
  }];
  let hasVerifier = 1;
}

def DDP_BufferWaitOp : DDP_BufferOp<"wait"> {
  let summary = "wait for a ddp.buffer.allreduce_start";
  let description = [{
    Returns when the buffers of the request hold the reduced values.
  }];
  let arguments = (ins Arg<DDP_RequestType, "", [MemRead, MemWrite]>:$request);
  let assemblyFormat = "$request attr-dict `:` qualified(type($request))";
}

def DDP_BufferAllGatherOp : DDP_BufferOp<"allgather", [DDP_MultiTensorOpInterface, AttrSizedOperandSegments]> {
  let summary = "ddp.allgather from buffers into buffers";
  let description = [{
    `ddp.allgather` after bufferization: output `i` holds world size times
    input `i`'s elements, rank-major. One `ddprt_allgather` call.

    ```mlir
    ddp.buffer.allgather %s, %q into %S, %Q
        : memref<2xf32>, memref<4096xi8> into memref<?x2xf32>, memref<?x4096xi8>
    ```
  }];
  let arguments = (ins Arg<Variadic<DDP_GatherBuffer>, "", [MemRead]>:$inputs,
                       Arg<Variadic<DDP_GatherBuffer>, "", [MemWrite]>:$outputs,
                       DefaultValuedAttr<DDP_CommRole,
                                         "::mlir::ddp::CommRole::compressed">:$role);
  let assemblyFormat = [{
    $inputs `into` $outputs (`role` `` $role^)? attr-dict `:` type($inputs) `into` type($outputs)
  }];
  let hasVerifier = 1;
}

def DDP_BufferHostBarrierOp : DDP_BufferOp<"host_barrier"> {
  let summary = "wait until host code may touch what runtime calls wrote";
  let description = [{
    Runtime calls on a GPU are enqueued, not done, when they return. Host
    code after this op sees every result of the runtime calls before it and
    may overwrite or free what they read, except the buffers of collectives
    started and not yet waited for, which keep running. Lowers to
    `ddprt_host_barrier` (a no-op on the CPU backend).
    `ddp-insert-host-barriers` places it.
  }];
  let arguments = (ins);
  let assemblyFormat = "attr-dict";
}

def DDP_BufferScaleOp : DDP_BufferOp<"scale", [DDP_MultiTensorOpInterface]> {
  let summary = "ddp.scale in place on buffers";
  let arguments = (ins Arg<Variadic<DDP_CommBuffer>, "", [MemRead, MemWrite]>:$buffers,
                       DDP_WorldScale:$factor);
  let assemblyFormat = "$buffers `by` `` $factor attr-dict `:` type($buffers)";
  let hasVerifier = 1;
}

def DDP_BufferCastOp : DDP_BufferOp<"cast", [DDP_MultiTensorOpInterface, AttrSizedOperandSegments]> {
  let summary = "ddp.cast from buffers into buffers";
  let arguments = (ins Arg<Variadic<DDP_CommBuffer>, "", [MemRead]>:$inputs,
                       Arg<Variadic<DDP_CommBuffer>, "", [MemWrite]>:$outputs,
                       OptionalAttr<DDP_WorldScale>:$factor);
  let assemblyFormat = [{
    $inputs (`scaled` `by` `` $factor^)? `into` $outputs attr-dict
    `:` type($inputs) `into` type($outputs)
  }];
  let hasVerifier = 1;
}

def DDP_BufferProjectOp : DDP_BufferOp<"project", [DDP_MultiTensorOpInterface, AttrSizedOperandSegments]> {
  let summary = "P = (M [+ E]) Q, or with `transposed`, Q = (M [+ E])^T P";
  let description = [{
    `ddp.project`, `ddp.project_residual` and (with `transposed`)
    `ddp.backproject` and `ddp.backproject_residual` on buffers. With
    residuals, M + E is used without being stored.

    ```mlir
    ddp.buffer.project %g plus %e times %q into %p
        : memref<64x32xf32> plus memref<64x32xf32> times memref<32x2xf32>
          into memref<64x2xf32>
    ```
  }];
  let arguments = (ins Arg<Variadic<DDP_MatrixBuffer>, "", [MemRead]>:$matrices,
                       Arg<Variadic<DDP_MatrixBuffer>, "", [MemRead]>:$residuals,
                       Arg<Variadic<DDP_MatrixBuffer>, "", [MemRead]>:$factors,
                       Arg<Variadic<DDP_MatrixBuffer>, "", [MemWrite]>:$outputs,
                       UnitAttr:$transposed);
  let assemblyFormat = [{
    (`transposed` $transposed^)? $matrices (`plus` $residuals^)? `times` $factors
    `into` $outputs attr-dict `:` type($matrices) (`plus` type($residuals)^)?
    `times` type($factors) `into` type($outputs)
  }];
  let hasVerifier = 1;
}

def DDP_BufferOrthogonalizeOp : DDP_BufferOp<"orthogonalize", [DDP_MultiTensorOpInterface]> {
  let summary = "ddp.orthogonalize in place on buffers";
  let arguments = (ins Arg<Variadic<DDP_MatrixBuffer>, "", [MemRead, MemWrite]>:$buffers,
                       DefaultValuedAttr<F64Attr, "0.0">:$epsilon);
  let assemblyFormat = "$buffers attr-dict `:` type($buffers)";
  let hasVerifier = 1;
}

def DDP_BufferReconstructOp : DDP_BufferOp<"reconstruct", [DDP_MultiTensorOpInterface, AttrSizedOperandSegments]> {
  let summary = "M_hat = P Q^T; with matrices and residuals also E = G + E - M_hat";
  let description = [{
    `ddp.reconstruct` and `ddp.reconstruct_residual` on buffers: the
    residuals are updated in place. An output may be its matrix G (in-place
    decompression).

    ```mlir
    ddp.buffer.reconstruct %p times %q from %g plus %e into %g
        : memref<64x2xf32> times memref<32x2xf32>
          from memref<64x32xf32> plus memref<64x32xf32> into memref<64x32xf32>
    ```
  }];
  let arguments = (ins Arg<Variadic<DDP_MatrixBuffer>, "", [MemRead]>:$ps,
                       Arg<Variadic<DDP_MatrixBuffer>, "", [MemRead]>:$qs,
                       Arg<Variadic<DDP_MatrixBuffer>, "", [MemRead]>:$matrices,
                       Arg<Variadic<DDP_MatrixBuffer>, "", [MemRead, MemWrite]>:$residuals,
                       Arg<Variadic<DDP_MatrixBuffer>, "", [MemWrite]>:$outputs);
  let assemblyFormat = [{
    $ps `times` $qs (`from` $matrices^ `plus` $residuals)? `into` $outputs attr-dict
    `:` type($ps) `times` type($qs) (`from` type($matrices)^ `plus` type($residuals))?
    `into` type($outputs)
  }];
  let hasVerifier = 1;
}

def DDP_BufferRandomNormalOp : DDP_BufferOp<"random_normal"> {
  let summary = "ddp.random_normal into a buffer";
  let arguments = (ins I64:$step, I64Attr:$seed, I64Attr:$stream,
                       Arg<DDP_CommBuffer, "", [MemWrite]>:$output);
  let assemblyFormat = [{
    $step `seed` $seed `stream` $stream `into` $output attr-dict `:` type($output)
  }];
}

def DDP_BufferTopKOp : DDP_BufferOp<"top_k"> {
  let summary = "ddp.top_k into buffers";
  let arguments = (ins Arg<DDP_CommBuffer, "", [MemRead]>:$input,
                       Arg<DDP_CommBuffer, "", [MemWrite]>:$values,
                       Arg<DDP_GatherBuffer, "", [MemWrite]>:$indices);
  let assemblyFormat = [{
    $input `into` $values `,` $indices attr-dict
    `:` type($input) `into` type($values) `,` type($indices)
  }];
  let hasVerifier = 1;
}

def DDP_BufferInspectOp : DDP_BufferOp<"inspect"> {
  let summary = "ddp.inspect of a buffer";
  let arguments = (ins Arg<DDP_CommBuffer, "", [MemRead]>:$input);
  let results = (outs I1:$finite, I1:$nonzero);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def DDP_BufferStateOp : DDP_BufferOp<"state", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the runtime-owned buffer of a ddp.state";
  let description = [{
    The buffer the runtime keeps for the state `@name` (created zeroed on
    first use). An `i64` state is a `memref<i64>` in host memory; a tensor
    state a memref of its shape, in backend memory. Reading and writing it
    is reading and writing the state.

    ```mlir
    %e = ddp.buffer.state @ddp.error.train.0 : memref<64x32xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$state);
  let results = (outs DDP_StateBuffer:$buffer);
  let assemblyFormat = "$state attr-dict `:` type($buffer)";
}

def DDP_BufferCopyOp : DDP_BufferOp<"copy", [DDP_MultiTensorOpInterface, AttrSizedOperandSegments]> {
  let summary = "copy buffers through the runtime (host or device memory)";
  let description = [{
    Unlike `memref.copy`, this works on device buffers too: it stores
    tensors into `ddp.state` buffers.
  }];
  let arguments = (ins Arg<Variadic<DDP_CommBuffer>, "", [MemRead]>:$sources,
                       Arg<Variadic<DDP_CommBuffer>, "", [MemWrite]>:$destinations);
  let assemblyFormat = [{
    $sources `into` $destinations attr-dict `:`
    custom<PairedTypes>(type($sources), type($destinations))
  }];
  let hasVerifier = 1;
}

#endif // DDP_DIALECT_DDP_IR_DDPBUFFEROPS_TD
