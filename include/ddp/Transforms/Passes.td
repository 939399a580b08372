//===- Passes.td - passes that keep upstream's pipeline linear -*- tablegen -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Passes about no dialect of ours: each works around an upstream pass or
// pattern whose cost grows with the square of a function's size, for
// modules with tens of thousands of ops in one function (a training step
// with one allreduce per gradient). Each says what it works around and
// which test in test/Transforms/upstream shows whether upstream still
// behaves so; when it no longer does, the pass can go.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_TRANSFORMS_PASSES
#define DDP_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def BufferizeEntrySignatures
    : Pass<"bufferize-entry-signatures", "::mlir::ModuleOp"> {
  let summary = "Give the functions nothing calls a memref signature, "
                "before One-Shot Bufferize";
  let description = [{
    Works around One-Shot Bufferize's function-boundary analysis, which
    compares every returned tensor with every tensor argument of a
    function, twice: for a function of 10,000 tensor arguments and results
    that is 10^8 queries (4 seconds), for 100,000 it is 10^10.

    Run it right before `one-shot-bufferize{bufferize-function-boundaries}`
    (`ddp-lower-to-llvm` does). It does what One-Shot would do to the
    signature of each function with a body that no symbol use in the module
    names (an entry point a host calls), so that nothing is left to
    compare: a ranked tensor argument becomes a memref of the identity
    layout (One-Shot's `function-boundary-type-conversion=identity-layout-map`,
    so the compiled function's ABI is unchanged) and is read through
    `bufferization.to_tensor restrict writable` (not `writable` if the
    argument has `bufferization.writable = false`); a ranked tensor result
    is returned through `bufferization.to_buffer`. One-Shot then bufferizes
    the body as before, in place on the arguments where it did before.
    Called functions, declarations and functions with unranked or encoded
    tensors keep their signatures for One-Shot.

    The output of One-Shot is the same with and without it
    (`test/Transforms/upstream/bufferize-entry-signatures.mlir`); it only
    saves the time.
  }];
  let statistics = [
    Statistic<"numFunctions", "num-functions", "Signatures rewritten">
  ];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect"];
}

def SplitFunctions : Pass<"split-functions", "::mlir::ModuleOp"> {
  let summary = "Outline runs of a large function's top-level ops into calls";
  let description = [{
    Works around upstream passes whose cost grows with the square of a
    function's size, and the pass manager's one thread per function:
    ownership-based deallocation compares the buffers live at every
    `scf.if` and call; `convert-scf-to-cf` splits the block after every
    top-level `scf.if`, moving the rest of the block each time. A training
    step with thousands of gradients is one function of one block with a
    few ops per tensor.

    Run it on buffers, after One-Shot Bufferize and before ownership-based
    deallocation (`ddp-lower-to-llvm` does). It cuts the body of a
    single-block `func.func` with more than `max-ops` nested ops into
    consecutive runs of about `max-ops` ops, and moves each run into a
    private function `@<name>.part<k>` called in its place: values used
    across a cut become arguments and results. Invariants (constants, and
    pure ops of the function's arguments and other invariants, such as
    views of the arguments) move to the top of the function and are rebuilt
    in each part that uses them. The blocks of the function's top-level
    `scf.if` ops are cut the same way first, their values from outside
    becoming arguments.

    Program order and every buffer are unchanged, and deallocation needs no
    copy: it hands the caller every buffer a callee returns and gives the
    callee none of its arguments, so a part returns only buffers it
    allocates (which its caller then frees). A cut is only made where no
    stack allocation, no value of a type other than memref, index, integer,
    float or a type whose dialect lowers it to LLVM (it has a
    `ConvertToLLVMPatternInterface`: a handle such as a started
    collective's request, passed as a pointer), and no other buffer (an
    `scf.if` result, a view) is live across it; ops from the definition of
    such a buffer that the function returns on stay in the function. Each
    part gets the unit attribute `split_functions.part` and is not cut
    again; `split-deallocations` and the lowering to LLVM rely on what it
    promises (a part returns only buffers it allocated).

    It changes how a step is cut into functions, not what it computes:
    `test/Transforms/upstream/split-functions.test` runs a step lowered with
    and without it, bitwise the same; `bench/run_ddp_opt_bench.sh` times
    the lowering without the workarounds ("upstream alone").
  }];
  let options = [
    Option<"maxOps", "max-ops", "unsigned", "1000",
           "Largest function body (nested ops) left as it is (default: 1000)">
  ];
  let statistics = [
    Statistic<"numParts", "num-parts", "Functions outlined">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def SplitDeallocations
    : Pass<"split-deallocations", "::mlir::func::FuncOp"> {
  let summary = "Split bufferization.dealloc ops by the allocation each "
                "operand comes from";
  let description = [{
    Works around `ownership-based-buffer-deallocation` putting every buffer
    a function frees at its end into one `bufferization.dealloc` that also
    retains every result: for a function returning one buffer per
    gradient, thousands of each. Upstream's canonicalization and
    `buffer-deallocation-simplification` revisit that op at every change
    and compare every buffer with every retained value, and what they
    cannot prove becomes a run-time pair check on every call: all
    quadratic in the number of buffers.

    Run it right after `ownership-based-buffer-deallocation`. It first folds
    the `scf.if`s on constant conditions that the deallocation pass leaves
    (each would change the big op again), then follows every operand of a
    dealloc back through views to the op that allocated it (or to the
    function's arguments, which may alias each other; or to a call of a
    `split_functions.part`, whose results are distinct buffers it
    allocated), and splits the op into one dealloc per allocation, as the
    op's documentation allows when the aliasing memrefs are known
    statically; a retained value whose allocation no listed buffer shares
    gets the updated condition `false`. A dealloc with an operand of
    unknown origin is left as it is.

    `test/Transforms/upstream/split-deallocations.mlir` shows the single
    dealloc upstream leaves.
  }];
  let statistics = [
    Statistic<"numSplit", "num-split", "Dealloc ops split">,
    Statistic<"numFolded", "num-folded", "scf.if ops on a constant folded">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def MergeIfs : Pass<"merge-ifs", "::mlir::func::FuncOp"> {
  let summary = "Merge runs of adjacent scf.if ops on the same condition";
  let description = [{
    Works around upstream's canonicalization of `scf.if`, which merges
    adjacent ifs on one condition two at a time (`CombineIfs`), moving the
    grown body at every merge, while its condition propagation walks every
    use of the shared condition for every if: both quadratic in the number
    of ifs (30 s for 40,000). A training step guards every bucket with its
    own `scf.if` on the same condition (a compression scheme's warm-up).

    It merges each run of adjacent result-less `scf.if` ops whose condition
    is the same value into the first of them, moving every op once: the
    then regions' ops in order into one then region, the else regions' into
    one else region. Runs inside nested regions are merged too. Ifs with
    results are left to the canonicalizer. The result is what the
    canonicalizer makes of the run
    (`test/Transforms/upstream/merge-ifs.mlir`); only the time differs.
  }];
  let statistics = [
    Statistic<"numMerged", "num-merged", "scf.if ops merged into another">
  ];
}

#endif // DDP_TRANSFORMS_PASSES
