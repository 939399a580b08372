//===- StepHost.cpp - run a compiled step function on every rank ----------===//

#include "StepHost.h"

#include "Npy.h"

#if defined(DDPRT_HAVE_MPI)
#include <mpi.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sched.h>
#include <set>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace stephost {

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

namespace {
struct DtypeInfo {
  const char *dtype;
  const char *element;
  size_t bytes;
};
const DtypeInfo kDtypes[] = {
    {"<f4", "f32", 4}, {"<f8", "f64", 8},   {"<f2", "f16", 2},
    {"<i8", "i64", 8}, {"<i4", "i32", 4},   {"<i2", "i16", 2},
    {"|i1", "i8", 1},  {"bf16", "bf16", 2},
};
} // namespace

std::string elementTypeName(const std::string &dtype) {
  for (const DtypeInfo &info : kDtypes)
    if (dtype == info.dtype)
      return info.element;
  return dtype;
}

size_t elementBytes(const std::string &dtype) {
  for (const DtypeInfo &info : kDtypes)
    if (dtype == info.dtype)
      return info.bytes;
  return 0;
}

std::string typeString(const TensorSpec &type) {
  std::string text = "tensor<";
  for (int64_t d : type.shape)
    text += (d < 0 ? std::string("?") : std::to_string(d)) + "x";
  return text + elementTypeName(type.dtype) + ">";
}

std::string shapeString(const std::vector<int64_t> &shape) {
  return npy::shapeString(shape);
}

bool runtimeDtype(const std::string &dtype, ddprt_dtype &out) {
  if (dtype == "<f4")
    out = DDPRT_F32;
  else if (dtype == "<f2")
    out = DDPRT_F16;
  else if (dtype == "bf16")
    out = DDPRT_BF16;
  else if (dtype == "<f8")
    out = DDPRT_F64;
  else if (dtype == "<i8")
    out = DDPRT_I64;
  else
    return false;
  return true;
}

//===----------------------------------------------------------------------===//
// step.json
//===----------------------------------------------------------------------===//

namespace {

std::string quoted(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (uint8_t(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\u%04x", unsigned(c));
      out += escape;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string shapeJson(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// A JSON value: just enough of JSON for step.json.
struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json *get(const std::string &key) const {
    for (const auto &[k, v] : members)
      if (k == key)
        return &v;
    return nullptr;
  }
};

class JsonParser {
public:
  explicit JsonParser(std::string_view text) : text(text) {}

  bool parse(Json &value, std::string &error) {
    if (!parseValue(value, 0) || (skip(), at != text.size())) {
      if (message.empty())
        message = "unexpected text";
      error = message + " at offset " + std::to_string(at);
      return false;
    }
    return true;
  }

private:
  void skip() {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\n' ||
                                text[at] == '\t' || text[at] == '\r'))
      ++at;
  }
  bool fail(const char *why) {
    if (message.empty())
      message = why;
    return false;
  }
  bool literal(std::string_view word) {
    if (text.substr(at, word.size()) != word)
      return fail("unexpected text");
    at += word.size();
    return true;
  }
  bool parseString(std::string &out) {
    if (at >= text.size() || text[at] != '"')
      return fail("expected a string");
    ++at;
    while (at < text.size() && text[at] != '"') {
      char c = text[at++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at >= text.size())
        return fail("unterminated string");
      char e = text[at++];
      switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'u': {
        if (at + 4 > text.size())
          return fail("bad escape");
        unsigned code = 0;
        for (int i = 0; i < 4; ++i) {
          char h = text[at++];
          code = code * 16 + (h >= '0' && h <= '9'   ? unsigned(h - '0')
                              : h >= 'a' && h <= 'f' ? unsigned(h - 'a' + 10)
                              : h >= 'A' && h <= 'F' ? unsigned(h - 'A' + 10)
                                                     : 99u);
          if (code >= 0x10000u)
            return fail("bad escape");
        }
        if (code >= 0x80)
          return fail("non-ASCII escapes are not supported");
        out += char(code);
        break;
      }
      default:
        out += e;
        break;
      }
    }
    if (at >= text.size())
      return fail("unterminated string");
    ++at;
    return true;
  }
  bool parseValue(Json &value, int depth) {
    if (depth > 32)
      return fail("nested too deeply");
    skip();
    if (at >= text.size())
      return fail("unexpected end");
    char c = text[at];
    if (c == '{') {
      value.kind = Json::Object;
      ++at;
      skip();
      if (at < text.size() && text[at] == '}')
        return ++at, true;
      for (;;) {
        skip();
        std::string key;
        if (!parseString(key))
          return false;
        skip();
        if (at >= text.size() || text[at] != ':')
          return fail("expected ':'");
        ++at;
        Json member;
        if (!parseValue(member, depth + 1))
          return false;
        value.members.emplace_back(std::move(key), std::move(member));
        skip();
        if (at < text.size() && text[at] == ',') {
          ++at;
          continue;
        }
        if (at < text.size() && text[at] == '}')
          return ++at, true;
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      value.kind = Json::Array;
      ++at;
      skip();
      if (at < text.size() && text[at] == ']')
        return ++at, true;
      for (;;) {
        Json item;
        if (!parseValue(item, depth + 1))
          return false;
        value.items.push_back(std::move(item));
        skip();
        if (at < text.size() && text[at] == ',') {
          ++at;
          continue;
        }
        if (at < text.size() && text[at] == ']')
          return ++at, true;
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      value.kind = Json::String;
      return parseString(value.text);
    }
    if (c == 't' || c == 'f') {
      value.kind = Json::Bool;
      value.boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n')
      return literal("null");
    size_t start = at;
    while (at < text.size() &&
           std::strchr("+-0123456789.eE", text[at]) != nullptr)
      ++at;
    if (start == at)
      return fail("unexpected text");
    std::string number(text.substr(start, at - start));
    char *end = nullptr;
    value.kind = Json::Number;
    value.number = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size())
      return fail("bad number");
    return true;
  }

  std::string_view text;
  size_t at = 0;
  std::string message;
};

bool readFile(const std::string &path, std::string &bytes, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) {
    error = "cannot read '" + path + "'";
    return false;
  }
  bytes = os.str();
  return true;
}

bool jsonShape(const Json *value, std::vector<int64_t> &shape) {
  if (!value || value->kind != Json::Array)
    return false;
  shape.clear();
  for (const Json &d : value->items) {
    if (d.kind != Json::Number || d.number != std::floor(d.number) ||
        d.number < -1 || d.number > 9.0e15)
      return false;
    shape.push_back(int64_t(d.number));
  }
  return true;
}

bool jsonTensor(const Json &value, TensorSpec &type, bool dynamicAllowed) {
  if (value.kind != Json::Object)
    return false;
  const Json *dtype = value.get("dtype");
  if (!dtype || dtype->kind != Json::String || elementBytes(dtype->text) == 0)
    return false;
  type.dtype = dtype->text;
  if (!jsonShape(value.get("shape"), type.shape))
    return false;
  for (int64_t d : type.shape)
    if (d < 0 && !dynamicAllowed)
      return false;
  return true;
}

} // namespace

std::string argumentName(const StepSignature &signature, size_t index) {
  if (index < signature.argumentNames.size() &&
      !signature.argumentNames[index].empty())
    return signature.argumentNames[index];
  return "arg" + std::to_string(index);
}

bool writeStepJson(const std::string &path, const StepSignature &signature,
                   std::string &error) {
  std::string text =
      "{\n  \"format\": 1,\n  \"entry\": " + quoted(signature.entry) +
      ",\n  \"library\": " + quoted(signature.library) + ",\n";
  auto tensors = [&](const char *key, const std::vector<TensorSpec> &list,
                     const std::vector<std::string> *names) {
    text += std::string("  \"") + key + "\": [";
    for (size_t i = 0; i < list.size(); ++i) {
      text += std::string(i ? ",\n    " : "\n    ") + "{";
      if (names && i < names->size() && !(*names)[i].empty())
        text += "\"name\": " + quoted((*names)[i]) + ", ";
      text += "\"dtype\": " + quoted(list[i].dtype) +
              ", \"shape\": " + shapeJson(list[i].shape) + "}";
    }
    text += list.empty() ? "],\n" : "\n  ],\n";
  };
  tensors("arguments", signature.arguments, &signature.argumentNames);
  tensors("results", signature.results, nullptr);
  text += "  \"states\": [";
  for (size_t i = 0; i < signature.states.size(); ++i) {
    const StateSpec &state = signature.states[i];
    text += std::string(i ? ",\n    " : "\n    ") +
            "{\"name\": " + quoted(state.name) +
            ", \"dtype\": " + quoted(state.type.dtype) +
            ", \"shape\": " + shapeJson(state.type.shape) +
            (state.startIter >= 0
                 ? ", \"start_iter\": " + std::to_string(state.startIter)
                 : std::string()) +
            "}";
  }
  text += signature.states.empty() ? "],\n" : "\n  ],\n";
  text += "  \"host_functions\": [";
  for (size_t i = 0; i < signature.hostFunctions.size(); ++i)
    text += (i ? ", " : "") + quoted(signature.hostFunctions[i]);
  text += "]\n}\n";

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    error = "cannot write '" + path + "': " + std::strerror(errno);
    return false;
  }
  return true;
}

