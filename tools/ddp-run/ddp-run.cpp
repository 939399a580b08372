//===- ddp-run.cpp - run a compiled step on every rank --------------------===//
//
// JIT-compiles a module's step function (tensor level, with ddp ops, after
// the insertion passes) through ddp-lower-to-llvm and runs it K times on
// every MPI rank, with the runtime (ddprt) keeping the compression state
// between steps:
//
//   mpirun -np 4 ddp-run step.mlir --steps=10 \
//       --input=grads/r{rank}.s{step}.w.npy --input=... \
//       --output=out/r{rank}.s{step}.o{result}.npy
//
// Inputs and outputs are .npy files; {rank}, {step}, {step%N} and {result}
// in a path are replaced. --carry feeds a result of one step to an argument
// of the next (training weights). The compression state can be saved and
// restored (--checkpoint-save/--checkpoint-load), overwritten from .npy
// (--set-state) and written out (--dump-state). Rank 0 prints the time and
// the elements sent per step.
//
// Any bad input stops every rank with a message and exit status 1: ranks
// agree on success after each phase that reads files, and a failure inside
// a compiled step aborts the job (MPI_Abort) instead of leaving the other
// ranks waiting in a collective.
//
//===----------------------------------------------------------------------===//

#include "Npy.h"

#include "ddp/InitAll.h"
#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/Pipelines/Pipelines.h"
#include "ddprt/ddprt.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#if defined(DDP_RUN_HAVE_MPI)
#include <mpi.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

using namespace mlir;
namespace cl = llvm::cl;

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

static cl::OptionCategory category("ddp-run options");
static cl::opt<std::string> inputFile(cl::Positional, cl::Required,
                                      cl::desc("<step.mlir>"),
                                      cl::cat(category));
static cl::opt<std::string> entry("entry", cl::init("step"),
                                  cl::desc("The function to run"),
                                  cl::cat(category));
static cl::opt<unsigned> steps("steps", cl::init(1),
                               cl::desc("How many steps to run"),
                               cl::cat(category));
static cl::opt<unsigned> firstStep(
    "first-step", cl::init(0),
    cl::desc("Number of the first step in file names (resuming a run)"),
    cl::cat(category));
static cl::opt<std::string> backend("backend", cl::init("cpu"),
                                    cl::desc("Runtime backend: cpu or cuda"),
                                    cl::cat(category));
static cl::list<std::string>
    inputs("input",
           cl::desc("One .npy path pattern per argument, in order "
                    "({rank}, {step}, {step%N})"),
           cl::cat(category));
static cl::list<std::string>
    carries("carry",
            cl::desc("ARG:RESULT: argument ARG of a step is result RESULT of "
                     "the step before (its --input is read only first)"),
            cl::CommaSeparated, cl::cat(category));
static cl::opt<std::string>
    outputPattern("output",
                  cl::desc("Write results of every step as .npy "
                           "({rank}, {step}, {result})"),
                  cl::cat(category));
static cl::list<unsigned>
    outputResults("output-results",
                  cl::desc("Which results --output writes (default: all)"),
                  cl::CommaSeparated, cl::cat(category));
static cl::opt<std::string> finalOutputPattern(
    "final-output",
    cl::desc("Write every result of the last step as .npy ({rank}, {step}, "
             "{result})"),
    cl::cat(category));
static cl::opt<std::string> checkpointLoad(
    "checkpoint-load",
    cl::desc("Restore the compression state before the first step ({rank})"),
    cl::cat(category));
static cl::opt<std::string> checkpointSave(
    "checkpoint-save",
    cl::desc("Save the compression state after the last step ({rank})"),
    cl::cat(category));
static cl::list<std::string>
    setStates("set-state",
              cl::desc("NAME=PATH: overwrite state NAME from a .npy before "
                       "the first step ({rank})"),
              cl::cat(category));
static cl::opt<std::string> dumpState(
    "dump-state",
    cl::desc("Write every state as .npy after the last step ({rank}, {name})"),
    cl::cat(category));
static cl::opt<std::string> statsJson(
    "summary-json",
    cl::desc("Write time and communication figures as JSON ({rank}; "
             "without it only rank 0 writes)"),
    cl::cat(category));
static cl::opt<unsigned>
    launchRanks("np",
                cl::desc("Launch this many ranks with mpirun (unless already "
                         "inside an MPI job)"),
                cl::init(0), cl::cat(category));
