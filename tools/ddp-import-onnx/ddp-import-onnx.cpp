//===- ddp-import-onnx.cpp - gradient sync of an ONNX model's parameters --===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Reads an ONNX model and emits the gradient-synchronization function of
// its trainable parameters: one `ddp.allreduce mean` per trainable
// initializer, in graph order, each argument named by a location after the
// initializer. Then `ddp-opt --insert-powersgd=rank=2
// --ddp-compression-report` shows the plan for the model.
//
//   ddp-import-onnx model.onnx -o grads.mlir [--exclude=REGEX]
//   [--include=REGEX]
//
// Trainable: floating-point initializers, except BatchNorm running
// statistics; integer tensors (num_batches_tracked, shape constants) are
// left out. Bad input gets "ddp-import-onnx: error: ..." and exit code 1.
//
//===----------------------------------------------------------------------===//

#include "ddp/Version.h"
#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Dialect/DDP/IR/GradientNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <vector>

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("ddp-import-onnx options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.onnx>"),
                                      cl::Required, cl::cat(category));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::cat(category));
static cl::list<std::string>
    excludes("exclude", cl::desc("Leave out initializers whose name matches"),
             cl::value_desc("regex"), cl::cat(category));
static cl::list<std::string>
    includes("include",
             cl::desc("Keep float initializers whose name matches, even if "
                      "they look like running statistics"),
             cl::value_desc("regex"), cl::cat(category));
static cl::opt<std::string>
    functionName("function", cl::desc("Name of the emitted function"),
                 cl::init("grad_sync"), cl::cat(category));

namespace {
/// An initializer's shape, or why it cannot be read.
struct Parameter {
  std::string name;
  std::vector<int64_t> shape;
  Type elementType; // null: not a float tensor
};

int fail(const llvm::Twine &message) {
  llvm::errs() << "ddp-import-onnx: error: " << message << "\n";
  return 1;
}

/// The float element type of an ONNX data type, or null.
Type floatType(MLIRContext &context, int dataType) {
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
    return Float32Type::get(&context);
  case onnx::TensorProto::FLOAT16:
    return Float16Type::get(&context);
  case onnx::TensorProto::BFLOAT16:
    return BFloat16Type::get(&context);
  case onnx::TensorProto::DOUBLE:
    return Float64Type::get(&context);
  default:
    return nullptr;
  }
}

/// Bytes of one element in raw_data, 0 for types we do not size.
int64_t rawElementSize(int dataType) {
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::UINT32:
    return 4;
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT64:
  case onnx::TensorProto::COMPLEX64:
    return 8;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
    return 2;
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL:
    return 1;
  case onnx::TensorProto::COMPLEX128:
    return 16;
  default:
    return 0;
  }
}

/// Elements stored in the typed field that holds `dataType`'s values.
std::optional<int64_t> typedElements(const onnx::TensorProto &tensor) {
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT:
    return tensor.float_data_size();
  case onnx::TensorProto::DOUBLE:
    return tensor.double_data_size();
  case onnx::TensorProto::INT64:
    return tensor.int64_data_size();
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64:
    return tensor.uint64_data_size();
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL:
    return tensor.int32_data_size();
  default:
    return std::nullopt;
  }
}

