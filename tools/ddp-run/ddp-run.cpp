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
// --emit-step=DIR compiles ahead of time instead (no runtime, no MPI):
// DIR/libstep.so holds the lowered step and its packed entry, and
// DIR/step.json its signature, for ddprt-step-runner on a machine without
// LLVM or MLIR. Everything after the compilation (the job, the step loop,
// the functions compiled code calls) is the runtime tree's StepHost, which
// both tools share.
//
//===----------------------------------------------------------------------===//

#include "StepHost.h"
#include "ddp/Version.h"

#include "ddp/Dialect/DDP/IR/DDP.h"
#include "ddp/InitAll.h"
#include "ddp/Pipelines/Pipelines.h"
#include "ddprt/ddprt.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

#include <cstdlib>
#include <optional>
#include <unistd.h>

using namespace mlir;
namespace cl = llvm::cl;
using stephost::Line;
using stephost::StepSignature;
using stephost::TensorSpec;

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

static cl::OptionCategory category("ddp-run options");
static cl::opt<std::string> inputFile(cl::Positional, cl::Required,
                                      cl::desc("<step.mlir>"),
                                      cl::cat(category));
static cl::opt<std::string>
    entry("entry",
          cl::desc("The function to run (default: the module's only public "
                   "function with ddp or shard.all_reduce ops, or calls of "
                   "them)"),
          cl::cat(category));
static cl::opt<unsigned> steps("steps", cl::init(1),
                               cl::desc("How many steps to run (default: 1)"),
                               cl::cat(category));
static cl::opt<unsigned> firstStep(
    "first-step", cl::init(0),
    cl::desc("Number of the first step in file names (resuming a run; "
             "default: 0)"),
    cl::cat(category));
static cl::opt<std::string>
    backend("backend", cl::init("cpu"),
            cl::desc("Runtime backend: cpu or cuda (default: cpu)"),
            cl::cat(category));
static cl::list<std::string>
    inputs("input",
           cl::desc("One .npy path pattern per argument, in order, or one "
                    "pattern with {name} for every argument ({rank}, {step}, "
                    "{step%N}, {name}: the argument's name location)"),
           cl::cat(category));
static cl::opt<std::string> inputArchive(
    "inputs", cl::value_desc("FILE.npz"),
    cl::desc("Every argument from one .npz (np.savez), the array named "
             "after the argument's name location ({rank}, {step}, {step%N})"),
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
static cl::opt<std::string>
    statsJson("summary-json",
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
             "seconds (0: wait forever; default: 60)"),
    cl::cat(category));
static cl::opt<bool> quiet("quiet", cl::desc("Print only the summary"),
                           cl::cat(category));
static cl::opt<unsigned> logEvery(
    "log-every", cl::init(0),
    cl::desc("Print every N-th step's line (default: 0, the first and the "
             "last step and a line every 5 seconds between)"),
    cl::cat(category));
static cl::opt<std::string> onNonfinite(
    "on-nonfinite", cl::init("skip"),
    cl::desc("NaN or Inf in a PowerSGD tensor's averaged P or Q: skip its "
             "error feedback for the step with a warning (skip, the default), "
             "or stop the job (fail)"),
    cl::cat(category));
static cl::opt<std::string> emitStep(
    "emit-step", cl::value_desc("DIR"),
    cl::desc("Compile only (no runtime, no MPI): write DIR/libstep.so, the "
             "lowered step with its packed entry _mlir_<entry>, and "
             "DIR/step.json, for ddprt-step-runner"),
    cl::cat(category));

//===----------------------------------------------------------------------===//
// The module
//===----------------------------------------------------------------------===//

namespace {

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
    return "|i1";
  return "";
}