static cl::opt<double> timeoutSeconds(
    "timeout", cl::init(60.0),
    cl::desc("Fail a collective that has not finished after this many "
             "seconds (0: wait forever)"),
    cl::cat(category));
static cl::opt<bool> quiet("quiet", cl::desc("Print only the summary"),
                           cl::cat(category));

//===----------------------------------------------------------------------===//
// The job
//===----------------------------------------------------------------------===//

namespace {

int rank = 0, worldSize = 1;

/// On the CUDA backend, buffers that the compiled host code and the runtime
/// share are managed memory (ddprt_alloc): the step's inputs and everything
/// the step allocates (malloc in the JIT-compiled code is redirected).
bool sharedMemory = false;

void *allocateBuffer(size_t bytes) {
  if (!sharedMemory)
    return std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
  void *pointer = nullptr;
  if (ddprt_alloc(ddprt_current_context(), bytes, &pointer) != DDPRT_OK)
    return nullptr;
  return pointer;
}

void releaseBuffer(void *pointer) {
  if (sharedMemory)
    ddprt_free(ddprt_current_context(), pointer);
  else
    std::free(pointer);
}

/// The compiled code's malloc and free on the CUDA backend.
void *jitMalloc(size_t bytes) { return allocateBuffer(bytes); }
void jitFree(void *pointer) { releaseBuffer(pointer); }

/// The compiled code's ddprt_check on the CUDA backend: runtime calls are
/// enqueued, and the host code after them may read what they write, so
/// wait for the device first.
void synchronizeAndCheck(ddprt_context *context, ddprt_status status,
                         const char *where) {
  if (status == DDPRT_OK)
    status = ddprt_synchronize(context);
  ddprt_check(context, status, where);
}

void stopJob [[noreturn]] (int status) {
  llvm::errs().flush();
  llvm::outs().flush();
#if defined(DDP_RUN_HAVE_MPI)
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized && worldSize > 1)
    MPI_Abort(MPI_COMM_WORLD, status);
#endif
  std::_Exit(status);
}

/// Whether every rank succeeded; a rank that failed has printed why.
bool everyRankSucceeded(bool succeeded) {
#if defined(DDP_RUN_HAVE_MPI)
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized && worldSize > 1) {
    int local = succeeded ? 1 : 0, all = 0;
    MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all == 1;
  }
#endif
  return succeeded;
}

double maxOverRanks(double value) {
#if defined(DDP_RUN_HAVE_MPI)
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized && worldSize > 1) {
    double all = value;
    MPI_Allreduce(&value, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return all;
  }
#endif
  return value;
}

/// One line of stderr, written with a single write() when the statement
/// ends, so that the lines of several ranks do not interleave.
class Line {
public:
  explicit Line(const std::string &prefix) : os(text) { os << prefix; }
  Line(const Line &) = delete;
  ~Line() {
    os.flush();
    llvm::errs().flush();
    for (size_t done = 0; done < text.size();) {
      ssize_t wrote = ::write(2, text.data() + done, text.size() - done);
      if (wrote <= 0)
        break;
      done += size_t(wrote);
    }
  }
  template <typename T> Line &operator<<(const T &value) {
    os << value;
    return *this;
  }

private:
  std::string text;
  llvm::raw_string_ostream os;
};

Line error() {
  return Line("ddp-run: rank " + std::to_string(rank) + ": error: ");
}

/// Stops every rank if any failed. `what` says which phase.
void agreeOrStop(bool succeeded, ddprt_context *context, StringRef what) {
  if (everyRankSucceeded(succeeded))
    return;
  if (succeeded)
    Line("ddp-run: rank " + std::to_string(rank) + ": ")
        << "stopping: another rank failed " << what << "\n";
  if (context)
    ddprt_finalize(context);
  std::exit(1);
}

