//===- DDPOps.cpp - ddp op verifiers, type inference, assembly ------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Dialect/DDP/IR/DDP.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace mlir::ddp;

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
static LogicalResult verifySameCount(Operation *op, size_t lhs, size_t rhs,
                                     StringRef lhsName, StringRef rhsName) {
  if (lhs == rhs)
    return success();
  return op->emitOpError() << "has " << lhs << " " << lhsName << " but " << rhs
                           << " " << rhsName
                           << "; each tensor needs one of each";
}

static LogicalResult verifyNonEmpty(Operation *op, size_t count) {
  if (count > 0)
    return success();
  return op->emitOpError("needs at least one tensor");
}

static LogicalResult verifyTypesEqual(Operation *op, TypeRange lhs,
                                      TypeRange rhs, StringRef lhsName,
                                      StringRef rhsName) {
  if (failed(verifySameCount(op, lhs.size(), rhs.size(), lhsName, rhsName)))
    return failure();
  for (auto [i, types] : llvm::enumerate(llvm::zip(lhs, rhs)))
    if (std::get<0>(types) != std::get<1>(types))
      return op->emitOpError()
             << rhsName << " #" << i << " has type " << std::get<1>(types)
             << " but must have the type of " << lhsName << " #" << i << ", "
             << std::get<0>(types);
  return success();
}

//===----------------------------------------------------------------------===//
// Matrix shape inference for the PowerSGD ops
//===----------------------------------------------------------------------===//

namespace {
/// One tensor of a multi-tensor PowerSGD op, as a 2-D float matrix.
struct Matrix {
  int64_t rows, cols;
  Type elementType;
};
} // namespace

static Matrix asMatrix(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return {tensor.getDimSize(0), tensor.getDimSize(1), tensor.getElementType()};
}

static RankedTensorType matrixType(int64_t rows, int64_t cols, Type element) {
  return RankedTensorType::get({rows, cols}, element);
}

/// The operand groups of the PowerSGD ops are only guaranteed to be 2-D
/// static float tensors after the ODS constraints ran; inference also runs
/// while parsing, before them, so it checks what it relies on.
static LogicalResult checkMatrices(std::optional<Location> loc,
                                   StringRef opName, TypeRange types) {
  for (Type type : types) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || tensor.getRank() != 2 || !tensor.hasStaticShape() ||
        !isComputeElementType(tensor.getElementType()))
      return emitOptionalError(
          loc, "'", opName, "' op expects statically shaped 2-D tensors of ",
          computeElementTypeNames(type.getContext()), ", got ", type);
  }
  return success();
}

static LogicalResult checkPairs(std::optional<Location> loc, StringRef opName,
                                TypeRange lhs, TypeRange rhs, StringRef lhsName,
                                StringRef rhsName) {
  if (failed(checkMatrices(loc, opName, lhs)) ||
      failed(checkMatrices(loc, opName, rhs)))
    return failure();
  if (lhs.empty())
    return emitOptionalError(loc, "'", opName,
                             "' op needs at least one tensor");
  if (lhs.size() != rhs.size())
    return emitOptionalError(loc, "'", opName, "' op has ", lhs.size(), " ",
                             lhsName, " but ", rhs.size(), " ", rhsName,
                             "; each tensor needs one of each");
  return success();
}

static LogicalResult checkElementTypes(std::optional<Location> loc,
                                       StringRef opName, unsigned index,
                                       Matrix a, Matrix b) {
  if (a.elementType == b.elementType)
    return success();
  return emitOptionalError(loc, "'", opName, "' op tensor #", index,
                           " mixes element types ", a.elementType, " and ",
                           b.elementType);
}

