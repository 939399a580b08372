//===- States.cpp - the compression state around the steps ----------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "States.h"

#include "Format.h"
#include "Npy.h"

namespace stephost {

namespace {
/// Copies between a state and host memory and waits for the copy; says
/// why not after `flag`.
bool copyAndWait(const Job &job, const ddprt_buffer &source,
                 ddprt_buffer &target, const char *flag) {
  if (ddprt_copy(job.context, &source, &target, 1) == DDPRT_OK &&
      ddprt_synchronize(job.context) == DDPRT_OK)
    return true;
  job.error() << flag << ": " << ddprt_last_error(job.context) << "\n";
  return false;
}
} // namespace

StateHandles createStates(Job &job, const StepSignature &signature) {
  ddprt_context *context = job.context;
  bool stateOk = true;
  StateHandles stateHandles;
  for (const StateSpec &state : signature.states) {
    ddprt_dtype dtype;
    int64_t numel = 1;
    for (int64_t d : state.type.shape)
      numel *= d;
    ddprt_state *handle = nullptr;
    if (!runtimeDtype(state.type.dtype, dtype)) {
      job.error() << "cannot create state '" << state.name << "': its "
                  << "element type " << elementTypeName(state.type.dtype)
                  << " is not one the runtime keeps\n";
      stateOk = false;
      continue;
    }
    // A name from step.json may hold a NUL (JSON's \u0000), which the C
    // string would cut: two states would become one.
    if (const char *problem =
            ddprt_name_problem(state.name.data(), state.name.size())) {
      job.error() << "cannot create state '" << printableText(state.name)
                  << "': its name cannot be a state's: " << problem << "\n";
      stateOk = false;
      continue;
    }
    if (ddprt_state_get(context, state.name.c_str(), dtype, numel, &handle) !=
        DDPRT_OK) {
      job.error() << "cannot create state '" << state.name
                  << "': " << ddprt_last_error(context) << "\n";
      stateOk = false;
      continue;
    }
    stateHandles[state.name] = handle;
  }
  job.agreeOrStop(stateOk, "to create the states");
  return stateHandles;
}

namespace {

/// Whether a float state holds only finite values (counters and i8
/// payloads always do). The runtime looks, in backend memory; a look that
/// fails is said and counts as not finite.
bool stateIsFinite(Job &job, ddprt_state *state) {
  ddprt_buffer buffer = ddprt_state_buffer(state);
  bool isFloat = buffer.dtype == DDPRT_F32 || buffer.dtype == DDPRT_F16 ||
                 buffer.dtype == DDPRT_BF16 || buffer.dtype == DDPRT_F64;
  int32_t finite = 1, nonzero = 0;
  if (!isFloat || buffer.numel == 0)
    return true;
  if (ddprt_inspect(job.context, &buffer, 1, &finite, &nonzero) != DDPRT_OK ||
      ddprt_synchronize(job.context) != DDPRT_OK) {
    job.error() << "cannot look at a state's values: "
                << ddprt_last_error(job.context) << "\n";
    return false;
  }
  return finite != 0;
}

/// The non-finite policy for a state set from outside (docs/runtime.md,
/// NaN and Inf): a state that is not finite would stay so (an error
/// feedback of NaN makes every later step NaN), so it is refused, not kept.
bool badState(const Job &job, const std::string &source,
              const std::string &name) {
  job.error() << source << " holds values that are not finite (NaN or Inf) "
              << "for state '" << name << "', which would stay so: a state "
              << "is finite or it is refused\n";
  return false;
}

} // namespace

void loadCheckpoint(Job &job, const StateHandles &stateHandles,
                    const RunOptions &options) {
  if (options.checkpointLoad.empty())
    return;
  std::string path = job.expand(options.checkpointLoad, -1);
  job.bound("loading the checkpoint '" + path + "'");
  bool loaded = ddprt_checkpoint_load(job.context, path.c_str()) == DDPRT_OK;
  job.endBound();
  if (!loaded)
    job.error() << "cannot load checkpoint: " << ddprt_last_error(job.context)
                << "\n";
  else
    for (const auto &[name, state] : stateHandles)
      if (!stateIsFinite(job, state))
        loaded = badState(job, "checkpoint '" + path + "'", name);
  job.agreeOrStop(loaded, "to load the checkpoint");
}

void setStates(Job &job, const StepSignature &signature,
               const StateHandles &stateHandles, const RunOptions &options) {
  bool setOk = true;
  for (const std::string &setting : options.setStates) {
    size_t equals = setting.find('=');
    std::string name = setting.substr(0, equals);
    std::string pattern =
        equals == std::string::npos ? "" : setting.substr(equals + 1);
    auto found = stateHandles.find(name);
    const StateSpec *info = nullptr;
    for (const StateSpec &s : signature.states)
      if (s.name == name)
        info = &s;
    if (found == stateHandles.end() || !info) {
      std::vector<std::string> names;
      for (const StateSpec &s : signature.states)
        names.push_back(s.name);
      job.error() << "--set-state=" << setting << ": the module has no state '"
                  << name << "' (its states: "
                  << (names.empty() ? std::string("none")
                                    : listNames(names, 12))
                  << ")\n";
      setOk = false;
      continue;
    }
    std::string path = job.expand(pattern, -1), error;
    npy::Array array;
    // The type from the header, before the data is read.
    auto check = [&](const npy::Array &header, std::string &why) {
      if (header.descr == info->type.dtype && header.shape == info->type.shape)
        return true;
      why = "'" + path + "' holds " + header.descr + " " +
            shapeString(header.shape) + " but state '" + name + "' is " +
            info->type.dtype + " " + shapeString(info->type.shape);
      return false;
    };
    job.bound("reading '" + path + "' for --set-state");
    bool read = npy::read(path, array, error, check);
    job.endBound();
    if (!read) {
      job.error() << "--set-state: " << error << "\n";
      setOk = false;
      continue;
    }
    ddprt_buffer target = ddprt_state_buffer(found->second);
    ddprt_buffer source = target;
    source.data = array.data.data();
    if (!copyAndWait(job, source, target, "--set-state"))
      setOk = false;
    else if (!stateIsFinite(job, found->second))
      setOk = badState(job, "--set-state: '" + path + "'", name);
  }
  job.agreeOrStop(setOk, "to set the states");
}

bool dumpStates(const Job &job, const StepSignature &signature,
                const StateHandles &stateHandles, const RunOptions &options) {
  if (options.dumpState.empty())
    return true;
  bool ok = true;
  for (const StateSpec &state : signature.states) {
    if (npy::elementSize(state.type.dtype) == 0) {
      job.error() << "--dump-state: state '" << state.name << "' is "
                  << elementTypeName(state.type.dtype)
                  << ", which .npy cannot hold\n";
      ok = false;
      continue;
    }
    ddprt_buffer source = ddprt_state_buffer(stateHandles.at(state.name));
    npy::Array array;
    array.descr = state.type.dtype;
    array.shape = state.type.shape;
    array.data.resize(size_t(source.numel) * ddprt_dtype_size(source.dtype));
    ddprt_buffer target = source;
    target.data = array.data.data();
    if (!copyAndWait(job, source, target, "--dump-state")) {
      ok = false;
      continue;
    }
    std::string error;
    if (!npy::write(job.expand(options.dumpState, -1, -1, state.name), array,
                    error)) {
      job.error() << "--dump-state: " << error << "\n";
      ok = false;
    }
  }
  return ok;
}

bool saveCheckpoint(const Job &job, const RunOptions &options) {
  if (options.checkpointSave.empty())
    return true;
  std::string path = job.expand(options.checkpointSave, -1);
  if (ddprt_checkpoint_save(job.context, path.c_str()) != DDPRT_OK) {
    job.error() << "cannot save checkpoint: " << ddprt_last_error(job.context)
                << "\n";
    return false;
  }
  return true;
}

} // namespace stephost