/// Replaces {rank}, {step}, {step%N}, {result} and {name} in `pattern`.
std::string expand(StringRef pattern, int64_t step, int64_t result = -1,
                   StringRef name = "") {
  std::string out;
  while (!pattern.empty()) {
    size_t open = pattern.find('{');
    out += pattern.take_front(open).str();
    if (open == StringRef::npos)
      break;
    pattern = pattern.drop_front(open);
    size_t close = pattern.find('}');
    StringRef key = pattern.slice(1, close);
    int64_t modulus;
    if (close != StringRef::npos && key == "rank")
      out += std::to_string(rank);
    else if (close != StringRef::npos && key == "step" && step >= 0)
      out += std::to_string(step);
    else if (close != StringRef::npos && key.consume_front("step%") &&
             step >= 0 && !key.getAsInteger(10, modulus) && modulus > 0)
      out += std::to_string(step % modulus);
    else if (close != StringRef::npos && key == "result" && result >= 0)
      out += std::to_string(result);
    else if (close != StringRef::npos && key == "name" && !name.empty())
      out += name.str();
    else {
      out += "{";
      pattern = pattern.drop_front();
      continue;
    }
    pattern = pattern.drop_front(close + 1);
  }
  return out;
}

/// The .npy type string of an element type; empty if .npy cannot hold it.
std::string npyDescr(Type type) {
  if (type.isF32())
    return "<f4";
  if (type.isF64())
    return "<f8";
  if (type.isF16())
    return "<f2";
  if (type.isSignlessInteger(64))
    return "<i8";
  if (type.isSignlessInteger(32))
    return "<i4";
  if (type.isSignlessInteger(16))
    return "<i2";
  if (type.isSignlessInteger(8))
    return "<i1";
  return "";
}

std::string typeString(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

/// A host buffer the step reads or wrote, with its memref descriptor words:
/// allocated, aligned, offset, sizes, strides.
struct Buffer {
  RankedTensorType type;
  void *allocated = nullptr;
  void *aligned = nullptr;
  std::vector<int64_t> sizes;

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t s : sizes)
      n *= s;
    return n;
  }
  size_t bytes() const {
    return size_t(numElements()) *
           (type.getElementType().getIntOrFloatBitWidth() / 8);
  }
  void release() {
    releaseBuffer(allocated);
    allocated = aligned = nullptr;
  }
};

/// Reads `path` into a fresh buffer of `type`, checking dtype and shape.
llvm::Expected<Buffer> readInput(StringRef path, RankedTensorType type,
                                 unsigned argument) {
  llvm::Expected<npy::Array> array = npy::read(path);
  if (!array)
    return array.takeError();
  std::string want = npyDescr(type.getElementType());
  auto fail = [&](const Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "argument " + Twine(argument) + " ('" +
                                       path + "'): " + why);
  };
  if (array->descr != want)
    return fail("element type '" + array->descr + "' but the function takes " +
                want + " (" + typeString(type.getElementType()) + ")");
  if (ArrayRef<int64_t>(array->shape).size() != size_t(type.getRank()))
    return fail("shape " + shapeString(array->shape) + " but the function "
                "takes " + typeString(type));
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (!type.isDynamicDim(i) && type.getDimSize(i) != array->shape[i])
      return fail("shape " + shapeString(array->shape) +
                  " but the function takes " + typeString(type));
  Buffer buffer;
  buffer.type = type;
  buffer.sizes = array->shape;
  buffer.allocated = allocateBuffer(array->data.size());
  if (!buffer.allocated)
    return fail("out of memory");
  buffer.aligned = buffer.allocated;
  std::memcpy(buffer.aligned, array->data.data(), array->data.size());
  return buffer;
}

llvm::Error writeOutput(StringRef path, const Buffer &buffer) {
  npy::Array array;
  array.descr = npyDescr(buffer.type.getElementType());
  array.shape = buffer.sizes;
  const char *data = static_cast<const char *>(buffer.aligned);
  array.data.assign(data, data + buffer.bytes());
  return npy::write(path, array);
}

/// Stops the job when compiled code reports a runtime failure: the other
/// ranks may be waiting in a collective.
void onRuntimeError(ddprt_context *context, ddprt_status status,
                    const char *where, void *) {
  error() << where << ": " << ddprt_status_string(status) << ": "
          << ddprt_last_error(context) << "\n";
  stopJob(1);
}

