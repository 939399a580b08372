//===- DDPOps.cpp - ddp op verifiers, type inference, assembly ------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The collectives, buckets, casts, state and top-k: their verifiers, type
// inference and custom assembly, and the op classes' definitions
// (DDPOps.cpp.inc). PowerSGD's matrix ops verify in PowerSGDOps.cpp, the
// other buffer forms in BufferOps.cpp; what they share is OpVerification.h.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/IR/DDP.h"

#include "OpVerification.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace mlir::ddp;
using namespace mlir::ddp::detail;

//===----------------------------------------------------------------------===//
// custom<PairedTypes>: two operand groups of the same types (a matrix and
// its residual) print their types once. The verifiers check that the types
// really are equal.
//===----------------------------------------------------------------------===//

static ParseResult parsePairedTypes(OpAsmParser &parser,
                                    SmallVectorImpl<Type> &types,
                                    SmallVectorImpl<Type> &pairedTypes) {
  if (parser.parseTypeList(types))
    return failure();
  pairedTypes.assign(types.begin(), types.end());
  return success();
}

static void printPairedTypes(OpAsmPrinter &printer, Operation *,
                             TypeRange types, TypeRange) {
  llvm::interleaveComma(types, printer);
}

//===----------------------------------------------------------------------===//
// Shared checks
//===----------------------------------------------------------------------===//

/// Checks that two operand groups of a multi-tensor op pair up one to one.
LogicalResult mlir::ddp::detail::verifySameCount(Operation *op, size_t lhs,
                                                 size_t rhs, StringRef lhsName,
                                                 StringRef rhsName) {
  if (lhs == rhs)
    return success();
  return op->emitOpError() << "has " << lhs << " " << lhsName << " but " << rhs
                           << " " << rhsName
                           << "; each tensor needs one of each";
}

LogicalResult mlir::ddp::detail::verifyNonEmpty(Operation *op, size_t count) {
  if (count > 0)
    return success();
  return op->emitOpError("needs at least one tensor");
}

LogicalResult mlir::ddp::detail::verifyPairs(
    Operation *op, TypeRange inputs, TypeRange outputs, StringRef outputsName,
    function_ref<LogicalResult(size_t, ShapedType, ShapedType)> check) {
  if (failed(verifyNonEmpty(op, inputs.size())) ||
      failed(verifySameCount(op, inputs.size(), outputs.size(), "inputs",
                             outputsName)))
    return failure();
  for (auto [i, from, to] : llvm::enumerate(inputs, outputs))
    if (failed(check(i, cast<ShapedType>(from), cast<ShapedType>(to))))
      return failure();
  return success();
}

LogicalResult mlir::ddp::detail::verifyCastKeepsShape(Operation *op,
                                                      StringRef noun, size_t i,
                                                      ShapedType from,
                                                      ShapedType to) {
  if (from.getShape() == to.getShape())
    return success();
  return op->emitOpError() << noun << " #" << i << " has type " << to
                           << " but a cast keeps the shape of " << from;
}

//===----------------------------------------------------------------------===//
// AllReduceOp, AllReduceStartOp, WaitOp
//===----------------------------------------------------------------------===//

/// Every static tensor's element count and byte size must fit in int64:
/// passes, the report and the runtime count them so (a product of dims that
/// overflows used to pass every pass and wrap to a wrong count).
static LogicalResult verifyCountable(Operation *op, TypeRange types) {
  for (Type type : types) {
    auto shaped = dyn_cast<ShapedType>(type);
    if (!shaped || !shaped.hasRank())
      continue;
    int64_t count = 1;
    bool overflow = false;
    for (int64_t dim : shaped.getShape())
      if (!ShapedType::isDynamic(dim))
        overflow |= llvm::MulOverflow(count, dim, count);
    Type element = shaped.getElementType();
    int64_t bytes = element.isIntOrFloat()
                        ? int64_t((element.getIntOrFloatBitWidth() + 7) / 8)
                        : 1;
    int64_t total = 0;
    overflow |= llvm::MulOverflow(count, bytes, total);
    if (overflow)
      return op->emitOpError()
             << "type " << type
             << " has more elements or bytes than a 64-bit count holds";
  }
  return success();
}