bool readStepJson(const std::string &path, StepSignature &signature,
                  std::string &error) {
  std::string bytes;
  if (!readFile(path, bytes, error))
    return false;
  Json root;
  std::string why;
  if (!JsonParser(bytes).parse(root, why)) {
    error = "'" + path + "' is not valid JSON: " + why;
    return false;
  }
  auto bad = [&](const std::string &what) {
    error = "'" + path + "' is not a step description (ddp-run " +
            "--emit-step writes one): " + what;
    return false;
  };
  if (root.kind != Json::Object)
    return bad("not an object");
  const Json *format = root.get("format");
  if (!format || format->kind != Json::Number || format->number != 1)
    return bad("\"format\" is not 1");
  signature = StepSignature();
  const Json *entry = root.get("entry");
  if (!entry || entry->kind != Json::String || entry->text.empty())
    return bad("no \"entry\"");
  signature.entry = entry->text;
  if (const Json *library = root.get("library")) {
    if (library->kind != Json::String || library->text.empty())
      return bad("\"library\" is not a file name");
    signature.library = library->text;
  }
  for (auto [key, list] : {std::pair{"arguments", &signature.arguments},
                           std::pair{"results", &signature.results}}) {
    const Json *items = root.get(key);
    if (!items || items->kind != Json::Array)
      return bad(std::string("no \"") + key + "\" list");
    for (size_t i = 0; i < items->items.size(); ++i) {
      TensorSpec type;
      if (!jsonTensor(items->items[i], type, /*dynamicAllowed=*/true))
        return bad(std::string(key) + " " + std::to_string(i) +
                   " is not {\"dtype\": a .npy type, \"shape\": [sizes]}");
      list->push_back(type);
      if (list != &signature.arguments)
        continue;
      std::string argumentName;
      if (const Json *name = items->items[i].get("name")) {
        if (name->kind != Json::String)
          return bad("argument " + std::to_string(i) +
                     ": \"name\" is not a string");
        argumentName = name->text;
      }
      signature.argumentNames.push_back(argumentName);
    }
  }
  const Json *states = root.get("states");
  if (!states || states->kind != Json::Array)
    return bad("no \"states\" list");
  for (size_t i = 0; i < states->items.size(); ++i) {
    const Json &item = states->items[i];
    StateSpec state;
    const Json *name = item.get("name");
    if (item.kind != Json::Object || !name || name->kind != Json::String ||
        !jsonTensor(item, state.type, /*dynamicAllowed=*/false))
      return bad("state " + std::to_string(i) +
                 " is not {\"name\", \"dtype\", \"shape\"}");
    state.name = name->text;
    if (const Json *start = item.get("start_iter")) {
      if (start->kind != Json::Number || !(start->number >= 0) ||
          start->number > 9.0e15 || start->number != std::floor(start->number))
        return bad("state " + std::to_string(i) +
                   ": \"start_iter\" is not a step number");
      state.startIter = int64_t(start->number);
    }
    signature.states.push_back(state);
  }
  if (const Json *functions = root.get("host_functions")) {
    if (functions->kind != Json::Array)
      return bad("\"host_functions\" is not a list");
    for (const Json &name : functions->items) {
      if (name.kind != Json::String)
        return bad("\"host_functions\" holds a non-string");
      signature.hostFunctions.push_back(name.text);
    }
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Host functions
//===----------------------------------------------------------------------===//

namespace {

/// Whether compiled code's buffers are managed memory (CUDA backend).
bool sharedBuffers = false;

/// Freed buffers by size, for the next allocation of that size. A step
/// allocates the same sizes every time, so from the second step on it takes
/// no fresh pages: each fresh page costs a page fault, and on the 2-core VM
/// the faults of an fp16 step's 150 MB of new buffers made it 14x slower
/// than the same runtime calls on reused buffers (docs/performance.md).
std::map<void *, size_t> liveBlocks;
std::multimap<size_t, void *> freeBlocks;

void *allocateBuffer(size_t bytes) {
  size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void *pointer = nullptr;
  if (auto reuse = freeBlocks.find(rounded); reuse != freeBlocks.end()) {
    pointer = reuse->second;
    freeBlocks.erase(reuse);
  } else if (!sharedBuffers) {
    pointer = std::aligned_alloc(64, rounded);
  } else if (ddprt_alloc(ddprt_current_context(), rounded, &pointer) !=
             DDPRT_OK) {
    pointer = nullptr;
  }
  if (pointer)
    liveBlocks[pointer] = rounded;
  return pointer;
}

void releaseBuffer(void *pointer) {
  if (!pointer)
    return;
  auto live = liveBlocks.find(pointer);
  if (live == liveBlocks.end()) {
    std::free(pointer); // over-aligned host memory (hostAlignedAlloc)
    return;
  }
  freeBlocks.emplace(live->second, pointer);
  liveBlocks.erase(live);
}

/// Gives the cached blocks back (before the runtime that made them ends).
void releaseCachedBuffers() {
  for (auto &[bytes, pointer] : freeBlocks) {
    if (sharedBuffers)
      ddprt_free(ddprt_current_context(), pointer);
    else
      std::free(pointer);
  }
  freeBlocks.clear();
}

// The memref allocation functions of code lowered with
// finalize-memref-to-llvm{use-generic-functions}.
void *hostAlloc(size_t bytes) { return allocateBuffer(bytes); }
void *hostAlignedAlloc(size_t alignment, size_t bytes) {
  // Both kinds of memory are at least 64-byte aligned (managed memory 256).
  if (alignment <= 64 || (sharedBuffers && alignment <= 256))
    return allocateBuffer(bytes);
  if (sharedBuffers || (alignment & (alignment - 1)) != 0)
    return nullptr;
  return std::aligned_alloc(alignment,
                            (std::max<size_t>(bytes, 1) + alignment - 1) /
                                alignment * alignment);
}
void hostFree(void *pointer) { releaseBuffer(pointer); }

/// MLIR's memrefCopy (CRunnerUtils): element-wise copy between two strided
/// memrefs of the same shape, passed as unranked descriptors.
struct UnrankedDescriptor {
  int64_t rank;
  void *descriptor;
};
void hostMemrefCopy(int64_t elementSize, UnrankedDescriptor *source,
                    UnrankedDescriptor *target) {
  // A ranked descriptor: allocated, aligned, offset, sizes[rank],
  // strides[rank].
  struct View {
    char *data;
    const int64_t *sizes, *strides;
  };
  auto view = [&](UnrankedDescriptor *memref) {
    auto *words = static_cast<int64_t *>(memref->descriptor);
    char *aligned = reinterpret_cast<char *>(words[1]);
    return View{aligned + words[2] * elementSize, words + 3,
                words + 3 + memref->rank};
  };
  int64_t rank = source->rank;
  View from = view(source), to = view(target);
  for (int64_t d = 0; d < rank; ++d)
    if (from.sizes[d] == 0)
      return;
  if (rank == 0) {
    std::memcpy(to.data, from.data, size_t(elementSize));
    return;
  }
  std::vector<int64_t> index(size_t(rank), 0);
  int64_t fromOffset = 0, toOffset = 0;
  for (;;) {
    std::memcpy(to.data + toOffset * elementSize,
                from.data + fromOffset * elementSize, size_t(elementSize));
    int64_t d = rank - 1;
    for (; d >= 0; --d) {
      if (++index[d] < from.sizes[d]) {
        fromOffset += from.strides[d];
        toOffset += to.strides[d];
        break;
      }
      fromOffset -= from.strides[d] * (from.sizes[d] - 1);
      toOffset -= to.strides[d] * (from.sizes[d] - 1);
      index[d] = 0;
    }
    if (d < 0)
      return;
  }
}

/// ddprt_check on the CUDA backend: runtime calls are enqueued, and the
/// host code after them may read what they write, so wait for the device
/// first.
void synchronizeAndCheck(ddprt_context *context, ddprt_status status,
                         const char *where) {
  if (status == DDPRT_OK)
    status = ddprt_synchronize(context);
  ddprt_check(context, status, where);
}

template <typename F> void *address(F *function) {
  return reinterpret_cast<void *>(function);
}

} // namespace

std::vector<HostFunction> hostFunctions(bool sharedMemory) {
  return {
      {"ddprt_current_context", address(&ddprt_current_context)},
      {"ddprt_check",
       sharedMemory ? address(&synchronizeAndCheck) : address(&ddprt_check)},
      {"ddprt_allreduce", address(&ddprt_allreduce)},
      {"ddprt_allreduce_start", address(&ddprt_allreduce_start)},
      {"ddprt_wait", address(&ddprt_wait)},
      {"ddprt_scale", address(&ddprt_scale)},
      {"ddprt_cast", address(&ddprt_cast)},
      {"ddprt_copy", address(&ddprt_copy)},
      {"ddprt_project", address(&ddprt_project)},
      {"ddprt_backproject", address(&ddprt_backproject)},
      {"ddprt_orthogonalize", address(&ddprt_orthogonalize)},
      {"ddprt_reconstruct", address(&ddprt_reconstruct)},
      {"ddprt_random_normal", address(&ddprt_random_normal)},
      {"ddprt_state_get", address(&ddprt_state_get)},
      {"ddprt_state_data", address(&ddprt_state_data)},
      {"_mlir_memref_to_llvm_alloc", address(&hostAlloc)},
      {"_mlir_memref_to_llvm_aligned_alloc", address(&hostAlignedAlloc)},
      {"_mlir_memref_to_llvm_free", address(&hostFree)},
      // memref.copy of strided views.
      {"memrefCopy", address(&hostMemrefCopy)},
  };
}

bool isHostFunction(std::string_view name) {
  for (const HostFunction &function : hostFunctions(false))
    if (name == function.name)
      return true;
  return false;
}

//===----------------------------------------------------------------------===//
// The job
//===----------------------------------------------------------------------===//

Line::~Line() {
  if (!live)
    return;
  if (sink) {
    *sink += os.str();
    return;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::string text = os.str();
  for (size_t done = 0; done < text.size();) {
    ssize_t wrote = ::write(2, text.data() + done, text.size() - done);
    if (wrote <= 0)
      break;
    done += size_t(wrote);
  }
}

Line Job::error() const {
  if (rankIndependent)
    return rank == 0
               ? Line(tool + ": error: ")
               : Line::into(&deferred, tool + ": rank " + std::to_string(rank) +
                                           ": error: ");
  return Line(tool + ": rank " + std::to_string(rank) + ": error: ");
}

Line Job::localError() const {
  return Line(tool + ": rank " + std::to_string(rank) + ": error: ");
}

Line Job::note() const {
  return Line(tool + ": rank " + std::to_string(rank) + ": ");
}

namespace {
/// Stops the job when compiled code reports a runtime failure: the other
/// ranks may be waiting in a collective.
void onRuntimeError(ddprt_context *context, ddprt_status status,
                    const char *where, void *user) {
  Job *job = static_cast<Job *>(user);
  std::string step = job->currentStep >= 0
                         ? "step " + std::to_string(job->currentStep) + ": "
                         : "";
  if (status == DDPRT_NONFINITE && !job->failOnNonfinite) {
    // Every rank saw the same averaged values and made the same choice;
    // one of them says so.
    if (job->rank == 0)
      Line(job->tool + ": rank 0: warning: ")
          << step << where << ": " << ddprt_last_error(context)
          << " (--on-nonfinite=skip)\n";
    return;
  }
  job->error() << step << where << ": " << ddprt_status_string(status) << ": "
               << ddprt_last_error(context)
               << (status == DDPRT_NONFINITE ? " (--on-nonfinite=fail)" : "")
               << "\n";
  job->stop(1);
}
} // namespace

//===----------------------------------------------------------------------===//
// Watchdog
//===----------------------------------------------------------------------===//

struct Watchdog::State {
  std::mutex mutex;
  std::condition_variable changed;
  std::thread thread;
  bool armed = false, quit = false;
  std::chrono::steady_clock::time_point deadline;
  std::string message;

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!quit) {
      if (!armed) {
        changed.wait(lock);
        continue;
      }
      if (changed.wait_until(lock, deadline) == std::cv_status::timeout &&
          armed && std::chrono::steady_clock::now() >= deadline) {
        // The main thread is blocked (maybe inside MPI): write and leave
        // without running destructors or atexit handlers.
        for (size_t done = 0; done < message.size();) {
          ssize_t wrote =
              ::write(2, message.data() + done, message.size() - done);
          if (wrote <= 0)
            break;
          done += size_t(wrote);
        }
        std::_Exit(1);
      }
    }
  }
};

Watchdog::Watchdog() : state(new State) {}

Watchdog::~Watchdog() {
  if (state->thread.joinable()) {
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      state->quit = true;
    }
    state->changed.notify_all();
    state->thread.join();
  }
  delete state;
}