/// ddprt's symbols for the JIT, so that the compiled code calls exactly the
/// library this tool runs with.
llvm::orc::SymbolMap runtimeSymbols(llvm::orc::MangleAndInterner interner) {
  llvm::orc::SymbolMap symbols;
  auto add = [&](const char *name, auto *function) {
    symbols[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(function),
                               llvm::JITSymbolFlags::Exported};
  };
  add("ddprt_current_context", &ddprt_current_context);
  if (sharedMemory) {
    add("ddprt_check", &synchronizeAndCheck);
    add("malloc", &jitMalloc);
    add("free", &jitFree);
  } else {
    add("ddprt_check", &ddprt_check);
  }
  add("ddprt_allreduce", &ddprt_allreduce);
  add("ddprt_allreduce_start", &ddprt_allreduce_start);
  add("ddprt_wait", &ddprt_wait);
  add("ddprt_scale", &ddprt_scale);
  add("ddprt_cast", &ddprt_cast);
  add("ddprt_copy", &ddprt_copy);
  add("ddprt_project", &ddprt_project);
  add("ddprt_backproject", &ddprt_backproject);
  add("ddprt_orthogonalize", &ddprt_orthogonalize);
  add("ddprt_reconstruct", &ddprt_reconstruct);
  add("ddprt_random_normal", &ddprt_random_normal);
  add("ddprt_state_get", &ddprt_state_get);
  add("ddprt_state_data", &ddprt_state_data);
  // memref.copy of strided views lowers to this runner utility.
  add("memrefCopy", &memrefCopy);
  return symbols;
}

std::optional<ddprt_dtype> runtimeDtype(Type type) {
  if (type.isF32())
    return DDPRT_F32;
  if (type.isF16())
    return DDPRT_F16;
  if (type.isBF16())
    return DDPRT_BF16;
  if (type.isF64())
    return DDPRT_F64;
  if (type.isSignlessInteger(64))
    return DDPRT_I64;
  return std::nullopt;
}

/// A ddp.state of the module: its name, element type and shape.
struct StateInfo {
  std::string name;
  Type element;
  std::vector<int64_t> shape;
};