/// The element types are the runtime's float types (ODS), so both
/// reductions apply to every input.
LogicalResult mlir::ddp::detail::verifyAllReduceInputs(Operation *op,
                                                       TypeRange inputs) {
  if (failed(verifyNonEmpty(op, inputs.size())) ||
      failed(verifyCountable(op, inputs)))
    return failure();
  return success();
}

LogicalResult AllReduceOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location>,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  llvm::append_range(results, adaptor.getInputs().getTypes());
  return success();
}

LogicalResult AllReduceOp::verify() {
  return verifyAllReduceInputs(*this, getInputs().getTypes());
}

LogicalResult
AllReduceStartOp::inferReturnTypes(MLIRContext *context,
                                   std::optional<Location>, Adaptor adaptor,
                                   SmallVectorImpl<Type> &results) {
  SmallVector<Type> types(adaptor.getInputs().getTypes());
  results.push_back(RequestType::get(context, types));
  return success();
}

LogicalResult AllReduceStartOp::verify() {
  if (failed(verifyAllReduceInputs(*this, getInputs().getTypes())))
    return failure();
  Value request = getRequest();
  if (!request.hasOneUse() || !isa<WaitOp>(*request.getUsers().begin()))
    return emitOpError("request must have exactly one use, a 'ddp.wait'");
  return success();
}

LogicalResult WaitOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  auto request = dyn_cast<RequestType>(adaptor.getRequest().getType());
  if (!request)
    return emitOptionalError(loc, "'ddp.wait' op expects a !ddp.request");
  llvm::append_range(results, request.getTypes());
  return success();
}

LogicalResult RequestType::verify(function_ref<InFlightDiagnostic()> emitError,
                                  ArrayRef<Type> types) {
  if (types.empty())
    return emitError() << "a request carries at least one tensor";
  for (Type type : types) {
    auto shaped = dyn_cast<ShapedType>(type);
    bool tensor = isa<RankedTensorType>(type);
    bool buffer =
        isa<MemRefType>(type) && isContiguousBuffer(cast<MemRefType>(type));
    if (!(tensor || buffer) || !isComputeElementType(shaped.getElementType()))
      return emitError() << "a request carries ranked tensors of "
                         << computeElementTypeNames(type.getContext())
                         << " (or, after bufferization, contiguous buffers), "
                            "got "
                         << type;
  }
  return success();
}

LogicalResult AllGatherOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  for (Type type : adaptor.getInputs().getTypes()) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      return emitOptionalError(loc,
                               "'ddp.allgather' op expects ranked "
                               "tensors, got ",
                               type);
    SmallVector<int64_t> shape{ShapedType::kDynamic};
    llvm::append_range(shape, tensor.getShape());
    results.push_back(RankedTensorType::get(shape, tensor.getElementType()));
  }
  return success();
}

LogicalResult AllGatherOp::verify() {
  if (failed(verifyNonEmpty(*this, getInputs().size())) ||
      failed(verifyCountable(*this, getInputs().getTypes())))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// FlattenOp, UnflattenOp
//===----------------------------------------------------------------------===//

/// The pieces of a bucket share one element type and fill it exactly.
static LogicalResult verifyBucketPieces(Operation *op, RankedTensorType flat,
                                        TypeRange pieces, StringRef what) {
  if (failed(verifyNonEmpty(op, pieces.size())) ||
      failed(verifyCountable(op, pieces)))
    return failure();
  if (flat.getRank() != 1)
    return op->emitOpError() << "the bucket must be a 1-D tensor, got " << flat;
  int64_t total = 0;
  for (auto [i, type] : llvm::enumerate(pieces)) {
    auto piece = cast<RankedTensorType>(type);
    if (piece.getElementType() != flat.getElementType())
      return op->emitOpError()
             << what << " #" << i << " has element type "
             << piece.getElementType() << " but the bucket has "
             << flat.getElementType();
    if (llvm::AddOverflow(total, piece.getNumElements(), total))
      return op->emitOpError()
             << "the " << what << "s hold more elements than a 64-bit count";
  }
  if (total != flat.getNumElements())
    return op->emitOpError() << "the " << what << "s hold " << total
                             << " elements but the bucket " << flat << " holds "
                             << flat.getNumElements();
  return success();
}

LogicalResult
CompressionAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        StringRef scheme, DictionaryAttr) {
  if (scheme.empty())
    return emitError() << "a compression scheme needs a name";
  return success();
}

LogicalResult FlattenOp::verify() {
  return verifyBucketPieces(*this, getResult().getType(),
                            getInputs().getTypes(), "input");
}