void Watchdog::arm(double seconds, std::string message) {
  // 0 waits forever, and so does a timeout too long for the clock (a
  // duration of 1e10 s in nanoseconds overflows).
  if (!(seconds > 0) || !(seconds < 1e9))
    return disarm();
  std::lock_guard<std::mutex> lock(state->mutex);
  if (!state->thread.joinable())
    state->thread = std::thread([s = state] { s->run(); });
  auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(seconds));
  // An earlier deadline still armed stays (finishing after a failed start
  // is bounded by the start's deadline, not a fresh one).
  if (state->armed && state->deadline <= deadline)
    return;
  state->armed = true;
  state->deadline = deadline;
  state->message = std::move(message);
  state->changed.notify_all();
}

void Watchdog::disarm() {
  std::lock_guard<std::mutex> lock(state->mutex);
  state->armed = false;
  state->changed.notify_all();
}

//===----------------------------------------------------------------------===//
// Job
//===----------------------------------------------------------------------===//

namespace {
std::string secondsText(double seconds) {
  std::ostringstream os;
  os << seconds;
  return os.str();
}
} // namespace

bool checkRunOptions(const std::string &tool, const RunOptions &options) {
  bool ok = true;
  if (options.backend != "cpu" && options.backend != "cuda") {
    Line(tool + ": error: ")
        << "--backend must be cpu or cuda, not '" << options.backend << "'\n";
    ok = false;
  }
  if (options.onNonfinite != "skip" && options.onNonfinite != "fail") {
    Line(tool + ": error: ") << "--on-nonfinite must be skip or fail, not '"
                             << options.onNonfinite << "'\n";
    ok = false;
  }
  return ok;
}