std::string withThousands(uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

uint64_t sum(const uint64_t (&values)[DDPRT_ROLE_COUNT]) {
  uint64_t total = 0;
  for (uint64_t v : values)
    total += v;
  return total;
}

/// Re-runs this command under mpirun with --np ranks.
int launch(int argc, char **argv) {
  llvm::ErrorOr<std::string> mpirun = llvm::sys::findProgramByName("mpirun");
  if (!mpirun) {
    llvm::errs() << "ddp-run: error: --np needs mpirun on PATH (OpenMPI)\n";
    return 1;
  }
  std::string self = llvm::sys::fs::getMainExecutable(
      argv[0], reinterpret_cast<void *>(&launch));
  std::vector<std::string> args{*mpirun};
  if (geteuid() == 0)
    args.push_back("--allow-run-as-root");
  args.push_back("--oversubscribe");
  args.push_back("-np");
  args.push_back(std::to_string(launchRanks));
  args.push_back(self);
  for (int i = 1; i < argc; ++i) {
    StringRef arg = argv[i];
    if (arg.starts_with("--np=") || arg.starts_with("-np="))
      continue;
    if (arg == "--np" || arg == "-np") {
      ++i;
      continue;
    }
    args.push_back(arg.str());
  }
  std::vector<StringRef> refs(args.begin(), args.end());
  std::string message;
  int status = llvm::sys::ExecuteAndWait(*mpirun, refs, std::nullopt, {}, 0, 0,
                                         &message);
  if (status < 0) {
    llvm::errs() << "ddp-run: error: cannot run mpirun: " << message << "\n";
    return 1;
  }
  return status;
}

bool insideMpiJob() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
         std::getenv("PMIX_RANK");
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "ddp-run: JIT-run a step function with ddp ops on every MPI rank\n");
  if (launchRanks > 0 && !insideMpiJob())
    return launch(argc, argv);

  // Start the runtime first: it brings up MPI, and every later failure can
  // then be agreed on by all ranks.
  ddprt_options options;
  ddprt_default_options(&options);
  options.timeout_seconds = timeoutSeconds;
  if (backend == "cuda")
    options.backend = DDPRT_BACKEND_CUDA;
  else if (backend != "cpu") {
    llvm::errs() << "ddp-run: error: --backend must be cpu or cuda, not '"
                 << backend << "'\n";
    return 1;
  }
  ddprt_context *context = nullptr;
  ddprt_status started = ddprt_init(&options, &context);
  if (context) {
    rank = ddprt_rank(context);
    worldSize = ddprt_world_size(context);
  }
  if (started != DDPRT_OK) {
    error() << "cannot start the runtime: " << ddprt_status_string(started)
            << ": " << ddprt_last_error(context) << "\n";
    agreeOrStop(false, context, "to start the runtime");
  }
  agreeOrStop(true, context, "to start the runtime");
  ddprt_set_current_context(context);
  ddprt_set_error_handler(onRuntimeError, nullptr);
  sharedMemory = options.backend == DDPRT_BACKEND_CUDA;
  bool verbose = rank == 0 && !quiet;

  // Parse, check and compile (every rank; it is deterministic).
  DialectRegistry registry;
  mlir::ddp::registerAllDialects(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  MLIRContext mlirContext(registry);
  mlirContext.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &mlirContext);
  OwningOpRef<ModuleOp> module;
  {
    std::string message;
    std::unique_ptr<llvm::MemoryBuffer> file =
        openInputFile(inputFile, &message);
    if (!file)
      error() << message << "\n";
    else {
      sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
      module = parseSourceFile<ModuleOp>(sourceMgr, &mlirContext);
    }
  }
  agreeOrStop(bool(module), context, "to parse the module");

  auto function = module->lookupSymbol<func::FuncOp>(entry);
  std::vector<RankedTensorType> argumentTypes, resultTypes;
  bool signatureOk = true;
  if (!function) {
    error() << "the module has no func.func @" << entry << "\n";
    signatureOk = false;
  } else {
    auto collect = [&](TypeRange types, StringRef what,
                       std::vector<RankedTensorType> &out) {
      for (auto [i, type] : llvm::enumerate(types)) {
        auto tensor = dyn_cast<RankedTensorType>(type);
        if (!tensor || npyDescr(tensor.getElementType()).empty()) {
          error() << "@" << entry << " " << what << " " << i << " has type "
                  << type
                  << "; ddp-run passes ranked tensors of f16, f32, f64 or "
                     "integers (what .npy holds)\n";
          signatureOk = false;
        }
        out.push_back(tensor);
      }
    };
    collect(function.getArgumentTypes(), "argument", argumentTypes);
    collect(function.getResultTypes(), "result", resultTypes);
  }
  // Check the command line against the signature.
  std::vector<int> carriedFrom(argumentTypes.size(), -1);
  if (signatureOk) {
    if (inputs.size() != argumentTypes.size()) {
      error() << "@" << entry << " takes " << argumentTypes.size()
              << " arguments but " << inputs.size() << " --input given\n";
      signatureOk = false;
    }
    for (const std::string &carry : carries) {
      auto [a, r] = StringRef(carry).split(':');
      unsigned argument, result;
      if (a.getAsInteger(10, argument) || r.getAsInteger(10, result) ||
          argument >= argumentTypes.size() || result >= resultTypes.size()) {
        error() << "--carry=" << carry << " is not ARG:RESULT with ARG < "
                << argumentTypes.size() << " and RESULT < "
                << resultTypes.size() << "\n";
        signatureOk = false;
        continue;
      }
      if (argumentTypes[argument] != resultTypes[result]) {
        error() << "--carry=" << carry << ": result " << result << " is "
                << resultTypes[result] << " but argument " << argument
                << " is " << argumentTypes[argument] << "\n";
        signatureOk = false;
        continue;
      }
      carriedFrom[argument] = result;
    }
    for (unsigned r : outputResults)
      if (r >= resultTypes.size()) {
        error() << "--output-results=" << r << " but @" << entry << " has "
                << resultTypes.size() << " results\n";
        signatureOk = false;
      }
  }
  agreeOrStop(signatureOk, context, "to check the command line");

  std::vector<StateInfo> states;
  for (auto state : module->getOps<mlir::ddp::StateOp>()) {
    StateInfo info{state.getSymName().str(), state.getType(), {}};
    if (auto tensor = dyn_cast<RankedTensorType>(state.getType())) {
      info.element = tensor.getElementType();
      info.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
    }
    states.push_back(info);
  }

  PassManager pm(&mlirContext);
  mlir::ddp::buildLoweringPipeline(pm);
  bool lowered = succeeded(pm.run(*module));
  if (!lowered)
    error() << "cannot lower '" << inputFile << "' (see above)\n";
  agreeOrStop(lowered, context, "to lower the module");

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  ExecutionEngineOptions engineOptions;
  auto optimize = makeOptimizingTransformer(2, 0, nullptr);
  engineOptions.transformer = optimize;
  engineOptions.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  auto engine = ExecutionEngine::create(*module, engineOptions);
  if (!engine)
    error() << "cannot JIT-compile: " << llvm::toString(engine.takeError())
            << "\n";
  agreeOrStop(bool(engine), context, "to JIT-compile");
  (*engine)->registerSymbols(runtimeSymbols);
  (*engine)->initialize();
  auto packed = (*engine)->lookupPacked(entry);
  if (!packed)
    error() << "cannot find the compiled @" << entry << ": "
            << llvm::toString(packed.takeError()) << "\n";
  agreeOrStop(bool(packed), context, "to find the entry point");

  // Create every state, so that a checkpoint can be loaded into them.
  bool stateOk = true;
  std::map<std::string, ddprt_state *> stateHandles;
  for (const StateInfo &info : states) {
    std::optional<ddprt_dtype> dtype = runtimeDtype(info.element);
    int64_t numel = 1;
    for (int64_t d : info.shape)
      numel *= d;
    ddprt_state *handle = nullptr;
    if (!dtype || ddprt_state_get(context, info.name.c_str(), *dtype, numel,
                                  &handle) != DDPRT_OK) {
      error() << "cannot create state '" << info.name
              << "': " << ddprt_last_error(context) << "\n";
      stateOk = false;
      continue;
    }
    stateHandles[info.name] = handle;
  }
  agreeOrStop(stateOk, context, "to create the states");
  if (!checkpointLoad.empty()) {
    std::string path = expand(checkpointLoad, -1);
    bool loaded =
        ddprt_checkpoint_load(context, path.c_str()) == DDPRT_OK;
    if (!loaded)
      error() << "cannot load checkpoint: " << ddprt_last_error(context)
              << "\n";
    agreeOrStop(loaded, context, "to load the checkpoint");
  }
  bool setOk = true;
  for (const std::string &setting : setStates) {
    auto [name, pattern] = StringRef(setting).split('=');
    auto found = stateHandles.find(name.str());
    const StateInfo *info = nullptr;
    for (const StateInfo &s : states)
      if (s.name == name)
        info = &s;
    if (found == stateHandles.end() || !info) {
      error() << "--set-state=" << setting << ": the module has no state '"
              << name << "'\n";
      setOk = false;
      continue;
    }
    std::string path = expand(pattern, -1);
    llvm::Expected<npy::Array> array = npy::read(path);
    if (!array) {
      error() << "--set-state: " << llvm::toString(array.takeError()) << "\n";
      setOk = false;
      continue;
    }
    if (array->descr != npyDescr(info->element) ||
        array->shape != info->shape) {
      error() << "--set-state: '" << path << "' holds " << array->descr << " "
              << shapeString(array->shape) << " but state '" << name
              << "' is " << npyDescr(info->element) << " "
              << shapeString(info->shape) << "\n";
      setOk = false;
      continue;
    }
    ddprt_buffer target = ddprt_state_buffer(found->second);
    ddprt_buffer source = target;
    source.data = array->data.data();
    if (ddprt_copy(context, &source, &target, 1) != DDPRT_OK ||
        ddprt_synchronize(context) != DDPRT_OK) {
      error() << "--set-state: " << ddprt_last_error(context) << "\n";
      setOk = false;
    }
  }
  agreeOrStop(setOk, context, "to set the states");

  // The steps.
  std::vector<Buffer> arguments(argumentTypes.size());
  std::vector<double> stepSeconds;
  ddprt_counters before{}, after{};
  uint64_t lastStepElements = 0, lastStepBytes = 0, totalElements = 0;
  std::vector<bool> writeResult(resultTypes.size(), outputResults.empty());
  for (unsigned r : outputResults)
    writeResult[r] = true;
  size_t resultWords = 0;
  for (RankedTensorType type : resultTypes)
    resultWords += 3 + 2 * type.getRank();
  std::vector<int64_t> resultStorage(std::max<size_t>(resultWords, 1));

  for (unsigned i = 0; i < steps; ++i) {
    int64_t step = firstStep + i;
    bool readOk = true;
    for (size_t a = 0; a < arguments.size(); ++a) {
      if (arguments[a].allocated)
        continue; // carried from the step before
      std::string path = expand(inputs[a], step);
      llvm::Expected<Buffer> buffer = readInput(path, argumentTypes[a], a);
      if (!buffer) {
        error() << "step " << step << ": "
                << llvm::toString(buffer.takeError()) << "\n";
        readOk = false;
        continue;
      }
      arguments[a] = *buffer;
    }
    agreeOrStop(readOk, context, "to read the inputs of step " +
                                     std::to_string(step));

    // Packed calling convention: a pointer to each descriptor word, then
    // one to the storage of the returned descriptors.
    std::vector<int64_t> words;
    for (Buffer &buffer : arguments) {
      words.push_back(reinterpret_cast<int64_t>(buffer.allocated));
      words.push_back(reinterpret_cast<int64_t>(buffer.aligned));
      words.push_back(0);
      llvm::append_range(words, buffer.sizes);
      int64_t stride = 1;
      std::vector<int64_t> strides(buffer.sizes.size());
      for (int64_t d = int64_t(buffer.sizes.size()) - 1; d >= 0; --d) {
        strides[d] = stride;
        stride *= buffer.sizes[d];
      }
      llvm::append_range(words, strides);
    }
    std::vector<void *> packedArgs;
    for (int64_t &word : words)
      packedArgs.push_back(&word);
    if (!resultTypes.empty())
      packedArgs.push_back(resultStorage.data());

    ddprt_get_counters(context, &before);
    auto start = std::chrono::steady_clock::now();
    (*packed)(packedArgs.data());
    ddprt_synchronize(context);
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    ddprt_get_counters(context, &after);
    seconds = maxOverRanks(seconds);
    stepSeconds.push_back(seconds);
    lastStepElements = sum(after.elements_sent) - sum(before.elements_sent);
    lastStepBytes = sum(after.bytes_sent) - sum(before.bytes_sent);
    totalElements += lastStepElements;
    uint64_t uncompressed = after.elements_before_compression -
                            before.elements_before_compression;
    if (verbose) {
      llvm::outs() << "step " << step << ": "
                   << llvm::format("%.3f", seconds * 1e3) << " ms, sent "
                   << withThousands(lastStepElements) << " elements ("
                   << withThousands(lastStepBytes) << " bytes)";
      if (lastStepElements && uncompressed)
        llvm::outs() << ", " << llvm::format("%.2f", double(uncompressed) /
                                                          lastStepElements)
                     << "x fewer than uncompressed";
      llvm::outs() << "\n";
    }

    // Unpack the results; they belong to us now (freshly allocated).
    std::vector<Buffer> results(resultTypes.size());
    size_t at = 0;
    for (size_t r = 0; r < results.size(); ++r) {
      Buffer &buffer = results[r];
      buffer.type = resultTypes[r];
      buffer.allocated = reinterpret_cast<void *>(resultStorage[at]);
      buffer.aligned = reinterpret_cast<void *>(resultStorage[at + 1]);
      int64_t offset = resultStorage[at + 2];
      int64_t rankOf = resultTypes[r].getRank();
      buffer.sizes.assign(resultStorage.begin() + at + 3,
                          resultStorage.begin() + at + 3 + rankOf);
      buffer.aligned = static_cast<char *>(buffer.aligned) +
                       offset * (buffer.type.getElementType()
                                     .getIntOrFloatBitWidth() / 8);
      at += 3 + 2 * rankOf;
    }
    bool last = i + 1 == steps;
    bool writeOk = true;
    for (size_t r = 0; r < results.size(); ++r) {
      std::vector<std::string> paths;
      if (!outputPattern.empty() && writeResult[r])
        paths.push_back(expand(outputPattern, step, r));
      if (last && !finalOutputPattern.empty())
        paths.push_back(expand(finalOutputPattern, step, r));
      for (const std::string &path : paths)
        if (llvm::Error e = writeOutput(path, results[r])) {
          error() << "step " << step << ": "
                  << llvm::toString(std::move(e)) << "\n";
          writeOk = false;
        }
    }
    agreeOrStop(writeOk, context, "to write the results of step " +
                                      std::to_string(step));

    // Carried results become the next step's arguments; free the rest.
    std::vector<bool> keep(results.size(), false);
    for (size_t a = 0; a < arguments.size(); ++a) {
      arguments[a].release();
      if (!last && carriedFrom[a] >= 0) {
        arguments[a] = results[carriedFrom[a]];
        keep[carriedFrom[a]] = true;
      }
    }
    for (size_t r = 0; r < results.size(); ++r)
      if (!keep[r])
        results[r].release();
  }
  for (Buffer &buffer : arguments)
    buffer.release();

  // After the last step: state out, checkpoint, figures.
  bool finishOk = true;
  if (!dumpState.empty()) {
    for (const StateInfo &info : states) {
      ddprt_buffer source = ddprt_state_buffer(stateHandles[info.name]);
      npy::Array array;
      array.descr = npyDescr(info.element);
      array.shape = info.shape;
      array.data.resize(size_t(source.numel) * ddprt_dtype_size(source.dtype));
      ddprt_buffer target = source;
      target.data = array.data.data();
      if (ddprt_copy(context, &source, &target, 1) != DDPRT_OK ||
          ddprt_synchronize(context) != DDPRT_OK) {
        error() << "--dump-state: " << ddprt_last_error(context) << "\n";
        finishOk = false;
        continue;
      }
      if (llvm::Error e = npy::write(
              expand(dumpState, -1, -1, info.name), array)) {
        error() << "--dump-state: " << llvm::toString(std::move(e)) << "\n";
        finishOk = false;
      }
    }
  }
  if (!checkpointSave.empty()) {
    std::string path = expand(checkpointSave, -1);
    if (ddprt_checkpoint_save(context, path.c_str()) != DDPRT_OK) {
      error() << "cannot save checkpoint: " << ddprt_last_error(context)
              << "\n";
      finishOk = false;
    }
  }

  ddprt_counters total{};
  ddprt_get_counters(context, &total);
  std::vector<double> sorted = stepSeconds;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
  double mean = 0.0;
  for (double s : stepSeconds)
    mean += s;
  mean = stepSeconds.empty() ? 0.0 : mean / stepSeconds.size();
  double ratio = total.elements_after_compression
                     ? double(total.elements_before_compression) /
                           total.elements_after_compression
                     : 1.0;
  if (rank == 0) {
    llvm::outs() << "ddp-run: " << steps << " steps of @" << entry << " on "
                 << worldSize << " rank" << (worldSize == 1 ? "" : "s")
                 << " (" << backend << "): "
                 << llvm::format("%.3f", median * 1e3)
                 << " ms per step (median), last step sent "
                 << withThousands(lastStepElements)
                 << " elements per rank; over the run "
                 << llvm::format("%.2f", ratio)
                 << "x fewer elements than uncompressed\n";
  }
  if (!statsJson.empty() &&
      (rank == 0 || StringRef(statsJson).contains("{rank}"))) {
    std::string path = expand(statsJson, -1);
    // If the directory cannot be made, opening the file says why.
    if (StringRef parent = llvm::sys::path::parent_path(path); !parent.empty())
      (void)llvm::sys::fs::create_directories(parent);
    std::error_code ec;
    llvm::raw_fd_ostream out(path, ec);
    if (ec) {
      error() << "cannot write '" << path << "': " << ec.message() << "\n";
      finishOk = false;
    } else {
      auto roles = [&](const uint64_t (&values)[DDPRT_ROLE_COUNT]) {
        const char *names[] = {"gradient", "uncompressed", "warmup",
                               "powersgd_p", "powersgd_q"};
        std::string text = "{";
        for (int r = 0; r < DDPRT_ROLE_COUNT; ++r)
          text += std::string(r ? ", " : "") + "\"" + names[r] +
                  "\": " + std::to_string(values[r]);
        return text + "}";
      };
      out << "{\n  \"rank\": " << rank << ",\n  \"world_size\": " << worldSize
          << ",\n  \"backend\": \"" << backend << "\",\n  \"steps\": " << steps
          << ",\n  \"ms_per_step\": " << llvm::format("%.6f", median * 1e3)
          << ",\n  \"ms_per_step_mean\": " << llvm::format("%.6f", mean * 1e3)
          << ",\n  \"elements_sent_per_step\": " << lastStepElements
          << ",\n  \"bytes_sent_per_step\": " << lastStepBytes
          << ",\n  \"elements_sent_total\": " << totalElements
          << ",\n  \"elements_before_compression\": "
          << total.elements_before_compression
          << ",\n  \"elements_after_compression\": "
          << total.elements_after_compression
          << ",\n  \"collectives\": " << roles(total.collectives)
          << ",\n  \"elements_sent\": " << roles(total.elements_sent)
          << ",\n  \"bytes_sent\": " << roles(total.bytes_sent) << "\n}\n";
    }
  }
  agreeOrStop(finishOk, context, "to write its results");
  ddprt_set_current_context(nullptr);
  ddprt_finalize(context);
  return 0;
}
