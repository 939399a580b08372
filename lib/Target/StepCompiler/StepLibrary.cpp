//===- StepLibrary.cpp - a step compiled ahead of time --------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// compileStepLibrary: the lowered step as a shared library with its packed
// entry, and step.json, for ddprt-step-runner on a machine without LLVM or
// MLIR.
//
//===----------------------------------------------------------------------===//

#include "ddp/Target/StepCompiler.h"

#include "ddprt-host/MemRef.h"

#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

#include <cstddef>

using namespace mlir;
using stephost::StepSignature;

// The host's descriptor words (ddprt-host/MemRef.h) are upstream's
// StridedMemRefType, which the lowered entry takes word by word and
// returns as a struct.
using RankTwoMemRef = StridedMemRefType<float, 2>;
static_assert(sizeof(RankTwoMemRef) ==
                  stephost::descriptorWordCount(2) * sizeof(int64_t),
              "a descriptor is descriptorWordCount(rank) words");
static_assert(offsetof(RankTwoMemRef, offset) == 2 * sizeof(int64_t) &&
                  offsetof(RankTwoMemRef, sizes) == 3 * sizeof(int64_t) &&
                  offsetof(RankTwoMemRef, strides) == 5 * sizeof(int64_t),
              "allocated, aligned, offset, sizes, strides");

namespace {

llvm::Error stepError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The descriptor words of `types`, as the host passes or takes them.
size_t wordCount(const std::vector<stephost::TensorSpec> &types) {
  size_t words = 0;
  for (const stephost::TensorSpec &type : types)
    words += stephost::descriptorWordCount(type.shape.size());
  return words;
}

/// Defines `_mlir_<entry>(void **)` around @entry exactly as MLIR's
/// ExecutionEngine does (packFunctionArguments): it loads each argument
/// through its pointer, calls @entry, and stores the result through the
/// pointer after the arguments. The lowered @entry must take and return
/// the descriptor words the host passes and reads (MemRef.h).
llvm::Error addPackedEntry(llvm::Module &module,
                           const StepSignature &signature) {
  const std::string &name = signature.entry;
  llvm::Function *function = module.getFunction(name);
  if (!function || function->isDeclaration())
    return stepError("the lowered module has no function @" + name);
  size_t argumentWords = wordCount(signature.arguments);
  size_t resultBytes = wordCount(signature.results) * sizeof(int64_t);
  llvm::Type *resultType = function->getReturnType();
  size_t returnedBytes =
      resultType->isVoidTy()
          ? 0
          : module.getDataLayout().getTypeAllocSize(resultType).getFixedValue();
  if (function->arg_size() != argumentWords || returnedBytes != resultBytes)
    return stepError(
        "the lowered @" + name + " takes " + llvm::Twine(function->arg_size()) +
        " words and returns " + llvm::Twine(returnedBytes) +
        " bytes; the host passes " + llvm::Twine(argumentWords) +
        " descriptor words and reads " + llvm::Twine(resultBytes) + " bytes");
  llvm::LLVMContext &context = module.getContext();
  llvm::IRBuilder<> builder(context);
  auto *type = llvm::FunctionType::get(builder.getVoidTy(), builder.getPtrTy(),
                                       /*isVarArg=*/false);
  auto *packed = cast<llvm::Function>(
      module.getOrInsertFunction("_mlir_" + name, type).getCallee());
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
  return llvm::Error::success();
}

} // namespace

void mlir::ddp::describeHostFunctions(llvm::Module &module) {
  for (llvm::StringRef name :
       {"_mlir_memref_to_llvm_alloc", "_mlir_memref_to_llvm_aligned_alloc"}) {
    llvm::Function *function = module.getFunction(name);
    if (!function)
      continue;
    function->addRetAttr(llvm::Attribute::NoAlias);
    // The calls keep it once bindHostFunctions calls through a slot.
    for (llvm::User *user : function->users())
      if (auto *call = dyn_cast<llvm::CallBase>(user))
        if (call->getCalledFunction() == function)
          call->addRetAttr(llvm::Attribute::NoAlias);
  }
}