std::string typeString(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

TensorSpec tensorSpec(RankedTensorType type, std::string dtype) {
  TensorSpec spec{std::move(dtype), {}};
  for (int64_t d : type.getShape())
    spec.shape.push_back(ShapedType::isDynamic(d) ? -1 : d);
  return spec;
}

/// Parses `inputFile`; diagnostics go to stderr.
OwningOpRef<ModuleOp> parseModule(MLIRContext &context,
                                  llvm::SourceMgr &sourceMgr,
                                  llvm::function_ref<Line()> error) {
  std::string message;
  std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(inputFile, &message);
  if (!file) {
    error() << message << "\n";
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

/// The function ddp-run runs: --entry, or the one resolveEntry chose.
std::string entryName;

/// Whether `function` has ddp ops or shard.all_reduce, itself or in a
/// function it calls (memoized in `known`; a call cycle counts as none).
bool synchronizesGradients(func::FuncOp function, SymbolTableCollection &table,
                           llvm::DenseMap<Operation *, bool> &known) {
  auto [it, inserted] = known.try_emplace(function, false);
  if (!inserted)
    return it->second;
  bool found = false;
  function.walk([&](Operation *op) {
    if (isa_and_nonnull<mlir::ddp::DDPDialect>(op->getDialect()) ||
        isa<shard::AllReduceOp>(op)) {
      found = true;
      return WalkResult::interrupt();
    }
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto callee = table.lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      if (callee && !callee.isExternal() &&
          synchronizesGradients(callee, table, known)) {
        found = true;
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  known[function] = found;
  return found;
}

/// Sets entryName: --entry if given (it must name a function of the
/// module), otherwise the module's only public function that synchronizes
/// gradients. Says which functions there are when it cannot choose.
bool resolveEntry(ModuleOp module, llvm::function_ref<Line()> error) {
  std::vector<std::string> publicFunctions, candidates;
  SymbolTableCollection table;
  llvm::DenseMap<Operation *, bool> known;
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function.isExternal() || !function.isPublic())
      continue;
    publicFunctions.push_back(function.getName().str());
    if (synchronizesGradients(function, table, known))
      candidates.push_back(function.getName().str());
  }
  auto list = [](const std::vector<std::string> &names) {
    std::string text;
    for (const std::string &name : names)
      text += (text.empty() ? "@" : ", @") + name;
    return text.empty() ? std::string("none") : text;
  };
  if (entry.getNumOccurrences()) {
    entryName = entry;
    auto function = module.lookupSymbol<func::FuncOp>(entryName);
    if (!function || function.isExternal()) {
      error() << "--entry=" << entryName << ": the module has no "
              << (function ? "body for " : "") << "func.func @" << entryName
              << " (its public functions: " << list(publicFunctions) << ")\n";
      return false;
    }
    return true;
  }
  if (candidates.size() == 1) {
    entryName = candidates.front();
    return true;
  }
  if (candidates.empty())
    error() << "no public function of the module has ddp or shard.all_reduce "
               "ops to run; name one with --entry (its public functions: "
            << list(publicFunctions) << ")\n";
  else
    error() << "the module has " << candidates.size()
            << " public functions with ddp or shard.all_reduce ops: "
            << list(candidates) << "; choose one with --entry\n";
  return false;
}

/// The name an argument's location gives it ("fc1.weight" for
/// loc("fc1.weight"), also inside a fused or call-site location); empty if
/// it has none.
std::string locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location part : fused.getLocations())
      if (std::string name = locationName(part); !name.empty())
        return name;
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return locationName(callSite.getCallee());
  return "";
}

/// The entry's arguments and results and the module's states, as the host
/// passes them; says what it cannot pass.
bool collectSignature(ModuleOp module, StepSignature &signature,
                      llvm::function_ref<Line()> error) {
  signature = StepSignature();
  signature.entry = entryName;
  auto function = module.lookupSymbol<func::FuncOp>(entryName);
  if (!function) {
    error() << "the module has no func.func @" << entryName << "\n";
    return false;
  }
  bool ok = true;
  auto collect = [&](TypeRange types, StringRef what,
                     std::vector<TensorSpec> &out) {
    for (auto [i, type] : llvm::enumerate(types)) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      std::string dtype = tensor ? npyDescr(tensor.getElementType()) : "";
      if (dtype.empty()) {
        error() << "@" << entryName << " " << what.str() << " " << i
                << " has type " << typeString(type)
                << "; ddp-run passes ranked tensors of f16, f32, f64 or "
                   "integers (what .npy holds)\n";
        ok = false;
        continue;
      }
      out.push_back(tensorSpec(tensor, dtype));
    }
  };
  collect(function.getArgumentTypes(), "argument", signature.arguments);
  collect(function.getResultTypes(), "result", signature.results);
  for (BlockArgument argument : function.getArguments())
    signature.argumentNames.push_back(locationName(argument.getLoc()));
  for (auto state : module.getOps<mlir::ddp::StateOp>()) {
    stephost::StateSpec spec;
    spec.name = state.getSymName().str();
    // A scalar state (the step counter) is one element.
    Type element = state.getType();
    if (auto tensor = dyn_cast<RankedTensorType>(element)) {
      element = tensor.getElementType();
      spec.type = tensorSpec(tensor, "");
    }
    std::string dtype = element.isBF16() ? "bf16" : npyDescr(element);
    spec.type.dtype = dtype.empty() ? typeString(element) : dtype;
    auto *dialect = state->getContext()->getLoadedDialect<mlir::ddp::DDPDialect>();
    if (IntegerAttr start =
            dialect->getStartIterAttrHelper().getAttr(state))
      spec.startIter = start.getInt();
    signature.states.push_back(spec);
  }
  return ok;
}

/// The dialects, the translations to LLVM IR and a context with them.
DialectRegistry makeRegistry() {
  DialectRegistry registry;
  mlir::ddp::registerAllDialects(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  return registry;
}

/// Parses the module, chooses the entry and reads its signature: what fails
/// the same way on every rank.
OwningOpRef<ModuleOp> loadStep(MLIRContext &context, llvm::SourceMgr &sourceMgr,
                               StepSignature &signature,
                               llvm::function_ref<Line()> error) {
  OwningOpRef<ModuleOp> module = parseModule(context, sourceMgr, error);
  if (!module)
    return nullptr;
  if (!resolveEntry(*module, error) ||
      !collectSignature(*module, signature, error))
    return nullptr;
  return module;
}

//===----------------------------------------------------------------------===//
// --emit-step: ahead of time
//===----------------------------------------------------------------------===//

/// Defines `_mlir_<name>(void **)` around @name exactly as MLIR's
/// ExecutionEngine does (packFunctionArguments): it loads each argument
/// through its pointer, calls @name, and stores the result through the
/// pointer after the arguments.
bool addPackedEntry(llvm::Module &module, StringRef name) {
  llvm::Function *function = module.getFunction(name);
  if (!function || function->isDeclaration())
    return false;
  llvm::LLVMContext &context = module.getContext();
  llvm::IRBuilder<> builder(context);
  auto *type = llvm::FunctionType::get(builder.getVoidTy(), builder.getPtrTy(),
                                       /*isVarArg=*/false);
  auto *packed = cast<llvm::Function>(
      module.getOrInsertFunction(("_mlir_" + name).str(), type).getCallee());
  auto *block = llvm::BasicBlock::Create(context, "entry", packed);
  builder.SetInsertPoint(block);
  llvm::Value *argList = packed->arg_begin();
  SmallVector<llvm::Value *> args;
  for (auto [index, arg] : llvm::enumerate(function->args())) {
    llvm::Value *argPtrPtr =
        builder.CreateGEP(builder.getPtrTy(), argList, builder.getInt64(index));
    llvm::Value *argPtr = builder.CreateLoad(builder.getPtrTy(), argPtrPtr);
    args.push_back(builder.CreateLoad(arg.getType(), argPtr));
  }
  llvm::Value *result = builder.CreateCall(function, args);
  if (!result->getType()->isVoidTy()) {
    llvm::Value *retPtrPtr = builder.CreateGEP(
        builder.getPtrTy(), argList, builder.getInt64(function->arg_size()));
    llvm::Value *retPtr = builder.CreateLoad(builder.getPtrTy(), retPtrPtr);
    builder.CreateStore(result, retPtr);
  }
  builder.CreateRetVoid();
  return true;
}

/// Routes every call of a host function (the runtime, memref allocation,
/// memrefCopy) through a slot `__ddp_host_<name>` that the loader fills
/// with what the backend needs (stephost::hostFunctions), as ddp-run's JIT
/// symbol map does. The library then needs nothing from the runtime at
/// load time. Appends the names to `names`.
bool bindHostFunctions(llvm::Module &module, std::vector<std::string> &names,
                       std::string &error) {
  auto *pointer = llvm::PointerType::getUnqual(module.getContext());
  for (llvm::Function &function : llvm::make_early_inc_range(module)) {
    if (!function.isDeclaration() || function.isIntrinsic() ||
        !stephost::isHostFunction(function.getName()))
      continue;
    std::string name = function.getName().str();
    auto *slot =
        new llvm::GlobalVariable(module, pointer, /*isConstant=*/false,
                                 llvm::GlobalValue::ExternalLinkage,
                                 llvm::ConstantPointerNull::get(pointer),
                                 stephost::kHostSlotPrefix + name);
    for (llvm::Use &use : llvm::make_early_inc_range(function.uses())) {
      auto *call = dyn_cast<llvm::CallBase>(use.getUser());
      if (!call || !call->isCallee(&use)) {
        error =
            "the step takes the address of @" + name + " instead of calling it";
        return false;
      }
      llvm::IRBuilder<> builder(call);
      call->setCalledOperand(builder.CreateLoad(pointer, slot, name));
    }
    function.eraseFromParent();
    names.push_back(name);
  }
  return true;
}

/// Code for the architecture of this machine, for any CPU of it (the
/// library runs on other machines): x86-64 without AVX, position
/// independent.
std::unique_ptr<llvm::TargetMachine> createTargetMachine(std::string &error) {
  llvm::Triple triple(llvm::sys::getProcessTriple());
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  StringRef cpu =
      triple.getArch() == llvm::Triple::x86_64 ? "x86-64" : "generic";
  llvm::TargetOptions options;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, cpu, "", options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
}

/// Both hosts (the JIT loop and ddprt-step-runner) give the step its
/// argument buffers and free each buffer once, also when a result is an
/// argument's buffer: the step returns in-place results without a copy
/// (ddp-donate-arguments).
void donateArguments(ModuleOp module) {
  if (auto function = module.lookupSymbol<func::FuncOp>(entryName))
    module.getContext()
        ->getLoadedDialect<mlir::ddp::DDPDialect>()
        ->getDonateArgumentsAttrHelper()
        .setAttr(function, UnitAttr::get(module.getContext()));
}

int emitStepLibrary() {
  auto error = [] { return Line("ddp-run: error: "); };
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  MLIRContext mlirContext(makeRegistry());
  mlirContext.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &mlirContext);
  StepSignature signature;
  OwningOpRef<ModuleOp> module =
      loadStep(mlirContext, sourceMgr, signature, error);
  if (!module)
    return 1;
  for (const stephost::StateSpec &state : signature.states) {
    ddprt_dtype dtype;
    if (!stephost::runtimeDtype(state.type.dtype, dtype)) {
      error() << "state '" << state.name << "' has element type "
              << stephost::elementTypeName(state.type.dtype)
              << ", which the runtime does not keep\n";
      return 1;
    }
  }

  donateArguments(*module);
  PassManager pm(&mlirContext);
  mlir::ddp::buildLoweringPipeline(pm);
  if (failed(pm.run(*module))) {
    error() << "cannot lower '" << inputFile << "' (see above)\n";
    return 1;
  }
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*module, llvmContext, "step");
  if (!llvmModule) {
    error() << "cannot translate '" << inputFile << "' to LLVM IR\n";
    return 1;
  }
  std::string message;
  std::unique_ptr<llvm::TargetMachine> machine = createTargetMachine(message);
  if (!machine) {
    error() << "no code generator for this machine: " << message << "\n";
    return 1;
  }
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple());
  if (!addPackedEntry(*llvmModule, entryName)) {
    error() << "the lowered module has no function @" << entryName << "\n";
    return 1;
  }
  if (!bindHostFunctions(*llvmModule, signature.hostFunctions, message)) {
    error() << message << "\n";
    return 1;
  }
  // The library exports the entry, its packed form and the host slots;
  // its calls bind inside it (libc has a `step` too).
  std::string packedName = "_mlir_" + entryName;
  for (llvm::Function &function : *llvmModule) {
    if (function.isDeclaration() || function.hasLocalLinkage())
      continue;
    bool exported =
        function.getName() == entryName || function.getName() == packedName;
    function.setVisibility(exported ? llvm::GlobalValue::ProtectedVisibility
                                    : llvm::GlobalValue::HiddenVisibility);
    function.setDSOLocal(true);
  }
  if (llvm::verifyModule(*llvmModule, &llvm::errs())) {
    error() << "the step's LLVM IR does not verify\n";
    return 1;
  }
  if (llvm::Error e =
          makeOptimizingTransformer(2, 0, machine.get())(llvmModule.get())) {
    error() << "cannot optimize: " << llvm::toString(std::move(e)) << "\n";
    return 1;
  }

  std::string directory = emitStep;
  if (std::error_code ec = llvm::sys::fs::create_directories(directory)) {
    error() << "cannot create '" << directory << "': " << ec.message() << "\n";
    return 1;
  }
  std::string object = directory + "/step.o";
  std::string library = directory + "/" + signature.library;
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(object, ec, llvm::sys::fs::OF_None);
    if (ec) {
      error() << "cannot write '" << object << "': " << ec.message() << "\n";
      return 1;
    }
    llvm::legacy::PassManager codegen;
    if (machine->addPassesToEmitFile(codegen, out, nullptr,
                                     llvm::CodeGenFileType::ObjectFile)) {
      error() << "this machine's code generator cannot write objects\n";
      return 1;
    }
    codegen.run(*llvmModule);
    out.close();
    if (out.has_error()) {
      error() << "cannot write '" << object << "': " << out.error().message()
              << "\n";
      out.clear_error();
      return 1;
    }
  }

  // Link with the system's compiler driver.
  llvm::ErrorOr<std::string> linker = llvm::sys::findProgramByName("c++");
  if (!linker)
    linker = llvm::sys::findProgramByName("cc");
  if (!linker) {
    error() << "cannot link '" << library
            << "': no c++ or cc on PATH (the object is '" << object << "')\n";
    return 1;
  }
  std::vector<StringRef> args{
      *linker, "-shared", "-Wl,-Bsymbolic", "-Wl,--as-needed",
      "-o",    library,   object,           "-lm"};
  int status = llvm::sys::ExecuteAndWait(*linker, args, std::nullopt, {}, 0, 0,
                                         &message);
  if (status != 0) {
    error() << "cannot link '" << library << "' with " << *linker << ": "
            << (message.empty() ? "exit status " + std::to_string(status)
                                : message)
            << "\n";
    return 1;
  }
  std::string json = directory + "/step.json";
  if (!stephost::writeStepJson(json, signature, message)) {
    error() << message << "\n";
    return 1;
  }
  if (!quiet)
    llvm::outs() << "ddp-run: wrote " << library << " and " << json << " (@"
                 << entryName << ": " << signature.arguments.size()
                 << " arguments, " << signature.results.size() << " results, "
                 << signature.states.size() << " states)\n";
  return 0;
}

