//===- StepCApi.cpp - run a compiled step from any language ---------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// ddprt_step.h: the loader of ddprt-step-runner (step.json, the host slots,
// the packed entry) and one call of the step on the caller's memory, for
// hosts that are not C++ (the Python package, through ctypes).
//
//===----------------------------------------------------------------------===//

#include "ddprt_step.h"

#include "HostFunctions.h"
#include "MemRef.h"
#include "Memory.h"
#include "RunOptions.h"
#include "StepSignature.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct ddprt_step {
  stephost::StepSignature signature;
  stephost::PackedFunction entry = nullptr;
  std::vector<size_t> argumentBytes, resultBytes;
  /// On the CUDA backend: the managed copies of the arguments that the
  /// step's host code and the runtime share (ddprt_alloc), kept between
  /// runs, and the context they belong to.
  std::vector<void *> staging;
  ddprt_context *stagingContext = nullptr;

  ~ddprt_step() { releaseStaging(); }
  void releaseStaging() {
    for (void *pointer : staging)
      ddprt_free(stagingContext, pointer);
    staging.clear();
    stagingContext = nullptr;
  }
};

namespace {

using namespace stephost;

ddprt_status say(char *message, size_t size, ddprt_status status,
                 const std::string &text) {
  if (message && size > 0)
    std::snprintf(message, size, "%s", text.c_str());
  return status;
}

/// What compiled code reported while a step ran (the process-wide error
/// handler; steps do not run concurrently).
struct Failure {
  ddprt_status status = DDPRT_OK;
  std::string where, message;
  int nonfinite = 0;
  std::string nonfiniteWhere;
};

void recordFailure(ddprt_context *context, ddprt_status status,
                   const char *where, void *user) {
  auto *failure = static_cast<Failure *>(user);
  if (status == DDPRT_NONFINITE) {
    if (failure->nonfinite++ == 0)
      failure->nonfiniteWhere =
          std::string(where ? where : "?") + ": " + ddprt_last_error(context);
    return;
  }
  if (failure->status != DDPRT_OK)
    return; // the first failure is the cause; later ones follow from it
  failure->status = status;
  failure->where = where ? where : "?";
  failure->message = context ? ddprt_last_error(context) : "no context";
}

bool staticShape(const TensorSpec &type) {
  return std::none_of(type.shape.begin(), type.shape.end(),
                      [](int64_t size) { return size < 0; });
}

size_t bytesOf(const TensorSpec &type) {
  size_t n = elementBytes(type.dtype);
  for (int64_t size : type.shape)
    n *= size_t(size);
  return n;
}

} // namespace