bool Job::start(const RunOptions &options) {
  ddprt_options runtimeOptions;
  ddprt_default_options(&runtimeOptions);
  runtimeOptions.timeout_seconds = options.timeoutSeconds;
  timeoutSeconds = options.timeoutSeconds;
  if (!checkRunOptions(tool, options))
    return false;
  if (options.backend == "cuda")
    runtimeOptions.backend = DDPRT_BACKEND_CUDA;
  backendName = options.backend;
  failOnNonfinite = options.onNonfinite == "fail";
  // MPI_Init and the runtime's start wait for every rank without a timeout
  // of their own.
  watchdog.arm(timeoutSeconds,
               tool + ": error: the runtime did not start within " +
                   secondsText(timeoutSeconds) +
                   " s (--timeout): a rank may have died or stopped\n");
  ddprt_status started = ddprt_init(&runtimeOptions, &context);
  if (context) {
    rank = ddprt_rank(context);
    worldSize = ddprt_world_size(context);
  }
#if defined(DDPRT_HAVE_MPI)
  // A runtime that failed to start has no communicator to ask; MPI may
  // still be up, and the ranks must agree on the failure through it.
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (started != DDPRT_OK && initialized && !finalized) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
#endif
  if (started != DDPRT_OK) {
    error() << "cannot start the runtime: " << ddprt_status_string(started)
            << ": " << ddprt_last_error(context) << "\n";
    agreeOrStop(false, "to start the runtime");
  }
  agreeOrStop(true, "to start the runtime");
  watchdog.disarm();
  ddprt_set_current_context(context);
  ddprt_set_error_handler(onRuntimeError, this);
  sharedMemory = runtimeOptions.backend == DDPRT_BACKEND_CUDA;
  sharedBuffers = sharedMemory;
  return true;
}

void Job::finish() {
  // Finalizing (here, or MPI_Finalize at exit) waits for every rank.
  watchdog.arm(timeoutSeconds,
               tool + ": rank " + std::to_string(rank) +
                   ": error: finalizing did not complete within " +
                   secondsText(timeoutSeconds) +
                   " s (--timeout): a rank may have died or stopped\n");
  releaseCachedBuffers();
  ddprt_set_current_context(nullptr);
  ddprt_set_error_handler(nullptr, nullptr);
  if (context)
    ddprt_finalize(context);
  context = nullptr;
#if defined(DDPRT_HAVE_MPI)
  // MPI_Finalize here rather than at exit, while the watchdog bounds it.
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Finalize();
#endif
  watchdog.disarm();
}

void Job::stop(int status) {
  std::fflush(stdout);
  std::fflush(stderr);
#if defined(DDPRT_HAVE_MPI)
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized && worldSize > 1)
    MPI_Abort(MPI_COMM_WORLD, status);
#endif
  std::_Exit(status);
}

void Job::maxOverRanksBounded(double *values, int count,
                              const std::string &what) {
#if defined(DDPRT_HAVE_MPI)
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized || worldSize <= 1)
    return;
  // Nonblocking and polled, as the runtime's collectives are: a blocking
  // MPI_Allreduce would wait forever for a rank that stopped.
  MPI_Request request;
  if (MPI_Iallreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_MAX,
                     MPI_COMM_WORLD, &request) != MPI_SUCCESS) {
    error() << "cannot agree with the other ranks " << what
            << ": MPI_Iallreduce failed\n";
    stop(1);
  }
  auto start = std::chrono::steady_clock::now();
  while (true) {
    int done = 0;
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      error() << "cannot agree with the other ranks " << what
              << ": MPI_Test failed\n";
      stop(1);
    }
    if (done)
      return;
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (timeoutSeconds > 0 && waited > timeoutSeconds) {
      error() << "the other ranks did not answer within "
              << secondsText(timeoutSeconds) << " s (--timeout) " << what
              << ": a rank may have died or stopped\n";
      stop(1);
    }
    // The others may be busy (compiling, reading): do not take their CPU.
    if (waited < 0.001)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
#else
  (void)values, (void)count, (void)what;
#endif
}

bool Job::everyRankSucceeded(bool succeeded, const std::string &what) {
  // MAX of "failed" is MIN of "succeeded".
  double failed = succeeded ? 0.0 : 1.0;
  maxOverRanksBounded(&failed, 1, "after trying " + what);
  return failed == 0.0;
}

double Job::maxOverRanks(double value) {
  maxOverRanksBounded(&value, 1, "while timing the steps");
  return value;
}

void Job::agreeOrStop(bool succeeded, const std::string &what) {
  if (rankIndependent) {
    // One MAX over (this rank failed, rank 0 failed): whether to stop, and
    // whether rank 0 already said why for everyone.
    double failed[2] = {succeeded ? 0.0 : 1.0,
                        rank == 0 && !succeeded ? 1.0 : 0.0};
    maxOverRanksBounded(failed, 2, "after trying " + what);
    if (failed[0] == 0.0) {
      deferred.clear();
      return;
    }
    if (!succeeded && failed[1] == 0.0 && !deferred.empty())
      Line("") << deferred;
    if (succeeded)
      note() << "stopping: another rank failed " << what << "\n";
    std::fflush(stdout);
    finish();
    std::exit(1);
  }
  if (everyRankSucceeded(succeeded, what))
    return;
  if (succeeded)
    note() << "stopping: another rank failed " << what << "\n";
  std::fflush(stdout);
  finish();
  std::exit(1);
}

bool Job::agreeOrStopSame(bool succeeded, const std::string &what,
                          const std::vector<int64_t> &values) {
  // One MAX over (failed, digest, -digest) gives every rank whether any
  // failed and both the largest and the smallest digest. The digest is the
  // count and a 64-bit FNV-1a hash, in 32-bit halves that doubles hold
  // exactly.
  uint64_t hash = 1469598103934665603ull;
  for (int64_t value : values)
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= uint8_t(uint64_t(value) >> (8 * byte));
      hash *= 1099511628211ull;
    }
  const double digest[3] = {double(values.size()), double(hash >> 32),
                            double(hash & 0xffffffffu)};
  double all[7] = {succeeded ? 0.0 : 1.0};
  for (int i = 0; i < 3; ++i) {
    all[1 + i] = digest[i];
    all[4 + i] = -digest[i];
  }
  maxOverRanksBounded(all, 7, "after trying " + what);
  if (all[0] != 0.0) {
    if (succeeded)
      note() << "stopping: another rank failed " << what << "\n";
    std::fflush(stdout);
    finish();
    std::exit(1);
  }
  for (int i = 0; i < 3; ++i)
    if (all[1 + i] != -all[4 + i])
      return false;
  return true;
}

std::string Job::expand(std::string_view pattern, int64_t step, int64_t result,
                        std::string_view name) const {
  std::string out;
  while (!pattern.empty()) {
    size_t open = pattern.find('{');
    out += std::string(pattern.substr(0, open));
    if (open == std::string_view::npos)
      break;
    pattern = pattern.substr(open);
    size_t close = pattern.find('}');
    std::string_view key = close == std::string_view::npos
                               ? pattern.substr(1)
                               : pattern.substr(1, close - 1);
    bool known = close != std::string_view::npos;
    std::string replacement;
    if (known && key == "rank")
      replacement = std::to_string(rank);
    else if (known && key == "step" && step >= 0)
      replacement = std::to_string(step);
    else if (known && key.substr(0, 5) == "step%" && step >= 0 &&
             key.size() > 5 &&
             key.find_first_not_of("0123456789", 5) == std::string_view::npos &&
             key.size() < 5 + 18 && std::stoll(std::string(key.substr(5))) > 0)
      replacement =
          std::to_string(step % std::stoll(std::string(key.substr(5))));
    else if (known && key == "result" && result >= 0)
      replacement = std::to_string(result);
    else if (known && key == "name" && !name.empty())
      replacement = std::string(name);
    else {
      out += "{";
      pattern = pattern.substr(1);
      continue;
    }
    out += replacement;
    pattern = pattern.substr(close + 1);
  }
  return out;
}

//===----------------------------------------------------------------------===//
// The steps
//===----------------------------------------------------------------------===//

