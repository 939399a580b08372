//===- StepSignature.h - a compiled step's signature (step.json) -*- C++
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//-*-===//
//
// What the host knows of a step function compiled from the ddp dialect: its
// entry, its arguments and results (a .npy element type and a shape each),
// the states it keeps in the runtime, and the host functions an ahead-of-time
// compiled step calls; written by `ddp-run --emit-step` as step.json and read
// back by ddprt-step-runner.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_STEPSIGNATURE_H
#define DDPRT_HOST_STEPSIGNATURE_H

#include "ddprt/ddprt.h"

#include <cstdint>
#include <string>
#include <vector>

namespace stephost {

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
  /// The arguments' names: the gradient's `ddp.name` in the module (or its
  /// name location, `loc("fc1.weight")`), empty where it has none (then
  /// argumentName() says "arg<i>"). --inputs and {name} in --input use them.
  std::vector<std::string> argumentNames;
  /// The results' names (`ddp.name`: the gradient a result is the average
  /// of), empty where none (resultName() says "result<i>"). {name} in
  /// --output and the arrays of an .npz output use them.
  std::vector<std::string> resultNames;
  std::vector<StateSpec> states;
  /// The number of ranks the step's collectives were written for (a
  /// shard.grid's size, `ddp.world_size`); 0: any.
  int64_t worldSize = 0;
  /// Host functions an ahead-of-time compiled step calls through a slot
  /// `__ddp_host_<name>` that the loader fills (see hostFunctions).
  std::vector<std::string> hostFunctions;
  /// The shared library of an ahead-of-time compiled step, relative to
  /// step.json's directory.
  std::string library = "libstep.so";
};

/// Argument `index`'s name: its name in the module, or "arg<index>".
std::string argumentName(const StepSignature &signature, size_t index);
/// Whether argument `index` has a name in the module.
bool argumentHasName(const StepSignature &signature, size_t index);
/// Result `index`'s name: its name in the module, or "result<index>".
std::string resultName(const StepSignature &signature, size_t index);

/// step.json: {"format": 1, "entry", "library", "arguments": [{"name",
/// "dtype", "shape"}], "results": [{"name", "dtype", "shape"}], "states": [{"name",
/// "dtype", "shape", "start_iter" (the step counter only)}],
/// "host_functions": [names], "world_size" (optional)}. An argument's or
/// result's "name" is optional.
bool writeStepJson(const std::string &path, const StepSignature &signature,
                   std::string &error);
bool readStepJson(const std::string &path, StepSignature &signature,
                  std::string &error);

} // namespace stephost

#endif // DDPRT_HOST_STEPSIGNATURE_H