namespace {

/// Routes every call of a host function (the runtime, memref allocation,
/// memrefCopy) through a slot `__ddp_host_<name>` that the loader fills
/// with what the backend needs (stephost::hostFunctions), as the JIT's
/// symbol map does. The library then needs nothing from the runtime at
/// load time. Appends the names to `names`.
llvm::Error bindHostFunctions(llvm::Module &module,
                              std::vector<std::string> &names) {
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
      if (!call || !call->isCallee(&use))
        return stepError("the step takes the address of @" + name +
                         " instead of calling it");
      llvm::IRBuilder<> builder(call);
      call->setCalledOperand(builder.CreateLoad(pointer, slot, name));
    }
    function.eraseFromParent();
    names.push_back(name);
  }
  return llvm::Error::success();
}

/// Code for the architecture of this machine, position independent: for
/// any CPU of it (the library runs on other machines; x86-64 without AVX)
/// unless `cpu` names one ("native": this machine's, its features
/// included).
llvm::Expected<std::unique_ptr<llvm::TargetMachine>>
createTargetMachine(StringRef cpuName) {
  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string message;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, message);
  if (!target)
    return stepError("no code generator for this machine: " + message);
  std::string cpu = cpuName.str(), features;
  if (cpu.empty()) {
    cpu = triple.getArch() == llvm::Triple::x86_64 ? "x86-64" : "generic";
  } else if (cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
    llvm::SubtargetFeatures host;
    for (const auto &[feature, enabled] : llvm::sys::getHostCPUFeatures())
      host.AddFeature(feature, enabled);
    features = host.getString();
  } else {
    // LLVM takes an unknown CPU with a warning on stderr, and compiles for
    // the baseline: refuse it instead.
    std::unique_ptr<llvm::MCSubtargetInfo> info(
        target->createMCSubtargetInfo(triple, "", ""));
    if (info && !info->isCPUStringValid(cpu))
      return stepError("--target-cpu: '" + cpu + "' is no " +
                       triple.getArchName().str() +
                       " CPU LLVM knows (e.g. x86-64-v3, skylake-avx512, "
                       "znver4, native)");
  }
  llvm::TargetOptions options;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, cpu, features, options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
}

} // namespace

llvm::Error mlir::ddp::writeLLVM(const llvm::Module &module,
                                 StringRef path) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return stepError("cannot write '" + path + "': " + ec.message());
  module.print(os, nullptr);
  os.close();
  if (os.has_error())
    return stepError("cannot write '" + path + "': " +
                     os.error().message());
  return llvm::Error::success();
}

namespace {

/// Writes `module` as an object file.
llvm::Error writeObject(llvm::Module &module, llvm::TargetMachine &machine,
                        const std::string &object) {
  std::error_code ec;
  llvm::raw_fd_ostream out(object, ec, llvm::sys::fs::OF_None);
  if (ec)
    return stepError("cannot write '" + object + "': " + ec.message());
  llvm::legacy::PassManager codegen;
  if (machine.addPassesToEmitFile(codegen, out, nullptr,
                                  llvm::CodeGenFileType::ObjectFile))
    return stepError("this machine's code generator cannot write objects");
  codegen.run(module);
  out.close();
  if (out.has_error()) {
    std::string message = out.error().message();
    out.clear_error();
    return stepError("cannot write '" + object + "': " + message);
  }
  return llvm::Error::success();
}

/// Links `object` into the shared library `library` with the system's
/// compiler driver, and with libomp if it has parallel loops (`openMP`).
llvm::Error linkLibrary(const std::string &object, const std::string &library,
                        bool openMP) {
  llvm::ErrorOr<std::string> linker = llvm::sys::findProgramByName("c++");
  if (!linker)
    linker = llvm::sys::findProgramByName("cc");
  if (!linker)
    return stepError("cannot link '" + library +
                     "': no c++ or cc on PATH (the object is '" + object +
                     "')");
  std::vector<StringRef> args{
      *linker, "-shared", "-Wl,-Bsymbolic", "-Wl,--as-needed",
      "-o",    library,   object,           "-lm"};
  if (openMP) {
#if defined(DDP_OPENMP_LIBRARY)
    args.push_back(DDP_OPENMP_LIBRARY);
#else
    return stepError("'" + library +
                     "' has parallel loops, and this build has no libomp "
                     "(libomp-22-dev) to link them with: compile the step "
                     "with --parallel-loops=false");
#endif
  }
  std::string message;
  int status = llvm::sys::ExecuteAndWait(*linker, args, std::nullopt, {}, 0, 0,
                                         &message);
  if (status != 0)
    return stepError(
        "cannot link '" + library + "' with " + *linker + ": " +
        (message.empty() ? "exit status " + std::to_string(status) : message));
  return llvm::Error::success();
}

} // namespace