/// P_i = M_i Q_i (transposeMatrix = false) or Q_i = M_i^T P_i (true).
static LogicalResult inferProjection(std::optional<Location> loc,
                                     StringRef opName, TypeRange matrices,
                                     TypeRange factors, bool transposeMatrix,
                                     SmallVectorImpl<Type> &results) {
  if (failed(checkPairs(loc, opName, matrices, factors, "matrices", "factors")))
    return failure();
  for (auto [i, pair] : llvm::enumerate(llvm::zip(matrices, factors))) {
    Matrix m = asMatrix(std::get<0>(pair));
    Matrix f = asMatrix(std::get<1>(pair));
    if (failed(checkElementTypes(loc, opName, i, m, f)))
      return failure();
    int64_t inner = transposeMatrix ? m.rows : m.cols;
    int64_t outer = transposeMatrix ? m.cols : m.rows;
    if (f.rows != inner)
      return emitOptionalError(loc, "'", opName, "' op tensor #", i,
                               ": factor has ", f.rows, " rows but the matrix",
                               transposeMatrix ? " (transposed)" : "", " has ",
                               inner, " columns");
    results.push_back(matrixType(outer, f.cols, m.elementType));
  }
  return success();
}

/// Checks that the residuals have the matrices' types.
static LogicalResult checkResiduals(std::optional<Location> loc,
                                    StringRef opName, TypeRange matrices,
                                    TypeRange residuals) {
  if (failed(checkPairs(loc, opName, matrices, residuals, "matrices",
                        "residuals")))
    return failure();
  for (auto [i, pair] : llvm::enumerate(llvm::zip(matrices, residuals)))
    if (std::get<0>(pair) != std::get<1>(pair))
      return emitOptionalError(loc, "'", opName, "' op residual #", i,
                               " has type ", std::get<1>(pair),
                               " but its matrix has type ", std::get<0>(pair));
  return success();
}

/// M_hat_i = P_i Q_i^T.
static LogicalResult inferReconstruction(std::optional<Location> loc,
                                         StringRef opName, TypeRange ps,
                                         TypeRange qs,
                                         SmallVectorImpl<Type> &results) {
  if (failed(checkPairs(loc, opName, ps, qs, "P factors", "Q factors")))
    return failure();
  for (auto [i, pair] : llvm::enumerate(llvm::zip(ps, qs))) {
    Matrix p = asMatrix(std::get<0>(pair));
    Matrix q = asMatrix(std::get<1>(pair));
    if (failed(checkElementTypes(loc, opName, i, p, q)))
      return failure();
    if (p.cols != q.cols)
      return emitOptionalError(loc, "'", opName, "' op tensor #", i,
                               ": P has rank ", p.cols, " but Q has rank ",
                               q.cols);
    results.push_back(matrixType(p.rows, q.rows, p.elementType));
  }
  return success();
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
static LogicalResult verifyAllReduceInputs(Operation *op, TypeRange inputs) {
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

LogicalResult CastOp::verify() {
  if (failed(verifyNonEmpty(*this, getInputs().size())) ||
      failed(verifyCountable(*this, getInputs().getTypes())) ||
      failed(verifyCountable(*this, getResultTypes())) ||
      failed(verifySameCount(*this, getInputs().size(), getNumResults(),
                             "inputs", "results")))
    return failure();
  for (auto [i, types] : llvm::enumerate(
           llvm::zip(getInputs().getTypes(), getResults().getTypes()))) {
    auto from = cast<RankedTensorType>(std::get<0>(types));
    auto to = cast<RankedTensorType>(std::get<1>(types));
    if (from.getShape() != to.getShape())
      return emitOpError() << "result #" << i << " has type " << to
                           << " but a cast keeps the shape of " << from;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// PowerSGD ops
//===----------------------------------------------------------------------===//

/// The verifier of an op whose result types are inferred from its operands:
/// the inference's own checks, with its one precise message. (Without it,
/// InferTypeOpInterface's verifier runs the same inference and adds "failed
/// to infer returned types" after that message.)
template <typename OpT> static LogicalResult verifyByInference(OpT op) {
  SmallVector<Type> expected;
  return OpT::inferReturnTypes(op->getContext(), op.getLoc(),
                               typename OpT::Adaptor(op), expected);
}

LogicalResult AddResidualOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location>,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  llvm::append_range(results, adaptor.getInputs().getTypes());
  return success();
}

LogicalResult AddResidualOp::verify() {
  if (failed(verifyNonEmpty(*this, getInputs().size())))
    return failure();
  return verifyTypesEqual(*this, getInputs().getTypes(),
                          getResiduals().getTypes(), "input", "residual");
}

LogicalResult ProjectOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  return inferProjection(loc, getOperationName(), adaptor.getMatrices(),
                         adaptor.getFactors(), /*transposeMatrix=*/false,
                         results);
}

LogicalResult ProjectOp::verify() { return verifyByInference(*this); }

LogicalResult BackprojectOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  return inferProjection(loc, getOperationName(), adaptor.getMatrices(),
                         adaptor.getFactors(), /*transposeMatrix=*/true,
                         results);
}

LogicalResult BackprojectOp::verify() { return verifyByInference(*this); }

LogicalResult
OrthogonalizeOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  llvm::append_range(results, adaptor.getInputs().getTypes());
  return success();
}

