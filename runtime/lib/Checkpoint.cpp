//===- Checkpoint.cpp - every state of a rank in one file -----------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The format: "DDPRTCK1", rank and world size (u32 each), the number of
// states (u64), then per state its name (u32 size, bytes), dtype (u32),
// element count (i64) and raw data, and an FNV-1a checksum (u64) of all of
// it. Native byte order: a checkpoint is read back by the same job.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "Validation.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <set>
#include <string>
#include <vector>

#include <sys/stat.h>

namespace ddprt {

namespace {

uint64_t checksum(const std::vector<char> &bytes) {
  uint64_t hash = 1469598103934665603ull; // FNV-1a
  for (char c : bytes) {
    hash ^= uint8_t(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

/// `names` for a message: quoted, the first few, "none" when empty.
std::string listNames(const std::vector<std::string> &names) {
  constexpr size_t shown = 6;
  if (names.empty())
    return "none";
  std::string text;
  for (size_t i = 0; i < names.size() && i < shown; ++i)
    text += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > shown)
    text += " and " + std::to_string(names.size() - shown) + " more";
  return text;
}

/// Reads the file at `path`, refusing one longer than `limit` bytes
/// (/dev/zero or a wrong file must not fill the memory first).
Error readFile(const char *path, size_t limit, std::vector<char> &bytes) {
  auto ioError = [&](int code) {
    return fail(DDPRT_ERROR_IO, std::string("cannot read checkpoint '") + path +
                                    "': " + std::strerror(code));
  };
  std::FILE *file = std::fopen(path, "rb");
  if (!file)
    return ioError(errno);
  char chunk[1 << 16];
  size_t got;
  bool tooLong = false;
  while ((got = std::fread(chunk, 1, sizeof(chunk), file)) > 0) {
    if (bytes.size() + got > limit) {
      tooLong = true;
      break;
    }
    bytes.insert(bytes.end(), chunk, chunk + got);
  }
  bool failed = !tooLong && std::ferror(file);
  int code = errno;
  std::fclose(file);
  if (tooLong)
    return fail(DDPRT_ERROR_IO,
                std::string("checkpoint '") + path + "' is longer than " +
                    std::to_string(limit) + " bytes, far longer than a " +
                    "checkpoint of this job's states: not a checkpoint of " +
                    "this job");
  if (failed)
    return ioError(code == 0 ? EIO : code);
  return Error::success();
}

constexpr char kMagic[8] = {'D', 'D', 'P', 'R', 'T', 'C', 'K', '1'};

template <typename T> void append(std::vector<char> &out, const T &value) {
  const char *bytes = reinterpret_cast<const char *>(&value);
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

/// Reads from a byte range, failing cleanly past its end.
struct Reader {
  const std::vector<char> &bytes;
  size_t offset = 0;
  bool read(void *out, size_t size) {
    if (offset + size > bytes.size())
      return false;
    std::memcpy(out, bytes.data() + offset, size);
    offset += size;
    return true;
  }
};

Error writeCheckpoint(ddprt_context &context, const char *path) {
  Error error;
  std::vector<char> bytes(kMagic, kMagic + sizeof(kMagic));
  append(bytes, uint32_t(context.communicator->rank()));
  append(bytes, uint32_t(context.communicator->size()));
  append(bytes, uint64_t(context.states.size()));
  for (auto &[name, state] : context.states) {
    append(bytes, uint32_t(name.size()));
    bytes.insert(bytes.end(), name.begin(), name.end());
    append(bytes, uint32_t(state->dtype));
    append(bytes, int64_t(state->numel));
    size_t size = size_t(state->numel) * ddprt_dtype_size(state->dtype);
    size_t offset = bytes.size();
    bytes.resize(offset + size);
    if (state->onHost)
      std::memcpy(bytes.data() + offset, state->data, size);
    else if ((error = context.backend->copyToHost(bytes.data() + offset,
                                                  state->data, size)))
      return error;
  }
  append(bytes, checksum(bytes));
  // Writes `bytes` to `target`; 0 or the errno.
  auto writeTo = [&](const std::string &target) {
    std::FILE *file = std::fopen(target.c_str(), "wb");
    bool written = file && std::fwrite(bytes.data(), 1, bytes.size(), file) ==
                               bytes.size();
    int savedErrno = errno;
    if (file && std::fclose(file) != 0 && written) {
      written = false;
      savedErrno = errno;
    }
    return written ? 0 : (savedErrno ? savedErrno : EIO);
  };
  // A device or a pipe (/dev/null) is written into: renaming a file over
  // it would replace the device with a regular file.
  struct stat info;
  if (::stat(path, &info) == 0 && !S_ISREG(info.st_mode) &&
      !S_ISDIR(info.st_mode)) {
    if (int code = writeTo(path))
      return fail(DDPRT_ERROR_IO, std::string("cannot write checkpoint '") +
                                      path + "': " + std::strerror(code));
    return Error::success();
  }
  // Write a temporary file and rename it: a crash leaves the old checkpoint.
  std::string temporary = std::string(path) + ".tmp." +
                          std::to_string(context.communicator->rank());
  if (int code = writeTo(temporary)) {
    std::remove(temporary.c_str());
    return fail(DDPRT_ERROR_IO, "cannot write checkpoint '" + temporary +
                                    "': " + std::strerror(code));
  }
  if (std::rename(temporary.c_str(), path) != 0) {
    std::remove(temporary.c_str());
    return fail(DDPRT_ERROR_IO, std::string("cannot rename checkpoint to '") +
                                    path + "': " + std::strerror(errno));
  }
  return Error::success();
}

Error readCheckpoint(ddprt_context &context, const char *path) {
  Error error;
  // The checkpoint this job's states make (magic, rank, world, count, each
  // state's header and data, the checksum) is read whole; a file more than
  // twice as long (and 1 MiB) is not one, and is not read to its end. A
  // checkpoint of another job within that is read, to say which state
  // differs.
  size_t exact = sizeof(kMagic) + 16 + 8;
  for (const auto &[name, state] : context.states)
    exact += 16 + name.size() +
             size_t(state->numel) * ddprt_dtype_size(state->dtype);
  size_t limit = 2 * exact + (size_t(1) << 20);
  std::vector<char> bytes;
  DDPRT_TRY(readFile(path, limit, bytes));
  auto corrupt = [&](const std::string &why) {
    return fail(DDPRT_ERROR_IO,
                std::string("checkpoint '") + path + "' is not valid: " + why);
  };
  if (bytes.size() < sizeof(kMagic) + 8 ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return corrupt("not a ddprt checkpoint");
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  std::vector<char> payload(bytes.begin(), bytes.end() - 8);
  if (checksum(payload) != stored)
    return corrupt("checksum mismatch (truncated or damaged)");
  Reader reader{payload, sizeof(kMagic)};
  uint32_t rank = 0, world = 0;
  uint64_t count = 0;
  if (!reader.read(&rank, 4) || !reader.read(&world, 4) ||
      !reader.read(&count, 8))
    return corrupt("truncated header");
  if (int(rank) != context.communicator->rank() ||
      int(world) != context.communicator->size())
    return fail(DDPRT_ERROR_MISMATCH,
                std::string("checkpoint '") + path + "' is rank " +
                    std::to_string(rank) + " of " + std::to_string(world) +
                    ", this is rank " +
                    std::to_string(context.communicator->rank()) + " of " +
                    std::to_string(context.communicator->size()));
  // Validate everything before touching any state: first every entry's
  // header, then the names against the job's (all differences at once: a
  // renamed gradient shows as one missing on each side).
  struct Entry {
    std::string name;
    uint32_t dtype;
    int64_t numel;
    size_t offset;
  };
  std::vector<Entry> entries;
  std::set<std::string> seen;
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t nameSize = 0, dtype = 0;
    int64_t numel = 0;
    if (!reader.read(&nameSize, 4) || nameSize > payload.size())
      return corrupt("truncated state name");
    std::string name(nameSize, '\0');
    if (!reader.read(name.data(), nameSize) || !reader.read(&dtype, 4) ||
        !reader.read(&numel, 8))
      return corrupt("truncated state header");
    // None twice, and (below) the job's names exactly: every state is
    // restored (a state listed twice would leave another one silently
    // zero).
    if (!seen.insert(name).second)
      return corrupt("it holds state '" + name + "' twice");
    size_t element = dtypeSize(int(dtype));
    if (element == 0)
      return corrupt("state '" + name + "' has an unknown dtype " +
                     std::to_string(dtype));
    // Sizes come from the file: bounded by what is left of it.
    if (numel < 0 ||
        uint64_t(numel) > (payload.size() - reader.offset) / element)
      return corrupt("truncated data of state '" + name + "'");
    size_t size = size_t(numel) * element;
    entries.push_back({std::move(name), dtype, numel, reader.offset});
    reader.offset += size;
  }
  if (reader.offset != payload.size())
    return corrupt(std::to_string(payload.size() - reader.offset) +
                   " bytes follow the last state");
  std::vector<std::string> onlyFile, onlyJob;
  for (const Entry &entry : entries)
    if (!context.states.count(entry.name))
      onlyFile.push_back(entry.name);
  for (const auto &[name, state] : context.states)
    if (!seen.count(name))
      onlyJob.push_back(name);
  if (!onlyFile.empty() || !onlyJob.empty())
    return fail(DDPRT_ERROR_MISMATCH,
                std::string("checkpoint '") + path +
                    "' does not hold this job's states: only in the "
                    "checkpoint: " +
                    listNames(onlyFile) +
                    "; only in this job: " + listNames(onlyJob) +
                    " (states are named after the gradients they compress: "
                    "a renamed gradient or another compression names them "
                    "differently)");
  for (const Entry &entry : entries) {
    const ddprt_state &state = *context.states.at(entry.name);
    if (uint32_t(state.dtype) != entry.dtype || state.numel != entry.numel)
      return fail(DDPRT_ERROR_MISMATCH, "checkpoint state '" + entry.name +
                                            "' has another dtype or size");
  }
  for (const Entry &entry : entries) {
    ddprt_state &state = *context.states.at(entry.name);
    size_t size = size_t(state.numel) * ddprt_dtype_size(state.dtype);
    if (state.onHost)
      std::memcpy(state.data, payload.data() + entry.offset, size);
    else if ((error = context.backend->copyFromHost(
                  state.data, payload.data() + entry.offset, size)))
      return error;
  }
  return Error::success();
}

/// Checkpoints hold a host copy of every state: running out of memory
/// there is an error, not an exception through the C ABI.
Error noThrow(Error (*body)(ddprt_context &, const char *),
              ddprt_context &context, const char *path) {
  try {
    return body(context, path);
  } catch (const std::exception &exception) {
    return fail(DDPRT_ERROR_BACKEND,
                std::string("checkpoint: out of resources: ") +
                    exception.what());
  }
}

} // namespace

Error saveCheckpoint(ddprt_context &context, const char *path) {
  return noThrow(writeCheckpoint, context, path);
}

Error loadCheckpoint(ddprt_context &context, const char *path) {
  return noThrow(readCheckpoint, context, path);
}

} // namespace ddprt
