//===- LoweringPasses.td - the lowering's passes -----------*- tablegen -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Included by Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_TRANSFORMS_LOWERINGPASSES_TD
#define DDP_DIALECT_DDP_TRANSFORMS_LOWERINGPASSES_TD

include "mlir/Pass/PassBase.td"

def DDPDonateArguments : Pass<"ddp-donate-arguments", "::mlir::ModuleOp"> {
  let summary = "Return argument buffers without copying them, where the caller donates them";
  let description = [{
    Runs after buffer deallocation. A public function's caller keeps its
    argument buffers, so a result that is an argument (an allreduce done in
    place on a gradient) is returned as a clone. In functions marked with
    the unit attribute `ddp.donate_arguments`, the caller gives its argument
    buffers to the function instead (ddp-run does): such a clone, used only
    by the return, is dropped and the argument itself is returned. The
    caller then owns that buffer through the result, and must not free it
    twice.

    In such a function, a result computed into a new buffer of its
    argument's type (the same index, shape and element type: an fp16 step's
    gradients widened back from their f16 sum) is computed into that
    argument's buffer instead, when nothing uses the argument after the
    buffer is allocated (no op reached from the argument through its uses,
    views and requests included, comes later in the function's block). The
    step then needs no buffer of its own for that result, and a caller
    whose destination is the argument (in place) has nothing to copy.
  }];
  let statistics = [
    Statistic<"numDonated", "num-donated", "Result copies of arguments dropped">,
    Statistic<"numReused", "num-reused",
              "New result buffers replaced by their arguments' buffers">
  ];
  // Its attribute helper is the dialect's, loaded even when no ddp op is.
  let dependentDialects = ["::mlir::ddp::DDPDialect"];
}

def DDPInsertHostBarriers
    : Pass<"ddp-insert-host-barriers", "::mlir::func::FuncOp"> {
  let summary = "Wait for the device only where host code touches memory "
                "after runtime calls";
  let description = [{
    Runs on buffers, in `ddp-lower-to-llvm` after deallocation is explicit.
    On a GPU the runtime's calls are enqueued (kernels on a compute stream,
    collectives on a communication stream, ordered by events), and the step's
    own code (loops over memrefs, copies, frees) runs on the host over
    memory both can address. This pass inserts `ddp.buffer.host_barrier`
    right before the first op after runtime calls that may read, write or
    free memory (by its memory effects; an op of unknown effects, a call,
    counts), and before the terminator if runtime calls come last. Runs of
    runtime calls, and host code that only computes scalars, go without one.
    A kernel launch (`gpu.launch_func`, from `ddp-map-loops-to-gpu`) counts
    as a runtime call: the runtime enqueues it on the compute stream.
    A barrier waits for the compute stream only: a collective started and
    not yet waited for keeps running through the host code after it. An op
    with regions is judged by what it contains; a loop's body starts with
    the device busy if the body makes runtime calls (the previous iteration
    may have left work).
  }];
  let statistics = [
    Statistic<"numBarriers", "num-barriers", "Host barriers inserted">
  ];
  let dependentDialects = ["::mlir::ddp::DDPDialect"];
}