LogicalResult OrthogonalizeOp::verify() {
  if (failed(verifyNonEmpty(*this, getInputs().size())))
    return failure();
  double epsilon = getEpsilon().convertToDouble();
  if (!(epsilon >= 0.0) || std::isinf(epsilon))
    return emitOpError() << "epsilon must be finite and non-negative, got "
                         << epsilon;
  return success();
}

LogicalResult ReconstructOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  return inferReconstruction(loc, getOperationName(), adaptor.getPs(),
                             adaptor.getQs(), results);
}

LogicalResult ReconstructOp::verify() { return verifyByInference(*this); }

LogicalResult
UpdateResidualOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                   Adaptor adaptor,
                                   SmallVectorImpl<Type> &results) {
  llvm::append_range(results, adaptor.getInputs().getTypes());
  return success();
}

LogicalResult UpdateResidualOp::verify() {
  if (failed(verifyNonEmpty(*this, getInputs().size())))
    return failure();
  return verifyTypesEqual(*this, getInputs().getTypes(),
                          getReconstructions().getTypes(), "input",
                          "reconstruction");
}

LogicalResult
ProjectResidualOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                    Adaptor adaptor,
                                    SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  if (failed(checkResiduals(loc, name, adaptor.getMatrices(),
                            adaptor.getResiduals())))
    return failure();
  return inferProjection(loc, name, adaptor.getMatrices(), adaptor.getFactors(),
                         /*transposeMatrix=*/false, results);
}

LogicalResult ProjectResidualOp::verify() { return verifyByInference(*this); }

LogicalResult BackprojectResidualOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  if (failed(checkResiduals(loc, name, adaptor.getMatrices(),
                            adaptor.getResiduals())))
    return failure();
  return inferProjection(loc, name, adaptor.getMatrices(), adaptor.getFactors(),
                         /*transposeMatrix=*/true, results);
}

LogicalResult BackprojectResidualOp::verify() {
  return verifyByInference(*this);
}

LogicalResult ReconstructResidualOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  if (failed(checkResiduals(loc, name, adaptor.getMatrices(),
                            adaptor.getResiduals())))
    return failure();
  SmallVector<Type> reconstructions;
  if (failed(inferReconstruction(loc, name, adaptor.getPs(), adaptor.getQs(),
                                 reconstructions)))
    return failure();
  if (reconstructions.size() != adaptor.getMatrices().size())
    return emitOptionalError(loc, "'", name, "' op has ",
                             reconstructions.size(), " factor pairs but ",
                             adaptor.getMatrices().size(), " matrices");
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(reconstructions, adaptor.getMatrices())))
    if (std::get<0>(pair) != std::get<1>(pair).getType())
      return emitOptionalError(loc, "'", name, "' op tensor #", i,
                               ": P * Q^T has type ", std::get<0>(pair),
                               " but the matrix has type ",
                               std::get<1>(pair).getType());
  results.append(reconstructions);
  results.append(reconstructions);
  return success();
}

