//===- DDPDialect.td - ddp dialect definition --------------*- tablegen -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The `ddp` dialect represents the gradient communication of a data-parallel
// training step and the compression steps that replace it.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_IR_DDPDIALECT_TD
#define DDP_DIALECT_DDP_IR_DDPDIALECT_TD

include "mlir/IR/OpBase.td"

def DDP_Dialect : Dialect {
  let name = "ddp";
  let cppNamespace = "::mlir::ddp";
  let summary = "Gradient communication and its compression (PowerSGD, FP16/BF16)";
  let description = [{
    Every rank of a data-parallel job runs the same step function. The `ddp`
    ops describe the collectives that synchronize gradients across all ranks
    of the job (the "world"; its size is known only at run time) and the
    local computations that compress what those collectives carry.

    All ops work on ranked tensors with value semantics. Persistent
    compression state (PowerSGD's Q matrices, error-feedback residuals and
    the step counter) lives in module-level `ddp.state` symbols that the
    runtime owns, checkpoints and restores.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  // Attributes the dialect puts on other ops (named ddp.<name>, verified in
  // verifyOperationAttribute).
  let discardableAttrs = (ins
    // On a func.func: its caller gives it its argument buffers
    // (ddp-donate-arguments then returns them without copies; ddp-run sets
    // it on the step it calls).
    "::mlir::UnitAttr":$donate_arguments,
    // On PowerSGD's step-counter ddp.state: the i64 start-iter of the
    // insertion pass (informational, for hosts: ddp-run reports the warm-up
    // with it).
    "::mlir::IntegerAttr":$start_iter,
    // On a builtin.module: what ddp-plan predicted for each bucket and
    // chose (a dictionary with `profile`, `world` and `buckets`; the
    // compression report prints it).
    "::mlir::DictionaryAttr":$plan,
    // On a gradient ddp.allreduce of a planned module: how ddp-plan chose
    // to send the bucket (`#ddp.compression<"powersgd", {rank = 2 : i64}>`,
    // `<"fp16">`, `<"topk", {options = "ratio=0.001"}>`). The stage that
    // compresses that way (insert-powersgd, insert-fp16/bf16-compression,
    // ddp-apply-planned-schemes) takes the bucket and removes the
    // attribute; the lowering refuses one left behind.
    "::mlir::ddp::CompressionAttr":$planned,
    // On a function: the number of ranks its collectives were written for
    // (the size of the shard.grid whose all_reduces convert-shard-to-ddp
    // turned into ddp collectives over every rank); hosts refuse a job of
    // another size.
    "::mlir::IntegerAttr":$world_size,
    // On a memref.alloc and the memref.dealloc that frees it, in a step
    // lowered for the GPU: the buffer is device memory from the runtime's
    // stream-ordered pool (ddprt_device_alloc, ddprt_device_free), which
    // only kernels and runtime calls touch (ddp-device-allocations).
    "::mlir::UnitAttr":$device_memory,
    // On a function's argument or result: the gradient's name
    // ("fc1.weight"), the name hosts use for it (ddp-run's --inputs and
    // {name}, step.json, checkpoints of its states). The passes record it
    // from the argument's name location, which printing drops; the ONNX
    // importer sets it from the initializer's name.
    "::mlir::StringAttr":$name
  );
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Where `ddp-compression-report` writes its table when its `output`
    /// option is empty, in this context: a host (the C API) takes the text;
    /// without a handler it goes to stderr. An empty function removes it.
    using ReportHandler = std::function<void(::llvm::StringRef text)>;
    void setReportHandler(ReportHandler handler) {
      reportHandler = std::move(handler);
    }
    const ReportHandler &getReportHandler() const { return reportHandler; }

  private:
    ReportHandler reportHandler;

  public:
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

class DDP_Op<string mnemonic, list<Trait> traits = []>
    : Op<DDP_Dialect, mnemonic, traits>;

#endif // DDP_DIALECT_DDP_IR_DDPDIALECT_TD
