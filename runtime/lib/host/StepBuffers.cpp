//===- StepBuffers.cpp - a step's arguments and results -------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "StepBuffers.h"

#include "Format.h"
#include "Memory.h"

#include <cstring>

namespace stephost {

int64_t Buffer::numElements() const {
  int64_t n = 1;
  for (int64_t s : sizes)
    n *= s;
  return n;
}

size_t Buffer::bytes() const {
  return size_t(numElements()) * elementBytes(type->dtype);
}

void Buffer::release() {
  releaseBuffer(allocated);
  allocated = aligned = nullptr;
}

namespace {

/// Checks the type and shape of `array` (its header will do) against
/// `type`; `source` names it in messages ("argument 0 ('x.npy')").
bool matchesType(const npy::Array &array, const TensorSpec &type,
                 const std::string &source, std::string &error) {
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
  return true;
}

/// Checks `array` against `type` and moves it into a fresh buffer.
bool toBuffer(const npy::Array &array, const TensorSpec &type,
              const std::string &source, Buffer &buffer, std::string &error) {
  if (!matchesType(array, type, source, error))
    return false;
  auto fail = [&](const std::string &why) {
    error = source + ": " + why;
    return false;
  };
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

} // namespace

bool InputReader::read(size_t a, int64_t step, Buffer &buffer,
                       std::string &error) {
  const TensorSpec &type = signature.arguments[a];
  std::string name = argumentName(signature, a);
  std::string argument = "argument " + std::to_string(a);
  npy::Array array;
  if (options.inputArchive.empty()) {
    const std::string &pattern =
        options.usesOnePatternForAll() ? options.inputs[0] : options.inputs[a];
    std::string path = job.expand(pattern, step, -1, name);
    std::string source = argument + " ('" + path + "')";
    if (!npy::read(path, array, error,
                   [&](const npy::Array &header, std::string &why) {
                     return matchesType(header, type, source, why);
                   }))
      return false;
    return toBuffer(array, type, argument + " ('" + path + "')", buffer, error);
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
  std::string key = archiveKey(*archive, signature, a);
  bool unnamed = !argumentHasName(signature, a);
  if (key.empty()) {
    std::vector<std::string> held = archive->names();
    error =
        argument + " ('" + name + "'): '" + path + "' has no array '" + name +
        "' (it holds " +
        (held.empty() ? std::string("none")
                      : std::to_string(held.size()) + ": " + listNames(held)) +
        ")";
    if (unnamed)
      error += "; the argument has no name (no ddp.name attribute, no name "
               "location)";
    return false;
  }
  taken[path].insert(key);
  std::string source = argument + " ('" + key + "' in '" + path + "')";
  if (!archive->read(key, array, error,
                     [&](const npy::Array &header, std::string &why) {
                       return matchesType(header, type, source, why);
                     }))
    return false;
  return toBuffer(array, type, argument + " ('" + key + "' in '" + path + "')",
                  buffer, error);
}

void InputReader::endStep(bool report) {
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

std::string archiveKey(const npy::Archive &archive,
                       const StepSignature &signature, size_t a) {
  std::string name = argumentName(signature, a);
  if (archive.contains(name))
    return name;
  // np.savez(*arrays) names positional arrays arr_0, arr_1, ...
  std::string positional = "arr_" + std::to_string(a);
  if (!argumentHasName(signature, a) && archive.contains(positional))
    return positional;
  return "";
}

npy::Array toArray(const Buffer &buffer) {
  npy::Array array;
  array.descr = buffer.type->dtype;
  array.shape = buffer.sizes;
  const char *data = static_cast<const char *>(buffer.aligned);
  array.data.assign(data, data + buffer.bytes());
  return array;
}

bool writeOutput(const std::string &path, const Buffer &buffer,
                 std::string &error) {
  return npy::write(path, toArray(buffer), error);
}

std::vector<int64_t> descriptorWords(const std::vector<Buffer> &arguments) {
  std::vector<int64_t> words;
  for (const Buffer &buffer : arguments)
    appendDescriptor(words, buffer.allocated, buffer.aligned, buffer.sizes);
  return words;
}

size_t resultWordCount(const std::vector<TensorSpec> &resultTypes) {
  size_t words = 0;
  for (const TensorSpec &type : resultTypes)
    words += descriptorWordCount(type.shape.size());
  return words;
}

std::vector<Buffer> resultsFromWords(const std::vector<TensorSpec> &resultTypes,
                                     const std::vector<int64_t> &storage) {
  std::vector<Buffer> results(resultTypes.size());
  size_t at = 0;
  for (size_t r = 0; r < results.size(); ++r) {
    Buffer &buffer = results[r];
    buffer.type = &resultTypes[r];
    StridedMemRefView memref{storage.data() + at, resultTypes[r].shape.size()};
    buffer.allocated = memref.allocated();
    buffer.aligned = memref.data(elementBytes(resultTypes[r].dtype));
    buffer.sizes.assign(memref.sizes(), memref.sizes() + memref.rank);
    at += descriptorWordCount(memref.rank);
  }
  return results;
}

} // namespace stephost
