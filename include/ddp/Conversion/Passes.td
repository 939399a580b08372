//===- Passes.td - conversions into and out of ddp ---------*- tablegen -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#ifndef DDP_CONVERSION_PASSES_TD
#define DDP_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertShardToDDP : Pass<"convert-shard-to-ddp", "::mlir::ModuleOp"> {
  let summary = "Turn upstream shard.all_reduce gradient averages into ddp.allreduce";
  let description = [{
    Rewrites `shard.all_reduce` with reduction `sum` or `average` on a ranked
    tensor, over every axis of its `shard.grid` that has more than one
    device, into `ddp.allreduce sum` or `ddp.allreduce mean`, and records the
    grid's size on the function (`ddp.world_size`): hosts refuse to run it on
    another number of ranks. A sum or average over part of the grid (the
    data-parallel axis of a data x tensor-parallel grid) is an error: ddp's
    collectives span every rank, and leaving it would leave the gradient
    uncompressed. Anything else (other reductions, an element type change,
    memrefs) is left untouched with a remark that says why. A `shard.grid` that only the
    converted all_reduces used is erased (the LLVM translation has no shard
    ops). The insertion passes run this conversion themselves, so upstream
    modules work unmodified.

    With `complete=true` (the first step of `ddp-lower-to-llvm`) nothing of
    the shard dialect may remain: an all_reduce that cannot be converted,
    or any other shard op, is an error that says why, and a grid nothing
    refers to is erased.
  }];
  let options = [
    Option<"complete", "complete", "bool", /*default=*/"false",
           "Fail on any shard op left after the conversion and erase every "
           "unused grid (for lowering: the LLVM translation has no shard ops; default: false)">,
  ];
  let dependentDialects = ["::mlir::ddp::DDPDialect"];
}

def ConvertDDPToLLVM : Pass<"convert-ddp-to-llvm", "::mlir::ModuleOp"> {
  let summary = "Turn bufferized ddp ops into calls of the runtime's C ABI";
  let description = [{
    Runs after One-Shot Bufferize has turned the ddp tensor ops into
    `ddp.buffer` ops. Each becomes one call of `ddprt.h` for its whole
    bucket, with the memrefs packed into stack arrays of `ddprt_buffer` or
    `ddprt_matrix`. The calls use `ddprt_current_context()`, and every status
    goes to `ddprt_check` with the op's name and source location, so the
    host (ddp-run) can stop the job with a clear message.

    Persistent state becomes `ddprt_state_get` by name: tensor states are
    runtime-owned buffers (device memory on GPUs), the i64 step counter is
    read and written in host memory. Memrefs elsewhere are left to the
    upstream conversions (unrealized casts connect them); run
    `finalize-memref-to-llvm`, `convert-func-to-llvm` and
    `reconcile-unrealized-casts` after it, or use the `ddp-lower-to-llvm`
    pipeline.

    With `include-upstream=true` (what `ddp-lower-to-llvm` runs) the same
    conversion also lowers `affine`, `scf`, `cf` (with `cf.assert`), `math`,
    `arith`, `ub` (as `lower-affine`, `convert-scf-to-cf` and the
    `convert-*-to-llvm` passes do), `memref` (as
    `finalize-memref-to-llvm{use-generic-functions=true use-aligned-alloc=true}`
    does: a buffer's allocated pointer is its aligned one) and `func` (as
    `convert-func-to-llvm` does, with the module's data layout): one walk
    over a large step instead of nine, each followed by a verification of
    the whole module. Views must be expanded before
    (`expand-strided-metadata`). The parts of a step (`split_functions.part`, from
    `split-functions`) that are only called, with static memrefs, and
    return only buffers they allocate pass one pointer per memref
    (`llvm.bareptr`). Plain
    functions' signatures are converted in time linear in their arguments.
    It converts the signatures, calls and returns first, then each
    function's body on its own, in parallel when the context has threads
    (a step that `split-functions` cut into parts converts on every
    core), and then reconciles the unrealized casts in each function as
    `reconcile-unrealized-casts` does (casts it cannot fold stay).

    Either way, the runtime's function declarations and constant globals
    (each op's description for `ddprt_check`, state names, the tables its
    buffer arrays are copied from) are added before any body is converted,
    in the module's order, and those nothing refers to are removed after:
    the bodies' conversions add nothing to the module, so the output does
    not depend on the threads.
  }];
  let options = [
    Option<"includeUpstream", "include-upstream", "bool", /*default=*/"false",
           "Also lower affine, scf, cf, math, arith, ub, memref and func "
           "in the same conversion (default: false)">,
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::cf::ControlFlowDialect"];
}

#endif // DDP_CONVERSION_PASSES_TD