LogicalResult UnflattenOp::verify() {
  return verifyBucketPieces(*this, getInput().getType(), getResultTypes(),
                            "result");
}

/// unflatten(flatten(x...)) with the same pieces is x... (a bucket nothing
/// communicated: noop).
LogicalResult UnflattenOp::fold(FoldAdaptor,
                                SmallVectorImpl<OpFoldResult> &results) {
  auto flatten = getInput().getDefiningOp<FlattenOp>();
  if (!flatten || flatten.getInputs().getTypes() != getResultTypes())
    return failure();
  llvm::append_range(results, flatten.getInputs());
  return success();
}

//===----------------------------------------------------------------------===//
// ScaleOp, CastOp
//===----------------------------------------------------------------------===//

LogicalResult ScaleOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  llvm::append_range(results, adaptor.getInputs().getTypes());
  return success();
}

LogicalResult ScaleOp::verify() {
  if (failed(verifyNonEmpty(*this, getNumOperands())))
    return failure();
  return verifyCountable(*this, getOperandTypes());
}

FloatType mlir::ddp::getNarrowingSchemeType(MLIRContext *context,
                                            StringRef scheme) {
  if (scheme == "fp16")
    return Float16Type::get(context);
  if (scheme == "bf16")
    return BFloat16Type::get(context);
  return nullptr;
}

StringRef mlir::ddp::getNarrowingSchemeName(FloatType type) {
  if (isa<Float16Type>(type))
    return "fp16";
  if (isa<BFloat16Type>(type))
    return "bf16";
  return "";
}

LogicalResult CastOp::verify() {
  if (failed(verifyNonEmpty(*this, getInputs().size())) ||
      failed(verifyCountable(*this, getInputs().getTypes())) ||
      failed(verifyCountable(*this, getResultTypes())))
    return failure();
  return verifyPairs(
      *this, getInputs().getTypes(), getResultTypes(), "results",
      [&](size_t i, ShapedType from, ShapedType to) -> LogicalResult {
        if (failed(verifyCastKeepsShape(*this, "result", i, from, to)))
          return failure();
        CompressionAttr scheme = getSchemeAttr();
        if (!scheme)
          return success();
        // A compression sends fewer bytes: only a narrowing cast is one,
        // and fp16's and bf16's send their own type.
        if (to.getElementTypeBitWidth() >= from.getElementTypeBitWidth())
          return emitOpError() << "with scheme " << scheme
                               << " narrows what it sends, but result #" << i
                               << " (" << to << ") is not narrower than its "
                               << "input (" << from << ")";
        FloatType sent =
            getNarrowingSchemeType(getContext(), scheme.getScheme());
        if (sent && to.getElementType() != sent)
          return emitOpError() << "with scheme " << scheme << " sends " << sent
                               << ", but result #" << i << " is " << to;
        return success();
      });
}

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

/// Why `name` cannot name a runtime state, or "" if it can. A state's name
/// is its checkpoint key and, through {name} in --dump-state, a file name:
/// it must be one path component the runtime receives whole (a C string).
static std::string whyNotStateName(StringRef name) {
  if (name.empty())
    return "is empty";
  if (name == "." || name == "..")
    return "is '" + name.str() + "', which names a directory";
  for (char c : name) {
    if (c == '/' || c == '\\')
      return "holds a path separator ('" + std::string(1, c) + "')";
    if (c == '\0')
      return "holds a NUL character";
    if ((unsigned char)c < 0x20 || c == 0x7f)
      return "holds a control character";
  }
  return "";
}

LogicalResult StateOp::verify() {
  // The runtime and the tools that dump states take the name as a file
  // name: one that escapes its directory, or that two states would share
  // once cut at a NUL, is refused here.
  std::string whyNot = whyNotStateName(getSymName());
  if (!whyNot.empty()) {
    std::string printed;
    llvm::raw_string_ostream os(printed);
    llvm::printEscapedString(getSymName(), os);
    return emitOpError() << "state name '" << printed << "' " << whyNot
                         << ": a state's name is a file name for "
                            "--dump-state and a checkpoint key";
  }
  Type type = getType();
  // The runtime holds integer state only as scalar step counters.
  if (type.isSignlessInteger(64))
    return success();
  // A dynamic dimension makes the state a hook's per-bucket template:
  // ddp-apply-hook declares one state per bucket, of the bucket's size, and
  // the lowering refuses a template that is left.
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (tensor && isComputeElementType(tensor.getElementType()))
    return verifyCountable(*this, tensor);
  return emitOpError() << "state must be an i64 counter or a ranked "
                          "tensor of "
                       << computeElementTypeNames(getContext()) << ", got "
                       << type;
}