namespace {

/// A host buffer the step reads or wrote, with its memref descriptor words:
/// allocated, aligned, offset, sizes, strides.
struct Buffer {
  const TensorSpec *type = nullptr;
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
    return size_t(numElements()) * elementBytes(type->dtype);
  }
  void release() {
    releaseBuffer(allocated);
    allocated = aligned = nullptr;
  }
};

/// What one step did, for the summary's per-step series.
struct StepRecord {
  int64_t step = 0;
  double seconds = 0.0;
  uint64_t elements = 0, bytes = 0;
  uint64_t elementsByRole[DDPRT_ROLE_COUNT] = {};
  /// "warmup" (the plain mean before PowerSGD's start-iter), "powersgd"
  /// (PowerSGD's P and Q were sent) or "none" (neither: no PowerSGD, or
  /// fp16/bf16 only).
  const char *phase = "none";
};

/// Whether a single --input pattern with {name} gives every argument.
bool usesOnePatternForAll(const RunOptions &options) {
  return options.inputs.size() == 1 &&
         options.inputs[0].find("{name}") != std::string::npos;
}

/// At most `limit` of `names`, comma-separated, with how many more.
std::string listNames(const std::vector<std::string> &names, size_t limit = 8) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < limit; ++i)
    text += (i ? ", " : "") + names[i];
  if (names.size() > limit)
    text += " and " + std::to_string(names.size() - limit) + " more";
  return text;
}

/// Checks `array` against `type` and moves it into a fresh buffer;
/// `source` names it in messages ("argument 0 ('x.npy')").
bool toBuffer(const npy::Array &array, const TensorSpec &type,
              const std::string &source, Buffer &buffer, std::string &error) {
  auto fail = [&](const std::string &why) {
    error = source + ": " + why;
    return false;
  };
  if (array.descr != type.dtype)
    return fail("element type '" + array.descr + "' but the function takes " +
                type.dtype + " (" + elementTypeName(type.dtype) + ")");
  if (array.shape.size() != type.shape.size())
    return fail("shape " + shapeString(array.shape) +
                " but the function takes " + typeString(type));
  for (size_t i = 0; i < type.shape.size(); ++i)
    if (type.shape[i] >= 0 && type.shape[i] != array.shape[i])
      return fail("shape " + shapeString(array.shape) +
                  " but the function takes " + typeString(type));
  buffer = Buffer();
  buffer.type = &type;
  buffer.sizes = array.shape;
  buffer.allocated = allocateBuffer(array.data.size());
  if (!buffer.allocated)
    return fail("out of memory");
  buffer.aligned = buffer.allocated;
  std::memcpy(buffer.aligned, array.data.data(), array.data.size());
  return true;
}

/// Where each argument of a step comes from: a .npy per argument (--input,
/// in order or one pattern with {name}) or an array of an .npz named after
/// it (--inputs).
class InputReader {
public:
  InputReader(const Job &job, const StepSignature &signature,
              const RunOptions &options)
      : job(job), signature(signature), options(options) {}

  /// Reads argument `a` of step `step` into a fresh buffer.
  bool read(size_t a, int64_t step, Buffer &buffer, std::string &error) {
    const TensorSpec &type = signature.arguments[a];
    std::string name = argumentName(signature, a);
    std::string argument = "argument " + std::to_string(a);
    npy::Array array;
    if (options.inputArchive.empty()) {
      const std::string &pattern =
          usesOnePatternForAll(options) ? options.inputs[0] : options.inputs[a];
      std::string path = job.expand(pattern, step, -1, name);
      if (!npy::read(path, array, error))
        return false;
      return toBuffer(array, type, argument + " ('" + path + "')", buffer,
                      error);
    }
    std::string path = job.expand(options.inputArchive, step);
    std::unique_ptr<npy::Archive> &archive = archives[path];
    if (!archive) {
      archive = std::make_unique<npy::Archive>();
      if (!archive->open(path, error)) {
        archive.reset();
        archives.erase(path);
        return false;
      }
    }
    // np.savez(*arrays) names positional arrays arr_0, arr_1, ...
    std::string key = name;
    bool unnamed = a >= signature.argumentNames.size() ||
                   signature.argumentNames[a].empty();
    if (!archive->contains(key) && unnamed &&
        archive->contains("arr_" + std::to_string(a)))
      key = "arr_" + std::to_string(a);
    if (!archive->contains(key)) {
      std::vector<std::string> held = archive->names();
      error = argument + " ('" + name + "'): '" + path + "' has no array '" +
              name + "' (it holds " +
              (held.empty()
                   ? std::string("none")
                   : std::to_string(held.size()) + ": " + listNames(held)) +
              ")";
      if (unnamed)
        error += "; the argument has no name location in the module (ddp-opt "
                 "drops locations when it prints: add "
                 "--mlir-print-debuginfo)";
      return false;
    }
    taken[path].insert(key);
    if (!archive->read(key, array, error))
      return false;
    return toBuffer(array, type,
                    argument + " ('" + key + "' in '" + path + "')", buffer,
                    error);
  }

  /// After the reads of a step: the archives are closed; with `report`,
  /// rank 0 says which arrays of them no argument took.
  void endStep(bool report) {
    if (report && job.rank == 0)
      for (const auto &[path, archive] : archives) {
        std::vector<std::string> unused;
        for (const std::string &name : archive->names())
          if (!taken[path].count(name))
            unused.push_back(name);
        if (!unused.empty())
          job.note() << "note: '" << path << "' holds " << unused.size()
                     << " array" << (unused.size() == 1 ? "" : "s")
                     << " that no argument is named after (not read): "
                     << listNames(unused) << "\n";
      }
    archives.clear();
    taken.clear();
  }

private:
  const Job &job;
  const StepSignature &signature;
  const RunOptions &options;
  std::map<std::string, std::unique_ptr<npy::Archive>> archives;
  std::map<std::string, std::set<std::string>> taken;
};

bool writeOutput(const std::string &path, const Buffer &buffer,
                 std::string &error) {
  npy::Array array;
  array.descr = buffer.type->dtype;
  array.shape = buffer.sizes;
  const char *data = static_cast<const char *>(buffer.aligned);
  array.data.assign(data, data + buffer.bytes());
  return npy::write(path, array, error);
}

std::string withThousands(uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return text;
}

uint64_t sum(const uint64_t (&values)[DDPRT_ROLE_COUNT]) {
  uint64_t total = 0;
  for (uint64_t v : values)
    total += v;
  return total;
}

/// Parses --carry (already checked) into carriedFrom[argument] = result.
bool parseCarries(const Job &job, const StepSignature &signature,
                  const RunOptions &options, std::vector<int> &carriedFrom,
                  bool report) {
  bool ok = true;
  carriedFrom.assign(signature.arguments.size(), -1);
  for (const std::string &carry : options.carries) {
    size_t colon = carry.find(':');
    unsigned long argument = ~0ul, result = ~0ul;
    auto number = [](const std::string &text, unsigned long &value) {
      if (text.empty() || text.size() > 9 ||
          text.find_first_not_of("0123456789") != std::string::npos)
        return false;
      value = std::stoul(text);
      return true;
    };
    if (colon == std::string::npos ||
        !number(carry.substr(0, colon), argument) ||
        !number(carry.substr(colon + 1), result) ||
        argument >= signature.arguments.size() ||
        result >= signature.results.size()) {
      if (report)
        job.error() << "--carry=" << carry << " is not ARG:RESULT with ARG < "
                    << signature.arguments.size() << " and RESULT < "
                    << signature.results.size() << "\n";
      ok = false;
      continue;
    }
    if (signature.arguments[argument] != signature.results[result]) {
      if (report)
        job.error() << "--carry=" << carry << ": result " << result << " is "
                    << typeString(signature.results[result]) << " but argument "
                    << argument << " is "
                    << typeString(signature.arguments[argument]) << "\n";
      ok = false;
      continue;
    }
    // One buffer per argument: the compiled step assumes its arguments do
    // not alias (it reduces them in place).
    bool resultTaken = std::find(carriedFrom.begin(), carriedFrom.end(),
                                 int(result)) != carriedFrom.end();
    if (carriedFrom[argument] >= 0 || resultTaken) {
      if (report)
        job.error() << "--carry=" << carry << ": "
                    << (resultTaken ? "result " + std::to_string(result)
                                    : "argument " + std::to_string(argument))
                    << " is already carried\n";
      ok = false;
      continue;
    }
    carriedFrom[argument] = int(result);
  }
  return ok;
}

