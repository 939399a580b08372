//===- ddp-run.cpp - run a compiled step on every rank --------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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
// Inputs and outputs are .npy files (or one .npz per rank and step, keyed
// by the gradients' names); {rank}, {step}, {step%N}, {result} and {name}
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
// both tools share; the compilation is the StepCompiler library
// (include/ddp/Target/StepCompiler.h), so this file is the command line
// and the MPI launch.
//
//===----------------------------------------------------------------------===//

#include "StepHost.h"
#include "ddp/Target/StepCompiler.h"
#include "ddp/Version.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <optional>

using namespace mlir;
namespace cl = llvm::cl;
using stephost::Line;
using stephost::StepSignature;

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
                  cl::desc("Write results of every step: a .npy each "
                           "({rank}, {step}, {result}, {name}: the result's "
                           "name, the gradient's), or one .npz per rank and "
                           "step keyed by name (a path ending in .npz); "
                           "every file gets its own path, or the run is "
                           "refused before it starts"),
                  cl::cat(category));
static cl::list<unsigned>
    outputResults("output-results",
                  cl::desc("Which results --output writes (default: all)"),
                  cl::CommaSeparated, cl::cat(category));
static cl::opt<std::string> finalOutputPattern(
    "final-output",
    cl::desc("Write every result of the last step, as --output does "
             "({rank}, {step}, {result}, {name}; or an .npz)"),
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
static cl::opt<std::string> hostfile(
    "hostfile",
    cl::desc("With --np: start the ranks on the hosts this mpirun hostfile "
             "lists ('HOST slots=N' per line); each rank reads and writes "
             "its own host's files"),
    cl::value_desc("file"), cl::cat(category));
static cl::opt<double> timeoutSeconds(
    "timeout", cl::init(60.0),
    cl::desc("Fail a collective that has not finished after this many "
             "seconds (0: wait forever; default: 60)"),
    cl::cat(category));
static cl::opt<double> stepTimeoutSeconds(
    "step-timeout", cl::init(0.0),
    cl::desc("Stop the job when one step runs longer than this many seconds "
             "on a rank, its own loops included (a hook whose loop never "
             "ends); 0: no bound (the default)"),
    cl::cat(category));
static cl::opt<std::string> simulatedLink(
    "simulated-link", cl::value_desc("GBPS,LATENCY_US"),
    cl::desc("Measuring tool: hold each collective as a network link of "
             "this bandwidth (Gb/s) and latency (microseconds) would, e.g. "
             "10,20 (CPU backend; DDPRT_SIMULATED_LINK overrides it; the "
             "summary and --summary-json say so; default: off)"),
    cl::cat(category));
static cl::opt<bool> runtimeChecks(
    "runtime-checks", cl::init(true),
    cl::desc("Check the step's indices, slices, shapes and integer division "
             "as it runs: a step that breaks one stops with the op's "
             "location (ddp-lower-to-llvm{runtime-checks}); "
             "--runtime-checks=false leaves them out (also of --emit-step)"),
    cl::cat(category));
static cl::opt<int> threads(
    "threads-per-rank", cl::init(0),
    cl::desc("Threads of each rank's compute (its parallel loops and the "
             "runtime's BLAS); 0, the default: this node's cores divided by the ranks on it, less one "
             "for the rank's communication thread (at least 1)"),
    cl::cat(category));
static cl::opt<mlir::ddp::ContractionLowering> contractions(
    "contractions", cl::init(mlir::ddp::ContractionLowering::blas),
    cl::desc("How the step's f32 matmuls run "
             "(ddp-lower-to-llvm{contractions}; also of --emit-step)"),
    cl::values(clEnumValN(mlir::ddp::ContractionLowering::blas, "blas",
                          "the runtime's BLAS (default)"),
               clEnumValN(mlir::ddp::ContractionLowering::loops, "loops",
                          "generated loops, sums in source order")),
    cl::cat(category));
static cl::opt<mlir::ddp::SumOrder> sumOrder(
    "sum-order", cl::init(mlir::ddp::SumOrder::vectorized),
    cl::desc("In what order the step's own reductions add "
             "(ddp-lower-to-llvm{sum-order}; also of --emit-step)"),
    cl::values(clEnumValN(mlir::ddp::SumOrder::vectorized, "vectorized",
                          "partial sums per vector lane (default)"),
               clEnumValN(mlir::ddp::SumOrder::source, "source",
                          "each sum in the order of its loop")),
    cl::cat(category));
static cl::opt<bool> parallelLoops(
    "parallel-loops", cl::init(true),
    cl::desc("Run the step's large loop nests on --threads-per-rank threads "
             "(ddp-lower-to-llvm{parallel-loops}; also of --emit-step); "
             "--parallel-loops=false keeps them on one. Unless given, a "
             "rank with one thread compiles plain loops"),
    cl::cat(category));
static cl::opt<mlir::ddp::LoweringTarget> target(
    "target",
    cl::desc("Where the step's own loops run (ddp-lower-to-llvm{target}; "
             "also of --emit-step). Default: cuda with --backend=cuda, "
             "cpu otherwise"),
    cl::values(clEnumValN(mlir::ddp::LoweringTarget::cpu, "cpu",
                          "on the host, over memory the device shares"),
               clEnumValN(mlir::ddp::LoweringTarget::cuda, "cuda",
                          "as GPU kernels (PTX) the runtime launches on its "
                          "compute stream: --backend=cuda only")),
    cl::init(mlir::ddp::LoweringTarget::cpu), cl::cat(category));
static cl::opt<bool> splitReductions(
    "split-reductions", cl::init(false), cl::Hidden,
    cl::desc("Reduce minimums and maximums over long loops in parallel "
             "chunks, as steps lowered for the GPU do "
             "(ddp-lower-to-llvm{split-reductions}): for checking on the "
             "CPU that the results are the same bits"),
    cl::cat(category));
static cl::opt<bool> scaleWorkarounds(
    "scale-workarounds", cl::init(true), cl::Hidden,
    cl::desc("For measuring upstream: --scale-workarounds=false lowers the "
             "step with upstream's passes alone "
             "(ddp-lower-to-llvm{scale-workarounds}), the same program, "
             "slower to compile when the step is large"),
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

static cl::opt<std::string> targetCPU(
    "target-cpu", cl::value_desc("CPU"),
    cl::desc("With --emit-step: the CPU the library is compiled for, "
             "'native' (this machine's) or a name LLVM knows (x86-64-v3, "
             "skylake-avx512, znver4, ...); default: any of this "
             "architecture (x86-64 without AVX). The JIT always compiles "
             "for this machine's CPU"),
    cl::cat(category));
static cl::opt<std::string> emitLLVM(
    "emit-llvm", cl::value_desc("FILE"),
    cl::desc("Also write the step's optimized LLVM IR, as it is compiled, "
             "to FILE (rank 0's, when running)"),
    cl::cat(category));

//===----------------------------------------------------------------------===//
// The module
//===----------------------------------------------------------------------===//

namespace {

/// Says each of `error`'s messages on a line of its own.
void report(llvm::Error error, llvm::function_ref<Line()> line) {
  llvm::handleAllErrors(std::move(error), [&](const llvm::ErrorInfoBase &e) {
    line() << e.message() << "\n";
  });
}

/// A context with the dialects and translations a step needs;
/// diagnostics go to stderr through the caller's handler.
std::unique_ptr<MLIRContext> makeContext() {
  auto context =
      std::make_unique<MLIRContext>(mlir::ddp::makeStepCompilerRegistry());
  context->loadAllAvailableDialects();
  return context;
}

/// Parses `inputFile`, chooses the entry (--entry or the only one that
/// synchronizes gradients) and reads its signature: what fails the same
/// way on every rank.
OwningOpRef<ModuleOp> loadStep(MLIRContext &context, llvm::SourceMgr &sourceMgr,
                               StepSignature &signature,
                               llvm::function_ref<Line()> error) {
  std::string message;
  std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(inputFile, &message);
  if (!file) {
    error() << message << "\n";
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return nullptr;
  std::optional<StringRef> chosen;
  if (entry.getNumOccurrences())
    chosen = entry.getValue();
  llvm::Expected<StepSignature> read =
      mlir::ddp::readStepSignature(*module, chosen);
  if (!read) {
    report(read.takeError(), error);
    return nullptr;
  }
  signature = std::move(*read);
  return module;
}

//===----------------------------------------------------------------------===//
// --emit-step: ahead of time
/// ddp-lower-to-llvm's options, from the command line.
mlir::ddp::LoweringOptions loweringOptions() {
  mlir::ddp::LoweringOptions options;
  options.runtimeChecks = runtimeChecks;
  options.contractions = contractions;
  options.sumOrder = sumOrder;
  options.parallelLoops = parallelLoops;
  options.scaleWorkarounds = scaleWorkarounds;
  options.target = target;
  options.splitReductions = splitReductions;
  if (!target.getNumOccurrences() && backend == "cuda")
    options.target = mlir::ddp::LoweringTarget::cuda;
  return options;
}

//===----------------------------------------------------------------------===//

int emitStepLibrary() {
  auto error = [] { return Line("ddp-run: error: "); };
  std::unique_ptr<MLIRContext> context = makeContext();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, context.get());
  StepSignature signature;
  OwningOpRef<ModuleOp> module =
      loadStep(*context, sourceMgr, signature, error);
  if (!module)
    return 1;
  mlir::ddp::StepLibraryOptions options;
  options.directory = emitStep;
  options.moduleName = inputFile;
  options.lowering = loweringOptions();
  options.targetCPU = targetCPU;
  options.llvmOutput = emitLLVM;
  if (llvm::Error e =
          mlir::ddp::compileStepLibrary(*module, signature, options)) {
    report(std::move(e), error);
    return 1;
  }
  if (!quiet)
    llvm::outs() << "ddp-run: wrote " << options.directory << "/"
                 << signature.library << " and " << options.directory
                 << "/step.json (@" << signature.entry << ": "
                 << signature.arguments.size() << " arguments, "
                 << signature.results.size() << " results, "
                 << signature.states.size() << " states)\n";
  return 0;
}

//===----------------------------------------------------------------------===//
// Running: JIT
//===----------------------------------------------------------------------===//

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
  options.stepTimeoutSeconds = stepTimeoutSeconds;
  options.threads = threads;
  options.simulatedLink = simulatedLink;
  options.quiet = quiet;
  options.onNonfinite = onNonfinite;
  return options;
}

/// Before launching the ranks with --np: what would fail the same way on
/// every rank (options, the module, the entry, the command line against
/// its signature) is said here, once, and nothing is launched.
bool checkBeforeLaunch(const stephost::RunOptions &options,
                       const stephost::LaunchOptions &launch) {
  if (!stephost::checkRunOptions("ddp-run", options))
    return false;
  std::unique_ptr<MLIRContext> context = makeContext();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, context.get());
  auto error = [] { return Line("ddp-run: error: "); };
  StepSignature signature;
  if (!loadStep(*context, sourceMgr, signature, error))
    return false;
  stephost::Job job("ddp-run");
  job.worldSize = int(launch.ranks);
  job.rankIndependent = true;
  // On several hosts each rank reads its own host's files, and checks
  // them itself.
  return stephost::checkCommandLine(job, signature, options,
                                    /*checkFiles=*/false) &&
         (!launch.hostfile.empty() ||
          stephost::checkInputsBeforeLaunch(job, signature, options));
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
  if (targetCPU.getNumOccurrences()) {
    llvm::errs() << "ddp-run: error: --target-cpu is for --emit-step (the "
                    "JIT compiles for this machine's CPU)\n";
    return 1;
  }
  if (target == mlir::ddp::LoweringTarget::cuda && backend != "cuda") {
    llvm::errs() << "ddp-run: error: --target=cuda compiles the step's loops "
                    "into GPU kernels, which only --backend=cuda runs\n";
    return 1;
  }
  stephost::RunOptions options = runOptions();
  // --np and --hostfile (cl accepts them; the host library reads and
  // checks them, as for ddprt-step-runner).
  stephost::LaunchOptions launch;
  std::string launchError;
  if (!stephost::parseLaunchOptions(argc, argv, launch, launchError)) {
    llvm::errs() << "ddp-run: error: " << launchError << "\n";
    return 1;
  }
  launch.timeoutSeconds = options.timeoutSeconds;
  if (launch.ranks > 0 && !stephost::insideMpiJob())
    return checkBeforeLaunch(options, launch)
               ? stephost::launchUnderMpirun("ddp-run", argc, argv, launch)
               : 1;

  // Start the runtime first: it brings up MPI, and every later failure can
  // then be agreed on by all ranks.
  stephost::Job job("ddp-run");
  if (!job.start(options))
    return 1;
  auto error = [&] { return job.error(); };

  // Parse, check, lower and compile (every rank; it is deterministic, so
  // each failure is the same on every rank and rank 0 alone says it).
  job.rankIndependent = true;
  std::unique_ptr<MLIRContext> context = makeContext();
  llvm::SourceMgr sourceMgr;
  std::optional<SourceMgrDiagnosticHandler> diagnostics;
  std::optional<ScopedDiagnosticHandler> silence;
  if (job.rank == 0)
    diagnostics.emplace(sourceMgr, context.get());
  else
    // Kept with this rank's deferred messages: printed only if rank 0,
    // which says the same for everyone, did not fail.
    silence.emplace(context.get(), [&job](Diagnostic &diagnostic) {
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
      loadStep(*context, sourceMgr, signature, error);
  job.agreeOrStop(bool(module), "to read the module");
  job.agreeOrStop(stephost::checkCommandLine(job, signature, options),
                  "to check the command line");

  // A parallel loop on one thread is slower than the plain loop (the
  // thread's function knows less about its buffers): unless asked for,
  // parallel loops only where a rank has threads to run them.
  mlir::ddp::LoweringOptions lowering = loweringOptions();
  if (!parallelLoops.getNumOccurrences() && job.computeThreads <= 1)
    lowering.parallelLoops = false;
  bool lowered =
      succeeded(mlir::ddp::lowerStep(*module, signature.entry, lowering));
  if (!lowered)
    error() << "cannot lower '" << inputFile << "' (see above)\n";
  job.agreeOrStop(lowered, "to lower the module");

  // The same functions, bound the same way, as ddprt-step-runner gives an
  // ahead-of-time compiled step.
  auto engine = mlir::ddp::jitCompileStep(
      *module, stephost::hostFunctions(),
      job.rank == 0 ? llvm::StringRef(emitLLVM) : llvm::StringRef());
  if (!engine)
    report(engine.takeError(), error);
  job.agreeOrStop(bool(engine), "to JIT-compile");
  auto packed = mlir::ddp::lookupStepEntry(**engine, signature.entry);
  if (!packed)
    report(packed.takeError(), error);
  job.agreeOrStop(bool(packed), "to find the entry point");
  job.rankIndependent = false;
  return stephost::runSteps(job, signature, *packed, options);
}