/// Reads one initializer's name, shape and type, checking that its data
/// agrees with its dims (an initializer without dims is a scalar; data that
/// holds more elements means the shape is missing).
std::optional<std::string> readParameter(MLIRContext &context,
                                         const onnx::TensorProto &tensor,
                                         Parameter &parameter) {
  parameter.name = tensor.name();
  std::string what = "initializer '" + tensor.name() + "'";
  if (tensor.name().empty())
    return "an initializer has no name";
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL ||
      tensor.external_data_size() > 0)
    return what + " keeps its data in an external file; models with "
                  "external data are not supported (save the model with its "
                  "weights inside the .onnx file)";
  int64_t numel = 1;
  for (int64_t dim : tensor.dims()) {
    if (dim < 0)
      return what + " has a negative dimension " + std::to_string(dim);
    if (dim != 0 && numel > INT64_MAX / dim)
      return what + " has more elements than fit in 64 bits";
    numel *= dim;
    parameter.shape.push_back(dim);
  }
  parameter.elementType = floatType(context, tensor.data_type());
  // Only the float tensors we import need their data checked; strings,
  // complex numbers, booleans and integers are left out whatever they hold.
  if (!parameter.elementType)
    return std::nullopt;
  int64_t stored = -1;
  if (tensor.has_raw_data()) {
    int64_t size = rawElementSize(tensor.data_type());
    if (size == 0)
      return what + " has an unsupported data type " +
             std::to_string(tensor.data_type());
    if (int64_t(tensor.raw_data().size()) % size != 0)
      return what + " has " + std::to_string(tensor.raw_data().size()) +
             " bytes of raw data, not a whole number of elements";
    stored = int64_t(tensor.raw_data().size()) / size;
  } else if (std::optional<int64_t> count = typedElements(tensor)) {
    stored = *count;
  } else {
    return what + " has an unsupported data type " +
           std::to_string(tensor.data_type());
  }
  if (stored != numel)
    return what + " holds " + std::to_string(stored) +
           " elements but its dims say " + std::to_string(numel) +
           " (missing or wrong shape)";
  return std::nullopt;
}

bool matchesAny(const std::vector<llvm::Regex> &patterns,
                llvm::StringRef name) {
  for (const llvm::Regex &pattern : patterns)
    if (pattern.match(name))
      return true;
  return false;
}

std::optional<std::vector<llvm::Regex>>
compile(const std::vector<std::string> &sources, const char *option) {
  std::vector<llvm::Regex> patterns;
  for (const std::string &source : sources) {
    llvm::Regex pattern(source);
    std::string error;
    if (!pattern.isValid(error)) {
      fail(llvm::Twine("--") + option + "='" + source +
           "' is not a valid "
           "regular expression: " +
           error);
      return std::nullopt;
    }
    patterns.push_back(std::move(pattern));
  }
  return patterns;
}
} // namespace

/// A model exported for inference, not training: torch.onnx.export's
/// defaults (eval mode, constant folding) fold each BatchNorm into the
/// convolution before it, so the folded weights get the exporter's own
/// names ("onnx::Conv_26") and BatchNorm's parameters are gone. Its
/// "gradients" are not the model's. Says so, and how to export for
/// training.
static void warnIfExportedForInference(const onnx::GraphProto &graph,
                                       const std::vector<Parameter> &trainable) {
  std::vector<std::string> madeUp;
  for (const Parameter &parameter : trainable)
    if (llvm::StringRef(parameter.name).starts_with("onnx::"))
      madeUp.push_back(parameter.name);
  if (madeUp.empty())
    return;
  bool convolutions = false, batchNorms = false;
  for (const onnx::NodeProto &node : graph.node()) {
    convolutions |= node.op_type() == "Conv";
    batchNorms |= node.op_type() == "BatchNormalization";
  }
  llvm::errs() << "ddp-import-onnx: warning: " << madeUp.size() << " of "
               << trainable.size()
               << " trainable tensors have names the exporter made up ("
               << madeUp.front() << (madeUp.size() > 1 ? ", ..." : "")
               << "), not parameter names: the model was exported for "
                  "inference, with constant folding";
  if (convolutions && !batchNorms)
    llvm::errs() << ", which folds each BatchNorm into the convolution "
                    "before it (the graph has Conv nodes and no "
                    "BatchNormalization: BatchNorm's weight and bias are "
                    "gone)";
  llvm::errs() << ". These tensors are not the model's parameters, and "
                  "their gradients are not its gradients. Export for "
                  "training: torch.onnx.export(model, x, path, "
                  "training=torch.onnx.TrainingMode.TRAINING, "
                  "do_constant_folding=False)\n";
}