/// Whether a file can be written at `path` after the last step (a probe
/// file is created next to it and removed); says why not. With
/// `createParents` (.npy files, whose writer creates them) missing
/// directories are created first.
bool checkWritable(const Job &job, const std::string &flag,
                   const std::string &path, bool createParents) {
  std::string error;
  if (createParents && !npy::createDirectories(npy::parentPath(path), error)) {
    job.localError() << flag << ": " << error << "\n";
    return false;
  }
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    job.localError() << flag << ": '" << path << "' is a directory\n";
    return false;
  }
  std::string probe = path + ".probe." + std::to_string(job.rank);
  std::FILE *file = std::fopen(probe.c_str(), "wb");
  if (!file) {
    job.localError() << flag << ": cannot write '" << path
                     << "': " << std::strerror(errno) << "\n";
    return false;
  }
  std::fclose(file);
  std::remove(probe.c_str());
  return true;
}

/// Files written once per rank after the last step: the path must differ
/// between ranks (each rank's state is its own) and be writable, checked
/// before the first step rather than after the last.
bool checkFinalFiles(const Job &job, const StepSignature &signature,
                     const RunOptions &options, bool checkFiles) {
  bool ok = true;
  auto perRank = [&](const std::string &flag, const std::string &pattern) {
    if (pattern.empty() || job.worldSize <= 1 ||
        pattern.find("{rank}") != std::string::npos)
      return true;
    job.error() << flag << "=" << pattern << " names the same file on all "
                << job.worldSize << " ranks, which would overwrite each "
                << "other's state: put {rank} in the path\n";
    return false;
  };
  if (!perRank("--checkpoint-save", options.checkpointSave))
    ok = false;
  else if (checkFiles && !options.checkpointSave.empty() &&
           !checkWritable(job, "--checkpoint-save",
                          job.expand(options.checkpointSave, -1),
                          /*createParents=*/false))
    ok = false;
  if (!perRank("--dump-state", options.dumpState))
    ok = false;
  else if (!options.dumpState.empty() && signature.states.size() > 1 &&
           options.dumpState.find("{name}") == std::string::npos) {
    job.error() << "--dump-state=" << options.dumpState
                << " names one file for all " << signature.states.size()
                << " states: put {name} in the path\n";
    ok = false;
  } else if (checkFiles && !options.dumpState.empty())
    for (const StateSpec &state : signature.states)
      if (!checkWritable(job, "--dump-state",
                         job.expand(options.dumpState, -1, -1, state.name),
                         /*createParents=*/true))
        ok = false;
  return ok;
}

} // namespace

bool checkCommandLine(const Job &job, const StepSignature &signature,
                      const RunOptions &options, bool checkFiles) {
  bool ok = checkFinalFiles(job, signature, options, checkFiles);
  size_t count = signature.arguments.size();
  bool byName =
      !options.inputArchive.empty() ||
      std::any_of(options.inputs.begin(), options.inputs.end(),
                  [](const std::string &pattern) {
                    return pattern.find("{name}") != std::string::npos;
                  });
  if (!options.inputArchive.empty() && !options.inputs.empty()) {
    job.error() << "give the arguments either in one .npz (--inputs) or as "
                   ".npy files (--input), not both\n";
    ok = false;
  } else if (!options.inputArchive.empty() && !npy::archiveSupported()) {
    job.error() << "--inputs: this build reads no .npz (libzip was not "
                   "found when it was built; install libzip-dev and "
                   "rebuild)\n";
    ok = false;
  } else if (options.inputArchive.empty() && options.inputs.size() != count &&
             !usesOnePatternForAll(options)) {
    Line line = job.error();
    line << "@" << signature.entry << " takes " << count << " argument"
         << (count == 1 ? "" : "s") << " but " << options.inputs.size()
         << " --input given (one per argument, in order, or one pattern "
            "with {name}";
    if (npy::archiveSupported())
      line << ", or --inputs=FILE.npz";
    line << ")";
    for (size_t a = 0; a < count; ++a)
      line << (a ? ", " : ": ") << argumentName(signature, a) << " "
           << typeString(signature.arguments[a]);
    line << "\n";
    ok = false;
  }
  // Arguments found by name must have distinct names.
  if (byName)
    for (size_t a = 0; a < count; ++a)
      for (size_t b = 0; b < a; ++b)
        if (argumentName(signature, a) == argumentName(signature, b)) {
          job.error() << "arguments " << b << " and " << a
                      << " are both named '" << argumentName(signature, a)
                      << "': --inputs and {name} need distinct names (the "
                         "arguments' name locations)\n";
          ok = false;
        }
  std::vector<int> carriedFrom;
  if (!parseCarries(job, signature, options, carriedFrom, /*report=*/true))
    ok = false;
  for (unsigned r : options.outputResults)
    if (r >= signature.results.size()) {
      job.error() << "--output-results=" << r << " but @" << signature.entry
                  << " has " << signature.results.size() << " results\n";
      ok = false;
    }
  return ok;
}