//===----------------------------------------------------------------------===//
// Running: JIT
//===----------------------------------------------------------------------===//

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

stephost::RunOptions runOptions() {
  stephost::RunOptions options;
  options.steps = steps;
  options.firstStep = firstStep;
  options.backend = backend;
  options.inputs.assign(inputs.begin(), inputs.end());
  options.inputArchive = inputArchive;
  options.logEvery = logEvery;
  options.carries.assign(carries.begin(), carries.end());
  options.output = outputPattern;
  options.outputResults.assign(outputResults.begin(), outputResults.end());
  options.finalOutput = finalOutputPattern;
  options.checkpointLoad = checkpointLoad;
  options.checkpointSave = checkpointSave;
  options.setStates.assign(setStates.begin(), setStates.end());
  options.dumpState = dumpState;
  options.summaryJson = statsJson;
  options.timeoutSeconds = timeoutSeconds;
  options.quiet = quiet;
  options.onNonfinite = onNonfinite;
  return options;
}

/// Before launching the ranks with --np: what would fail the same way on
/// every rank (options, the module, the entry, the command line against
/// its signature) is said here, once, and nothing is launched.
bool checkBeforeLaunch(const stephost::RunOptions &options) {
  if (!stephost::checkRunOptions("ddp-run", options))
    return false;
  MLIRContext mlirContext(makeRegistry());
  mlirContext.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &mlirContext);
  auto error = [] { return Line("ddp-run: error: "); };
  StepSignature signature;
  if (!loadStep(mlirContext, sourceMgr, signature, error))
    return false;
  stephost::Job job("ddp-run");
  job.worldSize = int(launchRanks);
  job.rankIndependent = true;
  return stephost::checkCommandLine(job, signature, options,
                                    /*checkFiles=*/false);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::ddp::setVersionPrinter("ddp-run");
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "ddp-run: JIT-run a step function with ddp ops on every MPI rank\n");
  if (!emitStep.empty())
    return emitStepLibrary();
  stephost::RunOptions options = runOptions();
  if (launchRanks > 0 && !insideMpiJob())
    return checkBeforeLaunch(options) ? launch(argc, argv) : 1;

  // Start the runtime first: it brings up MPI, and every later failure can
  // then be agreed on by all ranks.
  stephost::Job job("ddp-run");
  if (!job.start(options))
    return 1;
  auto error = [&] { return job.error(); };

  // Parse, check, lower and compile (every rank; it is deterministic, so
  // each failure is the same on every rank and rank 0 alone says it).
  job.rankIndependent = true;
  MLIRContext mlirContext(makeRegistry());
  mlirContext.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  std::optional<SourceMgrDiagnosticHandler> diagnostics;
  std::optional<ScopedDiagnosticHandler> silence;
  if (job.rank == 0)
    diagnostics.emplace(sourceMgr, &mlirContext);
  else
    // Kept with this rank's deferred messages: printed only if rank 0,
    // which says the same for everyone, did not fail.
    silence.emplace(&mlirContext, [&job](Diagnostic &diagnostic) {
      llvm::raw_string_ostream os(job.deferred);
      os << diagnostic.getLocation() << ": "
         << (diagnostic.getSeverity() == DiagnosticSeverity::Error ? "error"
             : diagnostic.getSeverity() == DiagnosticSeverity::Warning
                 ? "warning"
                 : "note")
         << ": " << diagnostic << "\n";
      return success();
    });
  StepSignature signature;
  OwningOpRef<ModuleOp> module =
      loadStep(mlirContext, sourceMgr, signature, error);
  job.agreeOrStop(bool(module), "to read the module");
  job.agreeOrStop(stephost::checkCommandLine(job, signature, options),
                  "to check the command line");

  donateArguments(*module);
  PassManager pm(&mlirContext);
  mlir::ddp::buildLoweringPipeline(pm);
  bool lowered = succeeded(pm.run(*module));
  if (!lowered)
    error() << "cannot lower '" << inputFile << "' (see above)\n";
  job.agreeOrStop(lowered, "to lower the module");

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
  job.agreeOrStop(bool(engine), "to JIT-compile");
  // The same functions, bound the same way, as ddprt-step-runner gives an
  // ahead-of-time compiled step.
  (*engine)->registerSymbols([&](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    for (const stephost::HostFunction &function :
         stephost::hostFunctions(job.sharedMemory))
      symbols[interner(function.name)] = {
          llvm::orc::ExecutorAddr::fromPtr(function.address),
          llvm::JITSymbolFlags::Exported};
    return symbols;
  });
  (*engine)->initialize();
  auto packed = (*engine)->lookupPacked(entryName);
  if (!packed)
    error() << "cannot find the compiled @" << entryName << ": "
            << llvm::toString(packed.takeError()) << "\n";
  job.agreeOrStop(bool(packed), "to find the entry point");
  job.rankIndependent = false;
  return stephost::runSteps(job, signature, *packed, options);
}