llvm::Error mlir::ddp::compileStepLibrary(ModuleOp module,
                                          StepSignature &signature,
                                          const StepLibraryOptions &options) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  for (const stephost::StateSpec &state : signature.states) {
    ddprt_dtype dtype;
    if (!stephost::runtimeDtype(state.type.dtype, dtype))
      return stepError("state '" + state.name + "' has element type " +
                       stephost::elementTypeName(state.type.dtype) +
                       ", which the runtime does not keep");
  }
  if (failed(lowerStep(module, signature.entry, options.lowering)))
    return stepError("cannot lower '" + options.moduleName + "' (see above)");
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "step");
  if (!llvmModule)
    return stepError("cannot translate '" + options.moduleName +
                     "' to LLVM IR");
  llvm::Expected<std::unique_ptr<llvm::TargetMachine>> machine =
      createTargetMachine(options.targetCPU);
  if (!machine)
    return machine.takeError();
  llvmModule->setDataLayout((*machine)->createDataLayout());
  llvmModule->setTargetTriple((*machine)->getTargetTriple());
  if (llvm::Error e = addPackedEntry(*llvmModule, signature))
    return e;
  // Parallel loops fork libomp's threads.
  bool usesOpenMP = llvmModule->getFunction("__kmpc_fork_call") != nullptr;
  describeHostFunctions(*llvmModule);
  if (llvm::Error e = bindHostFunctions(*llvmModule, signature.hostFunctions))
    return e;
  // The library exports the entry, its packed form and the host slots;
  // its calls bind inside it (libc has a `step` too).
  std::string packedName = "_mlir_" + signature.entry;
  for (llvm::Function &function : *llvmModule) {
    if (function.isDeclaration() || function.hasLocalLinkage())
      continue;
    bool exported = function.getName() == signature.entry ||
                    function.getName() == packedName;
    function.setVisibility(exported ? llvm::GlobalValue::ProtectedVisibility
                                    : llvm::GlobalValue::HiddenVisibility);
    function.setDSOLocal(true);
  }
  if (llvm::verifyModule(*llvmModule, &llvm::errs()))
    return stepError("the step's LLVM IR does not verify");
  if (llvm::Error e =
          makeOptimizingTransformer(2, 0, machine->get())(llvmModule.get()))
    return stepError("cannot optimize: " + llvm::toString(std::move(e)));

  if (!options.llvmOutput.empty())
    if (llvm::Error e = writeLLVM(*llvmModule, options.llvmOutput))
      return e;

  const std::string &directory = options.directory;
  if (std::error_code ec = llvm::sys::fs::create_directories(directory))
    return stepError("cannot create '" + directory + "': " + ec.message());
  std::string object = directory + "/step.o";
  std::string library = directory + "/" + signature.library;
  if (llvm::Error e = writeObject(*llvmModule, **machine, object))
    return e;
  if (llvm::Error e = linkLibrary(object, library, usesOpenMP))
    return e;
  std::string message;
  if (!stephost::writeStepJson(directory + "/step.json", signature, message))
    return stepError(message);
  return llvm::Error::success();
}