extern "C" {

ddprt_status ddprt_step_load(const char *directory, ddprt_step **result,
                             char *message, size_t size) {
  if (!result)
    return say(message, size, DDPRT_ERROR_INVALID_ARGUMENT,
               "the step pointer is null");
  *result = nullptr;
  if (!directory)
    return say(message, size, DDPRT_ERROR_INVALID_ARGUMENT,
               "the directory is null");
  auto step = std::make_unique<ddprt_step>();
  std::string error;
  std::string dir = directory;
  if (!readStepJson(dir + "/step.json", step->signature, error))
    return say(message, size, DDPRT_ERROR_IO, error);
  const StepSignature &signature = step->signature;
  for (const auto *list : {&signature.arguments, &signature.results})
    for (const TensorSpec &type : *list) {
      if (!staticShape(type))
        return say(message, size, DDPRT_ERROR_UNSUPPORTED,
                   dir + "/step.json: the step takes or returns " +
                       typeString(type) +
                       ", a dynamic shape: only steps of static shapes are "
                       "run from buffers");
      if (elementBytes(type.dtype) == 0)
        return say(message, size, DDPRT_ERROR_UNSUPPORTED,
                   dir + "/step.json: unknown element type '" + type.dtype +
                       "'");
    }
  for (const TensorSpec &type : signature.arguments)
    step->argumentBytes.push_back(bytesOf(type));
  for (const TensorSpec &type : signature.results)
    step->resultBytes.push_back(bytesOf(type));
  std::vector<std::string> errors;
  step->entry = loadStepLibrary(dir, signature, false, errors);
  if (!step->entry) {
    std::string text;
    for (const std::string &error : errors)
      text += (text.empty() ? "" : "; ") + error;
    return say(message, size, DDPRT_ERROR_IO, text);
  }
  *result = step.release();
  return DDPRT_OK;
}

void ddprt_step_free(ddprt_step *step) { delete step; }

void ddprt_step_release_buffers(ddprt_step *step) {
  if (step)
    step->releaseStaging();
}

int ddprt_step_set_threads(ddprt_context *context, int threads) {
  if (threads <= 0)
    threads = defaultComputeThreads(context ? ddprt_world_size(context) : 1);
  if (context)
    ddprt_set_compute_threads(context, threads);
  setLoopThreads(threads);
  return threads;
}

int ddprt_step_argument_count(const ddprt_step *step) {
  return step ? int(step->signature.arguments.size()) : 0;
}

int ddprt_step_result_count(const ddprt_step *step) {
  return step ? int(step->signature.results.size()) : 0;
}

ddprt_status ddprt_step_run(ddprt_step *step, ddprt_context *context,
                            void *const *arguments, void *const *results,
                            char *message, size_t size) {
  if (!step || !context)
    return say(message, size, DDPRT_ERROR_INVALID_ARGUMENT,
               "the step or the context is null");
  const StepSignature &signature = step->signature;
  if ((!arguments && !signature.arguments.empty()) ||
      (!results && !signature.results.empty()))
    return say(message, size, DDPRT_ERROR_INVALID_ARGUMENT,
               "the arguments or results array is null");
  for (size_t a = 0; a < signature.arguments.size(); ++a)
    if (!arguments[a] && step->argumentBytes[a])
      return say(message, size, DDPRT_ERROR_INVALID_ARGUMENT,
                 "argument " + std::to_string(a) + " ('" +
                     argumentName(signature, a) + "') is null");
  for (size_t r = 0; r < signature.results.size(); ++r)
    if (!results[r] && step->resultBytes[r])
      return say(message, size, DDPRT_ERROR_INVALID_ARGUMENT,
                 "result " + std::to_string(r) + " ('" +
                     resultName(signature, r) + "') has no destination");

  // On the CUDA backend the caller's buffers are device memory, which the
  // step's host code cannot touch: it runs on managed copies, and its
  // results are copied to the caller's buffers, all ordered on the
  // runtime's stream (the caller's, if it gave one: ddprt_options.stream).
  ddprt_options options;
  ddprt_default_options(&options);
  if (ddprt_status status = ddprt_get_options(context, &options))
    return say(message, size, status, ddprt_last_error(context));
  bool device = options.backend == DDPRT_BACKEND_CUDA;
  useSharedBuffers(device);
  std::vector<void *> inputs(arguments, arguments + signature.arguments.size());
  auto copy = [&](void *from, void *to, size_t bytes) {
    ddprt_buffer source{from, DDPRT_I8, int64_t(bytes)};
    ddprt_buffer target{to, DDPRT_I8, int64_t(bytes)};
    return ddprt_copy(context, &source, &target, 1);
  };
  if (device) {
    if (step->stagingContext != context)
      step->releaseStaging();
    step->stagingContext = context;
    for (size_t a = 0; a < inputs.size(); ++a) {
      if (step->staging.size() <= a) {
        void *pointer = nullptr;
        if (ddprt_status status = ddprt_alloc(
                context, std::max<size_t>(step->argumentBytes[a], 1), &pointer))
          return say(message, size, status, ddprt_last_error(context));
        step->staging.push_back(pointer);
      }
      if (step->argumentBytes[a])
        if (ddprt_status status =
                copy(arguments[a], step->staging[a], step->argumentBytes[a]))
          return say(message, size, status, ddprt_last_error(context));
      inputs[a] = step->staging[a];
    }
    // The step's host code may read an argument before its first runtime
    // call (whose barrier would wait for the copies): wait here.
    if (ddprt_status status = ddprt_host_barrier(context))
      return say(message, size, status, ddprt_last_error(context));
  }

  // The packed call: a pointer to each word of each argument's descriptor,
  // then one to the storage of the returned descriptors.
  std::vector<int64_t> words;
  for (size_t a = 0; a < signature.arguments.size(); ++a)
    appendDescriptor(words, inputs[a], inputs[a], signature.arguments[a].shape);
  size_t resultWords = 0;
  for (const TensorSpec &type : signature.results)
    resultWords += descriptorWordCount(type.shape.size());
  std::vector<int64_t> storage(std::max<size_t>(resultWords, 1), 0);
  std::vector<void *> packed;
  packed.reserve(words.size() + 1);
  for (int64_t &word : words)
    packed.push_back(&word);
  if (!signature.results.empty())
    packed.push_back(storage.data());

  Failure failure;
  ddprt_context *previous = ddprt_current_context();
  ddprt_set_current_context(context);
  // The handler is process-wide: steps of one process do not overlap.
  static std::mutex running;
  std::lock_guard<std::mutex> lock(running);
  ddprt_set_error_handler(recordFailure, &failure);
  step->entry(packed.data());
  ddprt_set_error_handler(nullptr, nullptr);
  ddprt_set_current_context(previous);

  // The results: copied out (memmove: a destination may be an argument the
  // step returned as it is), then their memory given back, once each, and
  // never an argument's.
  std::vector<void *> released;
  size_t at = 0;
  ddprt_status copied = DDPRT_OK;
  for (size_t r = 0; r < signature.results.size(); ++r) {
    const TensorSpec &type = signature.results[r];
    StridedMemRefView memref{storage.data() + at, type.shape.size()};
    at += descriptorWordCount(type.shape.size());
    if (failure.status == DDPRT_OK && copied == DDPRT_OK &&
        step->resultBytes[r]) {
      // A step that updated an argument in place returns its buffer: on
      // the CPU, nothing to copy when that argument is the destination.
      void *data = memref.data(elementBytes(type.dtype));
      if (device)
        copied = copy(data, results[r], step->resultBytes[r]);
      else if (data != results[r])
        std::memmove(results[r], data, step->resultBytes[r]);
    }
    void *allocated = memref.allocated();
    bool argument =
        std::find(inputs.begin(), inputs.end(), allocated) != inputs.end();
    if (allocated && !argument &&
        std::find(released.begin(), released.end(), allocated) ==
            released.end()) {
      released.push_back(allocated);
      releaseBuffer(allocated);
    }
  }
  if (failure.status != DDPRT_OK)
    return say(message, size, failure.status,
               failure.where + ": " + ddprt_status_string(failure.status) +
                   ": " + failure.message);
  if (copied != DDPRT_OK)
    return say(message, size, copied, ddprt_last_error(context));
  // The copies into the caller's buffers are enqueued on the runtime's
  // stream: the results are there when this returns, whatever stream the
  // caller reads them on next (PyTorch's DDP copies a bucket out on its own).
  if (device)
    if (ddprt_status status = ddprt_host_barrier(context))
      return say(message, size, status, ddprt_last_error(context));
  if (failure.nonfinite)
    return say(message, size, DDPRT_NONFINITE,
               std::to_string(failure.nonfinite) +
                   " tensor(s) had averaged values that are not finite; their "
                   "error feedback was left as it was (" +
                   failure.nonfiniteWhere + ")");
  return say(message, size, DDPRT_OK, "");
}

} // extern "C"