int runSteps(Job &job, const StepSignature &signature, PackedFunction step,
             const RunOptions &options) {
  ddprt_context *context = job.context;
  bool verbose = job.rank == 0 && !options.quiet;
  std::vector<int> carriedFrom;
  parseCarries(job, signature, options, carriedFrom, /*report=*/false);

  // Create every state, so that a checkpoint can be loaded into them.
  bool stateOk = true;
  std::map<std::string, ddprt_state *> stateHandles;
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
  if (!options.checkpointLoad.empty()) {
    std::string path = job.expand(options.checkpointLoad, -1);
    bool loaded = ddprt_checkpoint_load(context, path.c_str()) == DDPRT_OK;
    if (!loaded)
      job.error() << "cannot load checkpoint: " << ddprt_last_error(context)
                  << "\n";
    job.agreeOrStop(loaded, "to load the checkpoint");
  }
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
    if (!npy::read(path, array, error)) {
      job.error() << "--set-state: " << error << "\n";
      setOk = false;
      continue;
    }
    if (array.descr != info->type.dtype || array.shape != info->type.shape) {
      job.error() << "--set-state: '" << path << "' holds " << array.descr
                  << " " << shapeString(array.shape) << " but state '" << name
                  << "' is " << info->type.dtype << " "
                  << shapeString(info->type.shape) << "\n";
      setOk = false;
      continue;
    }
    ddprt_buffer target = ddprt_state_buffer(found->second);
    ddprt_buffer source = target;
    source.data = array.data.data();
    if (ddprt_copy(context, &source, &target, 1) != DDPRT_OK ||
        ddprt_synchronize(context) != DDPRT_OK) {
      job.error() << "--set-state: " << ddprt_last_error(context) << "\n";
      setOk = false;
    }
  }
  job.agreeOrStop(setOk, "to set the states");

  // The steps.
  const std::vector<TensorSpec> &argumentTypes = signature.arguments;
  const std::vector<TensorSpec> &resultTypes = signature.results;
  std::vector<Buffer> arguments(argumentTypes.size());
  std::vector<double> stepSeconds;
  ddprt_counters before{}, after{};
  uint64_t lastStepElements = 0, lastStepBytes = 0, totalElements = 0;
  std::vector<bool> writeResult(resultTypes.size(),
                                options.outputResults.empty());
  for (unsigned r : options.outputResults)
    writeResult[r] = true;
  // What each step did, for the summary's series; the progress lines.
  // (kept only for --summary-json: a long run must not pay for it)
  std::vector<StepRecord> series;
  bool keepSeries = !options.summaryJson.empty();
  unsigned warmupSteps = 0, powersgdSteps = 0;
  auto lastLine = std::chrono::steady_clock::now();
  ddprt_state *counterState = nullptr;
  const StateSpec *counterStateInfo = nullptr;
  for (const StateSpec &state : signature.states)
    if (state.startIter >= 0 && state.type.dtype == "<i8" &&
        state.type.shape.empty() && !counterState) {
      counterState = stateHandles[state.name];
      counterStateInfo = &state;
    }
  size_t resultWords = 0;
  for (const TensorSpec &type : resultTypes)
    resultWords += 3 + 2 * type.shape.size();
  std::vector<int64_t> resultStorage(std::max<size_t>(resultWords, 1));

  InputReader inputs(job, signature, options);
  for (unsigned i = 0; i < options.steps; ++i) {
    int64_t stepNumber = int64_t(options.firstStep) + i;
    job.currentStep = stepNumber;
    bool readOk = true;
    for (size_t a = 0; a < arguments.size(); ++a) {
      if (arguments[a].allocated)
        continue; // carried from the step before
      std::string error;
      Buffer buffer;
      if (!inputs.read(a, stepNumber, buffer, error)) {
        job.error() << "step " << stepNumber << ": " << error << "\n";
        readOk = false;
        continue;
      }
      arguments[a] = buffer;
    }
    inputs.endStep(/*report=*/i == 0 && readOk);
    // Dynamic sizes come from the files, which may differ between ranks
    // even where the element counts agree (2x3 and 3x2): the agreement
    // compares every argument's shape (the dtypes are the function's).
    std::vector<int64_t> shapes;
    for (const Buffer &buffer : arguments) {
      shapes.push_back(int64_t(buffer.sizes.size()));
      shapes.insert(shapes.end(), buffer.sizes.begin(), buffer.sizes.end());
    }
    std::string readWhat =
        "to read the inputs of step " + std::to_string(stepNumber);
    if (!job.agreeOrStopSame(readOk, readWhat, shapes)) {
      {
        Line line = job.error();
        line << "step " << stepNumber
             << ": the ranks read inputs of different shapes; this rank's:";
        for (size_t a = 0; a < arguments.size(); ++a)
          line << (a ? ", " : " ") << "argument " << a << " "
               << shapeString(arguments[a].sizes);
        line << "\n";
      } // Printed here, before the job stops.
      job.agreeOrStop(false, readWhat);
    }

    // Packed calling convention: a pointer to each descriptor word, then
    // one to the storage of the returned descriptors.
    std::vector<int64_t> words;
    for (Buffer &buffer : arguments) {
      words.push_back(reinterpret_cast<int64_t>(buffer.allocated));
      words.push_back(reinterpret_cast<int64_t>(buffer.aligned));
      words.push_back(0);
      words.insert(words.end(), buffer.sizes.begin(), buffer.sizes.end());
      int64_t stride = 1;
      std::vector<int64_t> strides(buffer.sizes.size());
      for (int64_t d = int64_t(buffer.sizes.size()) - 1; d >= 0; --d) {
        strides[d] = stride;
        stride *= buffer.sizes[d];
      }
      words.insert(words.end(), strides.begin(), strides.end());
    }
    std::vector<void *> packedArgs;
    for (int64_t &word : words)
      packedArgs.push_back(&word);
    if (!resultTypes.empty())
      packedArgs.push_back(resultStorage.data());

    // PowerSGD's step counter says, before the step, whether it is warm-up
    // and when compression starts (the insertion pass put start-iter on it).
    int64_t compressionStarts = -1;
    if (counterState) {
      ddprt_buffer counter = ddprt_state_buffer(counterState);
      int64_t done = *static_cast<const int64_t *>(counter.data);
      compressionStarts = stepNumber + (counterStateInfo->startIter - done);
    }
    ddprt_get_counters(context, &before);
    auto start = std::chrono::steady_clock::now();
    step(packedArgs.data());
    // The device's work of the step (a step without runtime calls has none
    // that a compiled ddprt_check waited for).
    ddprt_check(context, ddprt_synchronize(context), "the end of the step");
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    ddprt_get_counters(context, &after);
    seconds = job.maxOverRanks(seconds);
    stepSeconds.push_back(seconds);
    lastStepElements = sum(after.elements_sent) - sum(before.elements_sent);
    lastStepBytes = sum(after.bytes_sent) - sum(before.bytes_sent);
    totalElements += lastStepElements;
    uint64_t uncompressed =
        after.elements_before_compression - before.elements_before_compression;
    auto delta = [&](const uint64_t(&a)[DDPRT_ROLE_COUNT],
                     const uint64_t(&b)[DDPRT_ROLE_COUNT],
                     int role) { return a[role] - b[role]; };
    bool warmup =
        delta(after.collectives, before.collectives, DDPRT_ROLE_WARMUP) > 0;
    bool powersgd =
        delta(after.collectives, before.collectives, DDPRT_ROLE_POWERSGD_P) +
            delta(after.collectives, before.collectives,
                  DDPRT_ROLE_POWERSGD_Q) >
        0;
    warmupSteps += warmup;
    powersgdSteps += powersgd && !warmup;
    if (keepSeries) {
      StepRecord record;
      record.step = stepNumber;
      record.seconds = seconds;
      record.elements = lastStepElements;
      record.bytes = lastStepBytes;
      record.phase = warmup ? "warmup" : powersgd ? "powersgd" : "none";
      for (int r = 0; r < DDPRT_ROLE_COUNT; ++r)
        record.elementsByRole[r] =
            delta(after.elements_sent, before.elements_sent, r);
      series.push_back(record);
    }
    auto now = std::chrono::steady_clock::now();
    bool last = i + 1 == options.steps;
    bool logThis =
        options.logEvery
            ? (i % options.logEvery == 0 || last)
            : (i == 0 || last ||
               std::chrono::duration<double>(now - lastLine).count() >=
                   kLogSeconds);
    if (verbose && logThis) {
      lastLine = now;
      std::string line = "step " + std::to_string(stepNumber) + ": ";
      if (warmup) {
        line += "warm-up";
        if (compressionStarts > stepNumber)
          line +=
              ", PowerSGD starts at step " + std::to_string(compressionStarts);
        line += "; ";
      }
      line += fixed(seconds * 1e3, 3) + " ms, sent " +
              withThousands(lastStepElements) + " elements (" +
              withThousands(lastStepBytes) + " bytes)";
      if (lastStepElements && uncompressed && uncompressed != lastStepElements)
        line += ", " + fixed(double(uncompressed) / lastStepElements, 2) +
                "x fewer than uncompressed";
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    }

    // Unpack the results; they belong to us now (freshly allocated).
    std::vector<Buffer> results(resultTypes.size());
    size_t at = 0;
    for (size_t r = 0; r < results.size(); ++r) {
      Buffer &buffer = results[r];
      buffer.type = &resultTypes[r];
      buffer.allocated = reinterpret_cast<void *>(resultStorage[at]);
      buffer.aligned = reinterpret_cast<void *>(resultStorage[at + 1]);
      int64_t offset = resultStorage[at + 2];
      size_t rankOf = resultTypes[r].shape.size();
      buffer.sizes.assign(resultStorage.begin() + at + 3,
                          resultStorage.begin() + at + 3 + rankOf);
      buffer.aligned = static_cast<char *>(buffer.aligned) +
                       offset * int64_t(elementBytes(resultTypes[r].dtype));
      at += 3 + 2 * rankOf;
    }
    bool writeOk = true;
    for (size_t r = 0; r < results.size(); ++r) {
      std::vector<std::string> paths;
      if (!options.output.empty() && writeResult[r])
        paths.push_back(job.expand(options.output, stepNumber, int64_t(r)));
      if (last && !options.finalOutput.empty())
        paths.push_back(
            job.expand(options.finalOutput, stepNumber, int64_t(r)));
      for (const std::string &path : paths) {
        std::string error;
        if (!writeOutput(path, results[r], error)) {
          job.error() << "step " << stepNumber << ": " << error << "\n";
          writeOk = false;
        }
      }
    }
    job.agreeOrStop(writeOk, "to write the results of step " +
                                 std::to_string(stepNumber));

    // Carried results become the next step's arguments; free the rest,
    // each buffer once (a result may be an argument's buffer, returned
    // without a copy).
    std::vector<Buffer> next(arguments.size());
    std::vector<void *> kept, freed;
    auto contains = [](const std::vector<void *> &list, void *pointer) {
      return std::find(list.begin(), list.end(), pointer) != list.end();
    };
    for (size_t a = 0; a < arguments.size(); ++a)
      if (!last && carriedFrom[a] >= 0) {
        next[a] = results[size_t(carriedFrom[a])];
        kept.push_back(next[a].allocated);
      }
    auto release = [&](Buffer &buffer) {
      if (buffer.allocated && !contains(kept, buffer.allocated) &&
          !contains(freed, buffer.allocated)) {
        freed.push_back(buffer.allocated);
        releaseBuffer(buffer.allocated);
      }
      buffer.allocated = buffer.aligned = nullptr;
    };
    for (Buffer &buffer : arguments)
      release(buffer);
    for (Buffer &buffer : results)
      release(buffer);
    arguments = std::move(next);
  }
  for (Buffer &buffer : arguments)
    buffer.release();

  // After the last step: state out, checkpoint, figures.
  bool finishOk = true;
  if (!options.dumpState.empty()) {
    for (const StateSpec &state : signature.states) {
      if (npy::elementSize(state.type.dtype) == 0) {
        job.error() << "--dump-state: state '" << state.name << "' is "
                    << elementTypeName(state.type.dtype)
                    << ", which .npy cannot hold\n";
        finishOk = false;
        continue;
      }
      ddprt_buffer source = ddprt_state_buffer(stateHandles[state.name]);
      npy::Array array;
      array.descr = state.type.dtype;
      array.shape = state.type.shape;
      array.data.resize(size_t(source.numel) * ddprt_dtype_size(source.dtype));
      ddprt_buffer target = source;
      target.data = array.data.data();
      if (ddprt_copy(context, &source, &target, 1) != DDPRT_OK ||
          ddprt_synchronize(context) != DDPRT_OK) {
        job.error() << "--dump-state: " << ddprt_last_error(context) << "\n";
        finishOk = false;
        continue;
      }
      std::string error;
      if (!npy::write(job.expand(options.dumpState, -1, -1, state.name), array,
                      error)) {
        job.error() << "--dump-state: " << error << "\n";
        finishOk = false;
      }
    }
  }
  if (!options.checkpointSave.empty()) {
    std::string path = job.expand(options.checkpointSave, -1);
    if (ddprt_checkpoint_save(context, path.c_str()) != DDPRT_OK) {
      job.error() << "cannot save checkpoint: " << ddprt_last_error(context)
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
  if (job.rank == 0) {
    std::printf("%s: %u steps of @%s on %d rank%s (%s): %s ms per step "
                "(median), last step sent %s elements per rank; over the run "
                "%sx fewer elements than uncompressed\n",
                job.tool.c_str(), options.steps, signature.entry.c_str(),
                job.worldSize, job.worldSize == 1 ? "" : "s",
                job.backendName.c_str(), fixed(median * 1e3, 3).c_str(),
                withThousands(lastStepElements).c_str(),
                fixed(ratio, 2).c_str());
    if (warmupSteps || powersgdSteps)
      std::printf("%s: %u of %u steps compressed with PowerSGD, %u warm-up "
                  "(a plain mean before start-iter)\n",
                  job.tool.c_str(), powersgdSteps, options.steps, warmupSteps);
    if (total.nonfinite_skips)
      std::printf("%s: %llu times a tensor's averaged PowerSGD factors were "
                  "not finite (NaN or Inf): its error feedback skipped that "
                  "step\n",
                  job.tool.c_str(), (unsigned long long)total.nonfinite_skips);
    std::fflush(stdout);
  }
  if (!options.summaryJson.empty() &&
      (job.rank == 0 ||
       options.summaryJson.find("{rank}") != std::string::npos)) {
    std::string path = job.expand(options.summaryJson, -1), error;
    auto roles = [&](const uint64_t(&values)[DDPRT_ROLE_COUNT]) {
      const char *names[] = {"gradient", "uncompressed", "warmup", "powersgd_p",
                             "powersgd_q"};
      std::string text = "{";
      for (int r = 0; r < DDPRT_ROLE_COUNT; ++r)
        text += std::string(r ? ", " : "") + "\"" + names[r] +
                "\": " + std::to_string(values[r]);
      return text + "}";
    };
    // Mean milliseconds per step inside the runtime's calls, by phase.
    double perStep = options.steps ? 1e3 / options.steps : 0.0;
    std::ostringstream out;
    out << "{\n  \"rank\": " << job.rank
        << ",\n  \"world_size\": " << job.worldSize << ",\n  \"backend\": \""
        << job.backendName << "\",\n  \"steps\": " << options.steps;
    out << ",\n  \"arguments\": [";
    for (size_t a = 0; a < signature.arguments.size(); ++a)
      out << (a ? ", " : "") << quoted(argumentName(signature, a));
    out << "]"
        << ",\n  \"ms_per_step\": " << fixed(median * 1e3, 6)
        << ",\n  \"ms_per_step_mean\": " << fixed(mean * 1e3, 6)
        << ",\n  \"elements_sent_per_step\": " << lastStepElements
        << ",\n  \"bytes_sent_per_step\": " << lastStepBytes
        << ",\n  \"elements_sent_total\": " << totalElements
        << ",\n  \"elements_before_compression\": "
        << total.elements_before_compression
        << ",\n  \"elements_after_compression\": "
        << total.elements_after_compression
        << ",\n  \"collectives\": " << roles(total.collectives)
        << ",\n  \"elements_sent\": " << roles(total.elements_sent)
        << ",\n  \"bytes_sent\": " << roles(total.bytes_sent)
        << ",\n  \"nonfinite_skips\": " << total.nonfinite_skips
        << ",\n  \"warmup_steps\": " << warmupSteps
        << ",\n  \"powersgd_steps\": " << powersgdSteps
        << ",\n  \"ms_in_runtime_per_step\": {\"communication\": "
        << fixed(total.seconds[DDPRT_PHASE_COMMUNICATION] * perStep, 6)
        << ", \"compression\": "
        << fixed(total.seconds[DDPRT_PHASE_COMPRESSION] * perStep, 6)
        << ", \"decompression\": "
        << fixed(total.seconds[DDPRT_PHASE_DECOMPRESSION] * perStep, 6)
        << ", \"cast\": " << fixed(total.seconds[DDPRT_PHASE_CAST] * perStep, 6)
        << "},\n  \"series\": [";
    // One object per step: its number, time (the slowest rank's), what
    // this rank sent (in all and by role) and its phase.
    for (size_t k = 0; k < series.size(); ++k) {
      const StepRecord &record = series[k];
      out << (k ? ",\n    " : "\n    ") << "{\"step\": " << record.step
          << ", \"ms\": " << fixed(record.seconds * 1e3, 6)
          << ", \"elements_sent\": " << record.elements
          << ", \"bytes_sent\": " << record.bytes << ", \"phase\": \""
          << record.phase
          << "\", \"elements_by_role\": " << roles(record.elementsByRole)
          << "}";
    }
    out << (series.empty() ? "]\n}\n" : "\n  ]\n}\n");
    // If the directory cannot be made, opening the file says why.
    (void)npy::createDirectories(npy::parentPath(path), error);
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    if (file)
      file << out.str();
    file.close();
    if (!file) {
      job.error() << "cannot write '" << path << "': " << std::strerror(errno)
                  << "\n";
      finishOk = false;
    }
  }
  job.agreeOrStop(finishOk, "to write its results");
  job.finish();
  return 0;
}

} // namespace stephost
