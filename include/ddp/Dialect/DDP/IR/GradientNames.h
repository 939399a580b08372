//===- GradientNames.h - the names hosts know gradients by ------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// A gradient's name ("fc1.weight") is what users find it by: ddp-run's
// --inputs and {name}, step.json, the states compressed for it and their
// checkpoints, the compression report. Modules written by hand or by an
// importer give it as the argument's name location; printing drops
// locations, so the passes also keep it as the `ddp.name` argument (and
// result) attribute, which survives, and hosts read that.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_IR_GRADIENTNAMES_H
#define DDP_DIALECT_DDP_IR_GRADIENTNAMES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Operation.h"

#include <string>
#include <vector>

namespace mlir::ddp {

/// The name a location gives a value ("fc1.weight" for loc("fc1.weight"),
/// also inside a fused or call-site location); empty if none.
std::string locationName(Location loc);

/// Argument `index`'s gradient name: its `ddp.name`, else its location's
/// name; empty if none.
std::string argumentGradientName(func::FuncOp function, unsigned index);

/// The results' gradient names: each one's `ddp.name`, else the name of
/// the argument every return gives back the allreduce (ddp or shard) of,
/// or gives back itself; empty where none. Linear in the function.
std::vector<std::string> resultGradientNames(func::FuncOp function);

/// Gives every named gradient of the functions in `root` (or of `root`, a
/// function) the `ddp.name` attribute hosts read, and the name location the
/// passes read, each from the other: an argument's name location (lost when
/// the module is printed without debug info) is recorded as its `ddp.name`,
/// and a `ddp.name` read back from a printed module becomes its location's
/// name again. A result that returns the allreduce (ddp or shard) of a named
/// argument gets that name. Returns whether anything changed.
bool recordGradientNames(Operation *root);

/// Removes the `ddp.name` argument and result attributes of the functions
/// in `root`: the lowering's, once hosts have read the signature (the LLVM
/// dialect has no use for them, and a function without argument attributes
/// keeps the lowering's linear signature conversion).
void stripGradientNames(Operation *root);

} // namespace mlir::ddp

#endif // DDP_DIALECT_DDP_IR_GRADIENTNAMES_H
