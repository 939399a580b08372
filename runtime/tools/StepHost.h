//===- StepHost.h - run a compiled step function on every rank --*- C++ -*-===//
//
// The host side of a step function compiled from the ddp dialect
// (ddp-lower-to-llvm), shared by ddp-run (which JIT-compiles the step) and
// ddprt-step-runner (which loads one that `ddp-run --emit-step` compiled
// ahead of time): the runtime job, the functions the compiled code calls,
// the step's signature (step.json), and the loop that reads .npy inputs,
// calls the step K times, writes its results and keeps the compression
// state. Plain C++17 over the runtime's C ABI; no LLVM, no MLIR.
//
// The compiled step is called through its packed entry `_mlir_<entry>`
// (MLIR's ExecutionEngine convention): one pointer per flattened argument
// word (each memref descriptor: allocated, aligned, offset, sizes,
// strides), then one pointer to the storage of the returned descriptors.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_TOOLS_STEPHOST_H
#define DDPRT_TOOLS_STEPHOST_H

#include "ddprt/ddprt.h"

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace stephost {

//===----------------------------------------------------------------------===//
// The step's signature
//===----------------------------------------------------------------------===//

/// A tensor the step takes or returns, or a state: its element type as a
/// .npy type string ("<f4"; "bf16" for bf16 states, which .npy cannot
/// hold) and its shape (-1 for a dynamic size).
struct TensorSpec {
  std::string dtype;
  std::vector<int64_t> shape;

  bool operator==(const TensorSpec &other) const {
    return dtype == other.dtype && shape == other.shape;
  }
  bool operator!=(const TensorSpec &other) const { return !(*this == other); }
};

/// The MLIR element type of a dtype ("<f4" -> "f32"); the dtype itself if
/// it is none we know.
std::string elementTypeName(const std::string &dtype);
/// The bytes of one element (0 if unknown).
size_t elementBytes(const std::string &dtype);
/// As MLIR prints it: tensor<64x?xf32>.
std::string typeString(const TensorSpec &type);
/// As NumPy prints a shape: (64, 32), (32,), ().
std::string shapeString(const std::vector<int64_t> &shape);
/// The runtime's dtype of a state's element type; false if none.
bool runtimeDtype(const std::string &dtype, ddprt_dtype &out);

/// A ddp.state of the module.
struct StateSpec {
  std::string name;
  TensorSpec type;
  /// For PowerSGD's step counter: the first compressed step (the steps
  /// before it are warm-up, a plain mean); -1 for other states.
  int64_t startIter = -1;
};

struct StepSignature {
  std::string entry = "step";
  std::vector<TensorSpec> arguments, results;
  /// The arguments' names: the gradient's name location in the module
  /// (`loc("fc1.weight")`), empty where it has none (then argumentName()
  /// says "arg<i>"). --inputs and {name} in --input use them.
  std::vector<std::string> argumentNames;
  std::vector<StateSpec> states;
  /// Host functions an ahead-of-time compiled step calls through a slot
  /// `__ddp_host_<name>` that the loader fills (see hostFunctions).
  std::vector<std::string> hostFunctions;
  /// The shared library of an ahead-of-time compiled step, relative to
  /// step.json's directory.
  std::string library = "libstep.so";
};

/// Argument `index`'s name: its name in the module, or "arg<index>".
std::string argumentName(const StepSignature &signature, size_t index);

/// step.json: {"format": 1, "entry", "library", "arguments": [{"name",
/// "dtype", "shape"}], "results": [{"dtype", "shape"}], "states": [{"name",
/// "dtype", "shape", "start_iter" (the step counter only)}],
/// "host_functions": [names]}. An argument's "name" is optional.
bool writeStepJson(const std::string &path, const StepSignature &signature,
                   std::string &error);
bool readStepJson(const std::string &path, StepSignature &signature,
                  std::string &error);

//===----------------------------------------------------------------------===//
// What compiled code calls
//===----------------------------------------------------------------------===//

/// The prefix of the slots through which an ahead-of-time compiled step
/// calls the host functions.
inline constexpr const char *kHostSlotPrefix = "__ddp_host_";

struct HostFunction {
  const char *name;
  void *address;
};

/// Every function compiled step code calls by name, and what it is bound
/// to: the runtime's C ABI; the memref allocation functions
/// (`_mlir_memref_to_llvm_alloc`, `_aligned_alloc`, `_free`: 64-byte
/// aligned host memory on the CPU backend, ddprt_alloc's managed memory on
/// CUDA, so the host code and the runtime share the buffers); `memrefCopy`
/// (strided copies); and, with `sharedMemory`, a ddprt_check that waits for
/// the device first (host code after a runtime call may read what it
/// wrote).
std::vector<HostFunction> hostFunctions(bool sharedMemory);
/// Whether compiled code's calls of `name` go to the host (by the list
/// above, independent of the backend).
bool isHostFunction(std::string_view name);

/// The packed entry `_mlir_<entry>(void **)`.
using PackedFunction = void (*)(void **);

//===----------------------------------------------------------------------===//
// The job
//===----------------------------------------------------------------------===//

/// The command line both tools share (ddp-run's options of the same names).
struct RunOptions {
  unsigned steps = 1;
  unsigned firstStep = 0;
  std::string backend = "cpu";
  /// --input: one pattern per argument, in order, or a single pattern with
  /// {name} for every argument.
  std::vector<std::string> inputs;
  /// --inputs: an .npz pattern whose arrays are named after the arguments.
  std::string inputArchive;
  std::vector<std::string> carries;
  std::string output;
  std::vector<unsigned> outputResults;
  std::string finalOutput;
  std::string checkpointLoad, checkpointSave;
  std::vector<std::string> setStates;
  std::string dumpState;
  std::string summaryJson;
  double timeoutSeconds = 60.0;
  /// What a DDPRT_NONFINITE from the step does: "skip" (warn on rank 0 and
  /// go on; the runtime kept that tensor's state) or "fail" (stop the job).
  std::string onNonfinite = "skip";
  bool quiet = false;
  /// --log-every: rank 0 prints every N-th step (and the last); 0: the
  /// first and the last step and one every few seconds between.
  unsigned logEvery = 0;
};

/// Seconds between two progress lines with --log-every=0.
inline constexpr double kLogSeconds = 5.0;

/// One line of stderr, written with a single write() when the statement
/// ends, so that the lines of several ranks do not interleave.
class Line {
public:
  explicit Line(const std::string &prefix) { os << prefix; }
  /// A line appended to `*sink` instead of written.
  static Line into(std::string *sink, const std::string &prefix) {
    Line line(prefix);
    line.sink = sink;
    return line;
  }
  Line(const Line &) = delete;
  Line(Line &&other)
      : os(std::move(other.os)), live(other.live), sink(other.sink) {
    other.live = false;
  }
  ~Line();
  template <typename T> Line &operator<<(const T &value) {
    os << value;
    return *this;
  }

private:
  std::ostringstream os;
  bool live = true;
  std::string *sink = nullptr;
};

/// Ends the process with an error if it has not been disarmed before a
/// deadline: bounds the steps in which MPI may block without a timeout of
/// its own (MPI_Init, the runtime's start, MPI_Finalize), so that a rank
/// that stopped (SIGSTOP, a debugger, a swapped-out node) cannot hang the
/// others there. A thread waits for the deadline; `_exit` needs no lock.
class Watchdog {
public:
  Watchdog();
  ~Watchdog();
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;
  /// After `seconds` (> 0) writes `message` to stderr and exits with
  /// status 1, unless disarm() or a later arm() comes first.
  void arm(double seconds, std::string message);
  void disarm();

private:
  struct State;
  State *state;
};

/// This rank's part of the job: the runtime context, the rank, and how
/// ranks agree on failures (every rank stops with status 1 when any
/// fails, never a hang: the agreement itself gives up after the timeout).
class Job {
public:
  explicit Job(std::string tool) : tool(std::move(tool)) {}

  /// Starts the runtime (which brings up MPI under mpirun). A bad
  /// --backend returns false after saying why; a runtime that does not
  /// start stops every rank.
  bool start(const RunOptions &options);
  /// Finalizes the runtime and MPI, within the timeout (MPI_Finalize waits
  /// for every rank).
  void finish();

  /// "TOOL: rank R: error: ..." and "TOOL: rank R: ...". While
  /// `rankIndependent` is set, error() writes "TOOL: error: ..." on rank 0
  /// (a message every rank would print the same, e.g. a parse error); the
  /// other ranks keep theirs in `deferred`, and agreeOrStop prints them
  /// only if rank 0 succeeded (then the failure was not the same on every
  /// rank: a file missing on one node).
  Line error() const;
  /// "TOOL: rank R: error: ...", also while `rankIndependent` is set.
  Line localError() const;
  Line note() const;
  /// Stops every rank if any failed (`what`: "to read the inputs").
  void agreeOrStop(bool succeeded, const std::string &what);
  /// As agreeOrStop, and in the same collective checks that every rank
  /// passes the same `values` (e.g. the shapes it read); returns false,
  /// without stopping, if they differ.
  bool agreeOrStopSame(bool succeeded, const std::string &what,
                       const std::vector<int64_t> &values);
  /// Stops the job now (MPI_Abort when several ranks run).
  [[noreturn]] void stop(int status);
  /// The largest `value` over the ranks (bounded by the timeout).
  double maxOverRanks(double value);

  /// Replaces {rank}, {step}, {step%N}, {result} and {name} in `pattern`.
  std::string expand(std::string_view pattern, int64_t step,
                     int64_t result = -1, std::string_view name = "") const;

  const std::string tool;
  int rank = 0, worldSize = 1;
  ddprt_context *context = nullptr;
  std::string backendName = "cpu";
  /// On the CUDA backend: buffers that host code and the runtime share are
  /// managed memory.
  bool sharedMemory = false;
  /// --timeout: how long a rank waits for the others in any collective,
  /// the host's own agreements included (0: forever).
  double timeoutSeconds = 60.0;
  /// --on-nonfinite=fail.
  bool failOnNonfinite = false;
  /// Whether the failures being checked are the same on every rank (see
  /// error()).
  bool rankIndependent = false;
  /// What ranks other than 0 said while `rankIndependent` was set.
  mutable std::string deferred;
  /// The step being run (for messages from inside it), -1 outside steps.
  int64_t currentStep = -1;

private:
  bool everyRankSucceeded(bool succeeded, const std::string &what);
  /// MPI_MAX over the ranks of `count` doubles in place, given up after the
  /// timeout (then the job stops with an error naming `what`).
  void maxOverRanksBounded(double *values, int count, const std::string &what);

  Watchdog watchdog;
};

/// Checks the options that need no signature (--backend, --on-nonfinite);
/// prints what is wrong.
bool checkRunOptions(const std::string &tool, const RunOptions &options);

/// Checks the command line (--input/--inputs, --carry, --output-results,
/// the files written at the end) against the signature; prints what is
/// wrong. Call on every rank, then agreeOrStop; or before launching the
/// ranks, with `job.rank` 0 and `job.worldSize` the ranks to launch.
/// `checkFiles` also checks that the files written after the last step can
/// be written (on this rank).
bool checkCommandLine(const Job &job, const StepSignature &signature,
                      const RunOptions &options, bool checkFiles = true);

/// Runs the steps: creates the states, loads the checkpoint, sets states,
/// runs `options.steps` steps (inputs read, step called, results written,
/// carried results fed back), then dumps the states, saves the checkpoint
/// and prints and writes the summary. Returns the exit status (0); any
/// failure stops every rank.
int runSteps(Job &job, const StepSignature &signature, PackedFunction step,
             const RunOptions &options);

} // namespace stephost

#endif // DDPRT_TOOLS_STEPHOST_H