int main(int argc, char **argv) {
  mlir::ddp::setVersionPrinter("ddp-import-onnx");
  // Only the tool's own options in --help (not LLVM's hundreds).
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "ddp-import-onnx: the gradient synchronization of an ONNX model's "
      "trainable parameters, as ddp IR\n");
  std::optional<std::vector<llvm::Regex>> excluded =
      compile(excludes, "exclude");
  std::optional<std::vector<llvm::Regex>> included =
      compile(includes, "include");
  if (!excluded || !included)
    return 1;
  llvm::Regex runningStatistics(
      "(^|[._/:])(running_mean|running_var|num_batches_tracked)$");

  auto buffer = llvm::MemoryBuffer::getFile(inputFile, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail("cannot read '" + inputFile +
                "': " + buffer.getError().message());
  onnx::ModelProto model;
  if (!model.ParseFromArray((*buffer)->getBufferStart(),
                            int((*buffer)->getBufferSize())) ||
      (*buffer)->getBufferSize() > size_t(INT32_MAX))
    return fail("'" + inputFile +
                "' is not a valid ONNX model (the protobuf "
                "does not parse; truncated or damaged?)");
  if (!model.has_graph())
    return fail("'" + inputFile + "' has no graph");

  MLIRContext context;
  context.loadDialect<ddp::DDPDialect, func::FuncDialect>();
  std::vector<Parameter> trainable;
  int64_t elements = 0, leftOut = 0;
  llvm::StringSet<> names;
  for (const onnx::TensorProto &tensor : model.graph().initializer()) {
    if (!tensor.name().empty() && !names.insert(tensor.name()).second)
      return fail("initializer name '" + tensor.name() +
                  "' appears twice (ONNX names are unique)");
    Parameter parameter;
    if (std::optional<std::string> error =
            readParameter(context, tensor, parameter))
      return fail(*error);
    bool wanted =
        parameter.elementType && (matchesAny(*included, parameter.name) ||
                                  (!runningStatistics.match(parameter.name) &&
                                   !matchesAny(*excluded, parameter.name)));
    if (!wanted) {
      ++leftOut;
      continue;
    }
    int64_t numel = 1;
    for (int64_t dim : parameter.shape)
      numel *= dim;
    elements += numel;
    trainable.push_back(std::move(parameter));
  }
  leftOut += model.graph().sparse_initializer_size();
  warnIfExportedForInference(model.graph(), trainable);

  OpBuilder builder(&context);
  Location fileLoc = FileLineColLoc::get(&context, inputFile, 0, 0);
  auto module = ModuleOp::create(fileLoc);
  SmallVector<Type> types;
  SmallVector<Location> locations;
  for (const Parameter &parameter : trainable) {
    types.push_back(
        RankedTensorType::get(parameter.shape, parameter.elementType));
    locations.push_back(NameLoc::get(builder.getStringAttr(parameter.name)));
  }
  builder.setInsertionPointToEnd(module.getBody());
  auto function = func::FuncOp::create(builder, fileLoc, functionName,
                                       builder.getFunctionType(types, types));
  Block *body = function.addEntryBlock();
  for (auto [argument, location] : llvm::zip(body->getArguments(), locations))
    argument.setLoc(location);
  builder.setInsertionPointToStart(body);
  SmallVector<Value> results;
  for (auto [argument, location] : llvm::zip(body->getArguments(), locations))
    results.push_back(
        ddp::AllReduceOp::create(builder, location, ddp::ReductionKind::mean,
                                 ValueRange{argument}, ddp::CommRole::gradient)
            .getResult(0));
  func::ReturnOp::create(builder, fileLoc, results);
  // The names as attributes too: they survive printing without locations.
  ddp::recordGradientNames(function);
  if (failed(verify(module)))
    return fail("internal error: the emitted module does not verify");

  std::string errorMessage;
  auto output = mlir::openOutputFile(outputFile, &errorMessage);
  if (!output)
    return fail("cannot write '" + outputFile + "': " + errorMessage);
  module->print(output->os(), OpPrintingFlags().enableDebugInfo());
  output->os() << "\n";
  output->keep();
  llvm::errs() << "ddp-import-onnx: " << trainable.size()
               << " trainable tensors, " << elements << " elements, " << leftOut
               << " left out\n";
  module->erase();
  return 0;
}
