//===- StepBuffers.h - a step's arguments and results -----------*- C++ -*-===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// The host buffers a compiled step reads and writes: arguments read from
// .npy files or an .npz archive, results written to .npy files, and the
// memref descriptor words through which the packed entry takes and gives
// them.
//
//===----------------------------------------------------------------------===//

#ifndef DDPRT_HOST_STEPBUFFERS_H
#define DDPRT_HOST_STEPBUFFERS_H

#include "Job.h"
#include "MemRef.h"
#include "Npy.h"
#include "RunOptions.h"
#include "StepSignature.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace stephost {

/// A host buffer the step reads or wrote, with its memref descriptor words:
/// allocated, aligned, offset, sizes, strides.
struct Buffer {
  const TensorSpec *type = nullptr;
  void *allocated = nullptr;
  void *aligned = nullptr;
  std::vector<int64_t> sizes;

  int64_t numElements() const;
  size_t bytes() const;
  /// Gives the memory back to the allocator (Memory.h).
  void release();
};

/// Where each argument of a step comes from: a .npy per argument (--input,
/// in order or one pattern with {name}) or an array of an .npz named after
/// it (--inputs).
class InputReader {
public:
  InputReader(const Job &job, const StepSignature &signature,
              const RunOptions &options)
      : job(job), signature(signature), options(options) {}

  /// Reads argument `a` of step `step` into a fresh buffer.
  bool read(size_t a, int64_t step, Buffer &buffer, std::string &error);

  /// After the reads of a step: the archives are closed; with `report`,
  /// rank 0 says which arrays of them no argument took.
  void endStep(bool report);

private:
  const Job &job;
  const StepSignature &signature;
  const RunOptions &options;
  std::map<std::string, std::unique_ptr<npy::Archive>> archives;
  std::map<std::string, std::set<std::string>> taken;
};

/// The array of `archive` that argument `a` is read from: the one named
/// after it, or for an unnamed argument np.savez's positional `arr_<a>`;
/// empty if the archive holds neither.
std::string archiveKey(const npy::Archive &archive,
                       const StepSignature &signature, size_t a);

/// A copy of `buffer` as an array.
npy::Array toArray(const Buffer &buffer);
/// Writes `buffer` as a .npy file.
bool writeOutput(const std::string &path, const Buffer &buffer,
                 std::string &error);

/// The packed calling convention's words of `arguments`: each buffer's
/// descriptor (MemRef.h; offset 0, row-major strides).
std::vector<int64_t> descriptorWords(const std::vector<Buffer> &arguments);
/// The words the step's returned descriptors take.
size_t resultWordCount(const std::vector<TensorSpec> &resultTypes);
/// The results the step returned in `storage`; they belong to the caller
/// (freshly allocated, or an argument's buffer returned without a copy).
std::vector<Buffer> resultsFromWords(const std::vector<TensorSpec> &resultTypes,
                                     const std::vector<int64_t> &storage);

} // namespace stephost

#endif // DDPRT_HOST_STEPBUFFERS_H