LogicalResult ReconstructResidualOp::verify() {
  return verifyByInference(*this);
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
// Buffer ops
//===----------------------------------------------------------------------===//

bool mlir::ddp::isContiguousBuffer(MemRefType type) {
  if (type.getLayout().isIdentity())
    return true;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return false;
  // Innermost first: each stride must be the product of the sizes inside
  // it. A dimension of size 1 may have any stride.
  int64_t expected = 1;
  for (int64_t i = type.getRank() - 1; i >= 0; --i) {
    int64_t size = type.getDimSize(i);
    if (size == 1)
      continue;
    if (strides[i] != expected)
      return false;
    if (ShapedType::isDynamic(size))
      return i == 0 || llvm::all_of(type.getShape().take_front(i),
                                    [](int64_t d) { return d == 1; });
    expected *= size;
  }
  return true;
}

/// The tensor type a buffer stands for, so that the buffer ops reuse the
/// shape rules of the tensor ops.
static SmallVector<Type> asTensorTypes(TypeRange types) {
  SmallVector<Type> tensors;
  for (Type type : types) {
    auto memref = cast<MemRefType>(type);
    tensors.push_back(
        RankedTensorType::get(memref.getShape(), memref.getElementType()));
  }
  return tensors;
}

/// Checks that `outputs` have the shapes and element types of `expected`.
static LogicalResult verifyOutputs(Operation *op, ArrayRef<Type> expected,
                                   TypeRange outputs) {
  if (failed(verifySameCount(op, expected.size(), outputs.size(), "tensors",
                             "outputs")))
    return failure();
  for (auto [i, pair] : llvm::enumerate(llvm::zip(expected, outputs))) {
    auto want = cast<ShapedType>(std::get<0>(pair));
    auto got = cast<ShapedType>(std::get<1>(pair));
    if (want.getShape() != got.getShape() ||
        want.getElementType() != got.getElementType())
      return op->emitOpError() << "output #" << i << " has type " << got
                               << " but must hold a " << want;
  }
  return success();
}

LogicalResult BufferAllReduceOp::verify() {
  return verifyAllReduceInputs(*this, getBuffers().getTypes());
}

LogicalResult BufferAllReduceStartOp::verify() {
  if (failed(verifyAllReduceInputs(*this, getBuffers().getTypes())))
    return failure();
  ArrayRef<Type> carried = getRequest().getType().getTypes();
  if (TypeRange(carried) != getBuffers().getTypes())
    return emitOpError("request type must list the types of the buffers");
  return success();
}

LogicalResult BufferScaleOp::verify() {
  return verifyNonEmpty(*this, getBuffers().size());
}

LogicalResult BufferCastOp::verify() {
  if (failed(verifyNonEmpty(*this, getInputs().size())) ||
      failed(verifySameCount(*this, getInputs().size(), getOutputs().size(),
                             "inputs", "outputs")))
    return failure();
  for (auto [i, types] : llvm::enumerate(
           llvm::zip(getInputs().getTypes(), getOutputs().getTypes()))) {
    auto from = cast<MemRefType>(std::get<0>(types));
    auto to = cast<MemRefType>(std::get<1>(types));
    if (from.getShape() != to.getShape())
      return emitOpError() << "output #" << i << " has type " << to
                           << " but a cast keeps the shape of " << from;
  }
  return success();
}

LogicalResult BufferAllGatherOp::verify() {
  if (failed(verifyNonEmpty(*this, getInputs().size())) ||
      failed(verifySameCount(*this, getInputs().size(), getOutputs().size(),
                             "inputs", "outputs")))
    return failure();
  for (auto [i, types] : llvm::enumerate(
           llvm::zip(getInputs().getTypes(), getOutputs().getTypes()))) {
    auto from = cast<MemRefType>(std::get<0>(types));
    auto to = cast<MemRefType>(std::get<1>(types));
    // Rank-major: a leading dimension of ranks, then the input's shape.
    bool matches =
        to.getElementType() == from.getElementType() &&
        to.getRank() == from.getRank() + 1 &&
        llvm::all_of(llvm::seq<int64_t>(0, from.getRank()), [&](int64_t d) {
          int64_t a = from.getDimSize(d);
          int64_t b = to.getDimSize(d + 1);
          return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
        });
    if (!matches)
      return emitOpError() << "output #" << i << " has type " << to
                           << " but gathering " << from
                           << " needs a leading dimension of ranks, then its "
                              "shape and element type";
  }
  return success();
}

LogicalResult BufferProjectOp::verify() {
  StringRef name = getOperationName();
  SmallVector<Type> matrices = asTensorTypes(getMatrices().getTypes());
  if (!getResiduals().empty() &&
      failed(checkResiduals(getLoc(), name, matrices,
                            asTensorTypes(getResiduals().getTypes()))))
    return failure();
  SmallVector<Type> expected;
  if (failed(inferProjection(getLoc(), name, matrices,
                             asTensorTypes(getFactors().getTypes()),
                             getTransposed(), expected)))
    return failure();
  return verifyOutputs(*this, expected, getOutputs().getTypes());
}

LogicalResult BufferOrthogonalizeOp::verify() {
  if (failed(verifyNonEmpty(*this, getBuffers().size())))
    return failure();
  double epsilon = getEpsilon().convertToDouble();
  if (!(epsilon >= 0.0) || std::isinf(epsilon))
    return emitOpError() << "epsilon must be finite and non-negative, got "
                         << epsilon;
  return success();
}

LogicalResult BufferReconstructOp::verify() {
  StringRef name = getOperationName();
  SmallVector<Type> expected;
  if (failed(inferReconstruction(getLoc(), name,
                                 asTensorTypes(getPs().getTypes()),
                                 asTensorTypes(getQs().getTypes()), expected)))
    return failure();
  if (failed(verifyOutputs(*this, expected, getOutputs().getTypes())))
    return failure();
  if (getMatrices().empty() && getResiduals().empty())
    return success();
  SmallVector<Type> matrices = asTensorTypes(getMatrices().getTypes());
  if (failed(checkResiduals(getLoc(), name, matrices,
                            asTensorTypes(getResiduals().getTypes()))))
    return failure();
  return verifyOutputs(*this, expected, getMatrices().getTypes());
}

LogicalResult
BufferStateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto state =
      symbolTable.lookupNearestSymbolFrom<StateOp>(*this, getStateAttr());
  if (!state)
    return emitOpError() << "'" << getState()
                         << "' does not name a 'ddp.state'";
  MemRefType buffer = getBuffer().getType();
  if (!buffer.getLayout().isIdentity())
    return emitOpError() << "a state's buffer has the identity layout, not "
                         << buffer.getLayout();
  Type stateType = state.getType();
  auto tensor = dyn_cast<RankedTensorType>(stateType);
  bool matches =
      tensor ? buffer.getShape() == tensor.getShape() &&
                   buffer.getElementType() == tensor.getElementType()
             : buffer.getRank() == 0 && buffer.getElementType() == stateType;
  if (!matches)
    return emitOpError() << "type " << buffer << " does not hold the state '"
                         << getState() << "' of type " << stateType;
  return success();
}

LogicalResult BufferCopyOp::verify() {
  if (failed(verifyNonEmpty(*this, getSources().size())))
    return failure();
  return verifyOutputs(*this, llvm::to_vector(getSources().getTypes()),
                       getDestinations().getTypes());
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
