//===- BufferAliasing.h - when a ddp op may use a buffer in place -*- C++
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//-*-===//
//
// The aliasing analyses the ddp bufferization models rely on, on their own
// so that they can be read and tested (test-ddp-buffer-aliasing) apart from
// the models.
//
//===----------------------------------------------------------------------===//

#ifndef DDP_DIALECT_DDP_TRANSFORMS_BUFFERALIASING_H
#define DDP_DIALECT_DDP_TRANSFORMS_BUFFERALIASING_H

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"

namespace mlir::ddp {

/// Whether `value` is an argument of its function (not of a nested block).
bool isFunctionArgument(Value value);

/// Whether tensor `value` is a function argument's: the argument itself
/// (a tensor signature, which One-Shot rewrites) or the to_tensor of a memref
/// argument (a signature bufferize-entry-signatures rewrote).
bool isFunctionArgumentTensor(Value value);

/// Whether ddp.allreduce_start may reduce `input`'s own buffer: the buffer is
/// a function argument One-Shot left in place, or a fresh allocation written
/// only by ddp ops or copies before the start, and every other use of it
/// lies in a region that never runs in the same execution as the start
/// (upstream's insideMutuallyExclusiveRegions: the other branch of the
/// warm-up scf.if). Otherwise the start reduces a copy. Runs while
/// bufferizing, when `input` is the to_tensor of its buffer (or a function
/// argument).
bool reducesInPlace(AllReduceStartOp start, Value input);

/// The first store of `load`'s state after it that runs whenever the load
/// does (in the load's block or that of an op holding it), or null if there
/// is none or another load or store of the state or a call may run in
/// between. Looks only at the ops between the two.
Operation *nextStoreOfState(StateLoadOp load);

/// Whether `load` may return the state's own buffer: nextStoreOfState finds
/// a store S with no loop between them, and every value that may alias the
/// loaded buffer (following the bufferization models' aliasing) is used
/// before S or by it, by ddp ops only.
bool mayAliasStateBuffer(StateLoadOp load,
                         const bufferization::BufferizationOptions &options);

} // namespace mlir::ddp

#endif // DDP_DIALECT_DDP_TRANSFORMS_BUFFERALIASING_H