//===----------------------------------------------------------------------===//
// TopKOp
//===----------------------------------------------------------------------===//

/// ddp.top_k and its buffer form: a 1-D input, k values of its type and k
/// indices that can address it, 1 <= k <= its size.
static LogicalResult verifyTopK(Operation *op, ShapedType input,
                                ShapedType values, ShapedType indices) {
  if (input.getRank() != 1 || values.getRank() != 1 || indices.getRank() != 1)
    return op->emitOpError()
           << "selects from a 1-D input into 1-D values and indices";
  if (values.getElementType() != input.getElementType())
    return op->emitOpError() << "values of " << values.getElementType()
                             << " but an input of " << input.getElementType();
  if (!indices.getElementType().isSignlessInteger(32) &&
      !indices.getElementType().isSignlessInteger(64))
    return op->emitOpError()
           << "indices must be i32 or i64, got " << indices.getElementType();
  int64_t n = input.getDimSize(0), k = values.getDimSize(0);
  if (indices.getDimSize(0) != k)
    return op->emitOpError()
           << k << " values but " << indices.getDimSize(0) << " indices";
  if (k < 1 || k > n)
    return op->emitOpError()
           << "k = " << k << " must be between 1 and the input's " << n
           << " elements";
  if (indices.getElementType().isSignlessInteger(32) &&
      n - 1 > std::numeric_limits<int32_t>::max())
    return op->emitOpError()
           << "i32 indices cannot address " << n << " elements: use i64";
  return success();
}

LogicalResult TopKOp::verify() {
  return verifyTopK(*this, getInput().getType(), getValues().getType(),
                    getIndices().getType());
}

LogicalResult BufferTopKOp::verify() {
  return verifyTopK(*this, getInput().getType(), getValues().getType(),
                    getIndices().getType());
}

LogicalResult ReportNonFiniteOp::verify() {
  if (getMessage().empty())
    return emitOpError() << "needs a message that says what was not finite";
  return success();
}

/// Resolves `symbol` to a ddp.state of type `type`.
static LogicalResult verifyStateUse(Operation *op, FlatSymbolRefAttr symbol,
                                    Type type,
                                    SymbolTableCollection &symbolTable) {
  auto state = symbolTable.lookupNearestSymbolFrom<StateOp>(op, symbol);
  if (!state)
    return op->emitOpError()
           << "'" << symbol.getValue() << "' does not name a 'ddp.state'";
  if (state.getType() != type)
    return op->emitOpError()
           << "type " << type << " does not match the type " << state.getType()
           << " of state '" << symbol.getValue() << "'";
  return success();
}

LogicalResult
StateLoadOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyStateUse(*this, getStateAttr(), getResult().getType(),
                        symbolTable);
}

LogicalResult
StateStoreOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyStateUse(*this, getStateAttr(), getValue().getType(),
                        symbolTable);
}

//===----------------------------------------------------------------------===//
// MultiTensorOpInterface
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/IR/DDPInterfaces.cpp.inc"

LogicalResult mlir::ddp::detail::verifyMultiTensorOp(Operation *op) {
  auto multi = cast<MultiTensorOpInterface>(op);
  unsigned count = multi.getNumTensors();
  for (unsigned g = 0, e = multi.getNumOperandGroups(); g < e; ++g) {
    unsigned size = multi.getOperandGroup(g).size();
    if (size != count && size != 0)
      return op->emitOpError()
             << "operand group #" << g << " has " << size
             << " values, but the op works on " << count << " tensors";
  }
  unsigned groups = multi.getNumResultGroups();
  if (op->getNumResults() != groups * count)
    return op->emitOpError()
           << "has " << op->getNumResults() << " results for its " << count
           << " tensors (" << groups << " per tensor)";
  return success();
}

unsigned ReconstructResidualOp::getNumResultGroups() {
  // The reconstructions, then the new residuals.
  return 2;
}

#define GET_OP_CLASSES
#include "ddp/Dialect/DDP/IR/DDPOps.cpp.inc"