def DDPSplitReductions
    : Pass<"ddp-split-reductions", "::mlir::func::FuncOp"> {
  let summary = "Split reductions whose result does not depend on their "
                "order into chunks reduced in parallel";
  let description = [{
    Runs in `ddp-lower-to-llvm{target=cuda}` on buffers, before
    `ddp-parallelize-loops`. A linalg op with one reduction loop longer
    than `chunk` whose every output combines with a minimum or a maximum
    (`arith.minimumf`, `maximumf`, `minsi`, `maxsi`, `minui`, `maxui`: a
    quantizer's range over a bucket) becomes two loop nests: an
    `scf.parallel` over the chunks of `chunk` iterations (and the op's
    parallel loops), each reducing its chunk from the output's initial
    value into a partial result (in registers), and an `scf.parallel` over
    the output elements that combines their chunks' partial results. The
    result is the same bits in any order (NaN and signed zeros included),
    so the same as one thread's. Sums, products and `minnumf`/`maxnumf`
    (whose choice between -0 and +0 is left open) are left alone.
  }];
  let options = [
    Option<"chunk", "chunk", "int64_t", /*default=*/"1024",
           "Iterations of the reduction loop each thread reduces">
  ];
  let statistics = [
    Statistic<"numSplit", "num-split", "reductions split">
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def DDPMapLoopsToGPU : Pass<"ddp-map-loops-to-gpu", "::mlir::func::FuncOp"> {
  let summary = "Put the step's own loops on the GPU as gpu.launch kernels";
  let description = [{
    Runs in `ddp-lower-to-llvm{target=cuda}` on buffers, after the linalg
    ops are loops (`ddp-parallelize-loops{every-loop}` made each
    element-wise nest one `scf.parallel`) and before `gpu-kernel-outlining`.
    The host code that is left only launches kernels and calls the runtime:

    - an `scf.parallel` (no results, nothing called inside) becomes a
      `gpu.launch` of one thread per iteration, `block-size` threads a
      block: the thread's linear index, guarded, delinearized into the
      loop's induction variables;
    - a `memref.copy` becomes the same kind of launch, one element per
      thread;
    - a loop nest of another kind (a reduction, a row's minimum, a sum in
      the order `ddp-reassociate-sums` chose) and the stores around it
      (an accumulator's initial value) become a kernel of one thread: the
      same operations in the same order as on the CPU, so the same bits.
      Stores with only pure scalar ops or allocations between them and such
      a loop join its kernel, and so does a scalar load whose value only
      reaches such stores through pure ops (a loss divided by the batch).

    (`ddp-parallelize-loops{every-loop}` has already made a reduction with
    parallel loops, a row's maximum or a column's sum, an `scf.parallel`
    over its output elements; only reductions to one value are left for
    kernels of one thread.)

    What stays on the host: runtime calls and the control flow around them,
    allocations and frees, scalar loads whose value the host needs (a
    branch on a reduced value, a scale a later kernel takes;
    `ddp-insert-host-barriers` then waits for the kernels before it), the
    host's stack and the module's globals (which the device cannot
    address), and the bookkeeping of the buffer deallocation (buffers of
    `index` or `i1` elements). A loop that allocates, calls a function or
    the runtime, yields values or has a parallel loop inside stays on the
    host too (the parallel loop inside becomes its kernel).
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block of the one-thread-per-iteration kernels">
  ];
  let statistics = [
    Statistic<"numParallel", "num-parallel",
              "kernels of one thread per iteration or element">,
    Statistic<"numSerial", "num-serial", "kernels of one thread">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def DDPDeviceAllocations
    : Pass<"ddp-device-allocations", "::mlir::func::FuncOp"> {
  let summary = "Put the buffers only the device touches in the runtime's "
                "stream-ordered device memory";
  let description = [{
    Runs in `ddp-lower-to-llvm{target=cuda}` after the kernels are outlined
    (`gpu.launch_func`). A `memref.alloc` whose buffer is used only by
    kernel launches, runtime calls (ddp ops) and views of it, and freed by
    `memref.dealloc` in the function, gets `ddp.device_memory`, and so do
    its deallocations: convert-ddp-to-llvm lowers them to
    `ddprt_device_alloc` and `ddprt_device_free` (on CUDA, `cudaMallocAsync`
    and `cudaFreeAsync` on the compute stream, from a pool that keeps
    memory between steps), and `ddp-insert-host-barriers` lets such a free
    go without waiting for the device (it is enqueued after the kernels
    that use the buffer). Every other buffer stays where the host can read
    it (managed memory on CUDA): what the step returns, what the host reads
    or writes, what a function call or the deallocation's bookkeeping
    (`extract_aligned_pointer_as_index`, conditional frees through the
    ownership helper) sees.
  }];
  let statistics = [
    Statistic<"numDevice", "num-device", "allocations in device memory">
  ];
  let dependentDialects = ["::mlir::ddp::DDPDialect"];
}

def DDPMergeGPUModules
    : Pass<"ddp-merge-gpu-modules", "::mlir::ModuleOp"> {
  let summary = "Put every outlined kernel in one GPU module";
  let description = [{
    Runs in `ddp-lower-to-llvm{target=cuda}` right after
    `gpu-kernel-outlining`, which makes one `gpu.module` per kernel. Every
    kernel moves into the first module, named after the module it came from
    (unique in the module), and every `gpu.launch_func` is pointed at it: the
    kernels are compiled to PTX in one LLVM module, once, instead of setting
    up the NVPTX backend for each of thousands of kernels, and the runtime
    loads one image per step. Modules with other targets, attributes or
    contents than one kernel are left as they are.
  }];
  let statistics = [
    Statistic<"numMerged", "num-merged", "kernels moved into one module">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def DDPCheckLowerable : Pass<"ddp-check-lowerable", "::mlir::ModuleOp"> {
  let summary = "Check that every tensor op has a bufferization model "
                "registered, before ddp-lower-to-llvm bufferizes";
  let description = [{
    Runs in `ddp-lower-to-llvm` right before One-Shot Bufferize (after
    element-wise ops on tensors became linalg). One-Shot Bufferize needs a model
    (`BufferizableOpInterface`) for every op on tensors, and the models are
    registered with the context, not by the passes: a host that created its
    context without them (`mlir::ddp::registerAllDialects(registry)`,
    `ddp/InitAll.h`, registers every dialect and model the pipelines need)
    would otherwise get "op was not bufferized" deep inside the pipeline,
    or, for a ddp op, a fatal error about a promised interface. This pass
    reports each op kind without a model once, at its first location, with
    the call that registers it. It also refuses a bucket still annotated by
    `ddp-plan` (`ddp.planned`): no stage compressed it, so it would travel
    plain without a word.
  }];
}

def DDPInsertRuntimeChecks
    : Pass<"ddp-insert-runtime-checks", "::mlir::func::FuncOp"> {
  let summary = "Guard indexing, slicing, shapes and integer division with "
                "run-time checks";
  let description = [{
    Runs in `ddp-lower-to-llvm` (unless `runtime-checks=false`) right after
    element-wise ops on tensors became linalg, on the code of the step as
    its author wrote it, hooks included. Before each op whose misuse would
    read or write memory the op does not own, or trap, it inserts a
    `cf.assert` that the lowering turns into a call of `ddprt_fail`: a step
    that breaks one reports the op's location on every rank and stops the
    job with exit status 1, instead of dying of a signal or computing with
    garbage.

    * Ops with upstream's `RuntimeVerifiableOpInterface` (what
      `generate-runtime-verification` checks): `tensor.extract`,
      `tensor.insert`, `tensor.extract_slice`, `tensor.insert_slice`,
      `tensor.dim`, `tensor.cast`, and the `memref` ops that index, slice
      or cast.
    * `tensor.insert_slice` (upstream has no model for it): the slice lies
      within the destination; `tensor.empty`: no dynamic size is negative;
      `tensor.cast` to a static size: the dimensions it fixes match.
    * Integer division and remainder (`arith.divsi`, `divui`, `remsi`,
      `remui`, `ceildivsi`, `ceildivui`, `floordivsi`, scalar or inside a
      `linalg` body): the divisor is not zero, and for the signed ones the
      quotient does not overflow (the minimum divided by -1). A divisor
      that is a constant which cannot fail is not checked.

    The message names the op and what failed:

    ```
    ddp-run: rank 0: error: step 0: cf.assert at hook.mlir:12:10: DDPRT_ERROR_INVALID_ARGUMENT: tensor.extract: out-of-bounds access
    ```

    Checks whose condition is a constant (static shapes, the slices the
    compression passes make) fold away in the lowering's canonicalizer.
  }];
  // What upstream's models build their checks from.
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numChecked", "num-checked", "ops given run-time checks">
  ];
}

def DDPBranchTensorSelects
    : Pass<"ddp-branch-tensor-selects", "::mlir::func::FuncOp"> {
  let summary = "A select of whole tensors on one condition as a branch";
  let description = [{
    Runs in `ddp-lower-to-llvm` before element-wise ops become `linalg`.
    `arith.select %cond, %a, %b` with a scalar condition and tensor operands
    picks one of two tensors; as an element-wise op it would read the chosen
    tensor and write a copy of it. It becomes

    ```mlir
    %r = scf.if %cond -> (tensor<...>) {
      scf.yield %a : tensor<...>
    } else {
      scf.yield %b : tensor<...>
    }
    ```

    which bufferizes to the chosen buffer itself. An operand that is a
    splat constant (the zeros a scheme's NaN guard resets its state to) is
    made inside its branch, as a fill: a step that never takes the branch
    never writes it. The compression schemes' guard of their state
    (`ddp.inspect`, then this select, then `ddp.state_store`) thus costs one
    copy into the state instead of a pass and a copy.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numBranched", "num-branched", "selects made branches">
  ];
}

def DDPFuseElementwise
    : Pass<"ddp-fuse-elementwise", "::mlir::func::FuncOp"> {
  let summary = "Fuse chains of element-wise linalg ops on tensors, "
                "contractions left whole";
  let description = [{
    Runs in `ddp-lower-to-llvm` after element-wise ops became
    `linalg.generic`, before bufferization. Upstream's element-wise fusion
    (the patterns of `linalg-fuse-elementwise-ops`): a producer whose every
    loop is parallel and whose result feeds one consumer is folded into the
    consumer's body, reductions included, so that a hook or a quantizer
    reads and writes memory as few times as its arithmetic needs (a
    per-tensor quantizer: one pass for the minimum and maximum, one to
    quantize, one to dequantize and sum).

    Unlike upstream's pass it leaves contractions (matmuls and the
    `linalg.generic` ops that are one) as they are, neither fused into nor
    growing a body: `ddp-matmuls-to-runtime` turns them into calls of the
    runtime's BLAS, which a fused body would prevent. Named ops a hook
    writes (`linalg.map`, `linalg.reduce`, `linalg.add`, ...) become
    `linalg.generic` first, so that they fuse too. A concatenation (a
    flattened bucket) inserted at the start of a filled tensor (a
    quantizer's padding to whole channels) becomes one concatenation ending
    with the filled tail: the gradients are copied once, not twice. The result of a
    fused chain rounds as the unfused one: every value is computed by the
    same ops, in the same order, in registers instead of memory.
  }];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numFused", "num-fused", "linalg ops fused into another">
  ];
}

def DDPTileAndFuse : Pass<"ddp-tile-and-fuse", "::mlir::func::FuncOp"> {
  let summary = "Tile element-wise consumers and fuse the producers they "
                "read in parts, so that intermediate buffers stay in cache";
  let description = [{
    Runs in `ddp-lower-to-llvm` after `ddp-fuse-elementwise`. Element-wise
    fusion cannot fold an element-wise op into a producer that reduces (a
    quantizer's sum of the ranks' dequantized values, followed by the
    division by the world size), nor a fill into the op that accumulates
    into it. This pass tiles each such element-wise consumer over its
    innermost dimensions (tiles of `tile-elements` elements) with
    upstream's tile-and-fuse (`scf.forall` over tiles, which
    `ddp-parallelize-loops` runs on several threads) and computes, inside
    each tile, the part of every producer it reads: the fill, the sum over
    the ranks and the division then meet in cache, and memory sees one read
    of the gathered bytes and one write of the result.

    A producer is fused only where the tile reads a part of it, not all of
    it (a minimum and a maximum that every tile needs stay computed once),
    only when the consumer is its only user (nothing is computed twice), and
    never when it is a contraction (which stays whole for BLAS). Reshapes
    between a producer and its consumer are moved out of the way first
    (upstream's reshape propagation, for reshapes of linalg results only).
    Every value is computed by the same ops in the same order as before.
  }];
  let options = [
    Option<"tileElements", "tile-elements", "int64_t", /*default=*/"4096",
           "Elements per tile of a tiled consumer">
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numTiled", "num-tiled", "consumers tiled">,
    Statistic<"numFused", "num-fused", "producers fused into tiles">
  ];
}

def DDPParallelizeLoops : Pass<"ddp-parallelize-loops", "::mlir::func::FuncOp"> {
  let summary = "Run the step's large loop nests on several threads "
                "(scf.parallel, for convert-scf-to-openmp)";
  let description = [{
    Runs in `ddp-lower-to-llvm` after bufferization (unless
    `parallel-loops=false`). Two kinds of loops become `scf.parallel`,
    which `convert-scf-to-openmp` then turns into OpenMP work-sharing
    loops:

    - the tiles of `ddp-tile-and-fuse` (`scf.forall` on buffers);
    - a linalg op on buffers with only parallel loops (an element-wise
      op): it is lowered to loops here, and its leading loops (as many as
      give at least 256 iterations, never the innermost loop of a nest of
      several, which stays sequential for the vectorizer; loops of one
      iteration skipped) form the `scf.parallel`.

    A loop nest runs on several threads only if it does at least
    `min-iterations` innermost iterations in all (a dimension whose size
    is not known when compiling counts as large, unless its bound is: a
    tile's), and only if its body calls nothing (no runtime call, no
    function): the threads share nothing but the buffers they write
    disjoint parts of. Every other loop nest is left as it is (a `scf.forall`
    becomes `scf.for`), and no parallel loop is put inside another.

    Each element is computed by the same operations in the same order as
    on one thread: results do not depend on the number of threads.
    Reductions (a minimum over a bucket or per row, a contraction lowered
    as loops) stay on one thread: their accumulators live in memory inside
    the loop nest, which the vectorizer keeps in registers only where it
    knows the buffers apart, and a thread's function (its buffers passed
    through a shared structure) is not such a place.
  }];
  let options = [
    Option<"minIterations", "min-iterations", "int64_t",
           /*default=*/"65536",
           "The fewest innermost iterations a loop nest needs to be run on "
           "several threads">,
    Option<"parallel", "parallel", "bool", /*default=*/"true",
           "false: no loop becomes parallel, and every tile loop becomes "
           "scf.for (ddp-lower-to-llvm{parallel-loops=false})">,
    Option<"everyLoop", "every-loop", "bool", /*default=*/"false",
           "Make every parallel loop of an element-wise nest part of the "
           "scf.parallel, the innermost too, however many iterations the "
           "others have (a GPU's threads, one element each: "
           "ddp-lower-to-llvm{target=cuda})">
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::scf::SCFDialect"];
  let statistics = [
    Statistic<"numParallel", "num-parallel", "loop nests made parallel">,
    Statistic<"numSequential", "num-sequential",
              "tile loops left on one thread">
  ];
}

def DDPMatmulsToRuntime
    : Pass<"ddp-matmuls-to-runtime", "::mlir::ModuleOp"> {
  let summary = "Turn f32 contractions on buffers into calls of the "
                "runtime's BLAS";
  let description = [{
    Runs in `ddp-lower-to-llvm` after bufferization, before the remaining
    linalg ops become loops (unless `contractions=loops`). Every f32
    contraction on buffers with one M, one N and one K dimension and at
    most one batch dimension (`linalg.matmul`, `linalg.batch_matmul`, their
    transposed forms, and any `linalg.generic` that computes
    `C += A * B` over such maps) becomes

    ```mlir
    func.call @ddprt_step_matmul_f32(%a, %b, %c)
        : (memref<*xf32>, memref<*xf32>, memref<*xf32>) -> ()
    ```

    on views of the operands as `[batch x] M x K`, `K x N` and `M x N`
    (`memref.transpose` where the op reads an operand the other way
    around). The host function calls `ddprt_gemm`: OpenBLAS's `sgemm` on
    the CPU (threads: `ddp-run --threads-per-rank`), cuBLAS on a GPU; a view that is
    neither row- nor column-major (a strided slice) is copied first.

    The library's blocked sums round differently from a loop over K in
    order (relative differences of a few units in the last place, growing
    with K); `contractions=loops` keeps the generated loops, whose sums run
    in source order. Results stay identical on every rank of a job whose
    nodes run the same library on the same kind of CPU.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numCalls", "num-calls", "contractions turned into calls">
  ];
}

def DDPReassociateSums
    : Pass<"ddp-reassociate-sums", "::mlir::func::FuncOp"> {
  let summary = "Let the innermost reduction loops' sums and products be "
                "reassociated, so that they vectorize";
  let description = [{
    Runs in `ddp-lower-to-llvm` (unless `sum-order=source`). In every
    `linalg` op whose innermost loop is a reduction, the `arith.addf` or
    `arith.mulf` that combines an output's running value with the next
    term gets the `reassoc` fast-math flag, and nothing else does. Matmuls
    (what `ddp-matmuls-to-runtime` hands to BLAS) are left alone: their sum
    over K is BLAS's, or in source order with `contractions=loops`. LLVM's
    vectorizer then keeps one partial sum per vector lane (and per
    interleaved register) and adds them at the end, instead of adding the
    elements one after the other: a hook's sum of absolute values runs at
    the speed of memory, not at one addition per cycle.

    The result is rounded differently from a sum in source order (the same
    terms, added in another order; the difference is within the sum's
    rounding error bound). It is the same on every rank and in every run
    of the same compiled step on the same kind of CPU. Minimum and maximum
    reductions (a quantizer's) are exact in any order and vectorize
    without this pass; reductions over an outer loop (a sum over ranks) keep
    their order, as the vectorizer runs over the parallel loop inside.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numReassociated", "num-reassociated",
              "reduction combiners marked reassoc">
  ];
}

def DDPExpandIntegerDivision
    : Pass<"ddp-expand-integer-division", "::mlir::func::FuncOp"> {
  let summary = "Expand the rounding integer divisions that have no LLVM "
                "lowering";
  let description = [{
    `arith.ceildivsi`, `arith.ceildivui` and `arith.floordivsi` as the
    `arith` ops that lower to LLVM (upstream's expansion patterns for
    them). Only those: upstream's `arith-expand` also rewrites
    `arith.minimumf`/`maximumf` as compares and selects, which LLVM's
    vectorizer does not recognize as a reduction (a quantizer's minimum and
    maximum stayed scalar) and which put `+0.0` where `minimumf` of `-0.0`
    and `+0.0` is `-0.0`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

#endif // DDP_DIALECT_DDP_TRANSFORMS_LOWERINGPASSES_TD
