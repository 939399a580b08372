//===- Options.cpp - ddprt_options read, written and checked --------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "Options.h"

#include "SimulatedLink.h"
#include "Validation.h"

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

namespace ddprt {

namespace {

/// A field of ddprt_options after `size` and `version`, in order. Fields
/// are only ever appended.
struct OptionsField {
  size_t offset, size;
};
#define DDPRT_OPTIONS_FIELD(name)                                              \
  OptionsField { offsetof(ddprt_options, name), sizeof(ddprt_options::name) }
constexpr OptionsField kOptionsFields[] = {
    DDPRT_OPTIONS_FIELD(backend),
    DDPRT_OPTIONS_FIELD(timeout_seconds),
    DDPRT_OPTIONS_FIELD(check_shapes),
    DDPRT_OPTIONS_FIELD(simulated_link_gbps),
    DDPRT_OPTIONS_FIELD(simulated_link_latency_us),
    DDPRT_OPTIONS_FIELD(ranks_per_node),
    DDPRT_OPTIONS_FIELD(join_handle),
    DDPRT_OPTIONS_FIELD(join),
    DDPRT_OPTIONS_FIELD(join_rank),
    DDPRT_OPTIONS_FIELD(join_world_size),
    DDPRT_OPTIONS_FIELD(nccl_unique_id),
    DDPRT_OPTIONS_FIELD(device),
    DDPRT_OPTIONS_FIELD(stream),
};
#undef DDPRT_OPTIONS_FIELD

/// The first version whose ddprt_options and ddprt_counters had `size` and
/// `version`.
constexpr unsigned kFirstStructVersion = 100; // 0.1.0

/// The first version whose ddprt_counters has this runtime's roles (before
/// it, PowerSGD's P and Q had their own, and the arrays had six).
constexpr unsigned kFirstCountersVersion = 200; // 0.2.0

/// sizeof of a ddprt_options whose last field is `last`: each older layout
/// is a prefix of this one, padded to the same alignment (that of size_t).
constexpr size_t layoutSize(const OptionsField &last) {
  size_t end = last.offset + last.size, align = alignof(ddprt_options);
  return (end + align - 1) / align * align;
}
// A caller's struct ends at the padded end of its last field: the first
// field a later version appends must start past it, else it is read from
// the padding, the caller's garbage. 0.3.0's struct ended at
// ranks_per_node.
static_assert(offsetof(ddprt_options, join_handle) >=
                  layoutSize(OptionsField{
                      offsetof(ddprt_options, ranks_per_node), sizeof(int)}),
              "0.4.0's first field starts past 0.3.0's struct");
static_assert(layoutSize(kOptionsFields[std::size(kOptionsFields) - 1]) ==
                  sizeof(ddprt_options),
              "every field of ddprt_options is in kOptionsFields");

std::string versionText(unsigned version) {
  return std::to_string(version / 10000) + "." +
         std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

/// The check of a struct the caller fills with its size and version
/// (ddprt_options, ddprt_counters): refuses a size larger than this
/// runtime's (`ownSize`) or none it knows (`knownSize` false), and a
/// version newer than this runtime's or older than the first with these
/// fields, saying how to fill it (`fill`). `what` names it ("options").
Error checkCallerStruct(const char *what, const char *type, size_t size,
                        bool knownSize, size_t ownSize, unsigned version,
                        const std::string &fill) {
  std::string name = what;
  if (size > ownSize)
    return invalid(name + ".size is " + std::to_string(size) +
                   " bytes, more than this runtime's " + type + " (" +
                   std::to_string(ownSize) +
                   "): the caller was built with a newer ddprt.h than this "
                   "runtime (" +
                   versionText(DDPRT_VERSION) + ")");
  if (!knownSize)
    return invalid(name + ".size is " + std::to_string(size) +
                   " bytes, which is no " + type +
                   " this runtime knows: " + fill);
  if (version > unsigned(DDPRT_VERSION))
    return invalid(name + ".version is " + std::to_string(version) + " (" +
                   versionText(version) + "), newer than this runtime (" +
                   versionText(DDPRT_VERSION) +
                   "): the caller was built with a newer ddprt.h");
  if (version < kFirstStructVersion)
    return invalid(name + ".version is " + std::to_string(version) +
                   ", which is no ddprt version: " + fill);
  return Error::success();
}

/// Refuses a `given` whose size or version this runtime does not know.
Error checkOptionsLayout(const ddprt_options *given) {
  bool knownSize = false;
  for (const OptionsField &field : kOptionsFields)
    knownSize |= given->size == layoutSize(field);
  return checkCallerStruct("options", "ddprt_options", given->size, knownSize,
                           sizeof(ddprt_options), given->version,
                           "fill the options with ddprt_default_options or "
                           "DDPRT_OPTIONS_INITIALIZER before changing fields");
}

/// Copies the fields of ddprt_options that lie within `size` bytes.
void copyOptionsFields(void *to, const void *from, size_t size) {
  for (const OptionsField &field : kOptionsFields)
    if (field.offset + field.size <= size)
      std::memcpy(static_cast<char *>(to) + field.offset,
                  static_cast<const char *>(from) + field.offset, field.size);
}

} // namespace

Error readOptions(const ddprt_options *given, ddprt_options &options) {
  ddprt_default_options(&options);
  if (!given)
    return Error::success();
  DDPRT_TRY(checkOptionsLayout(given));
  // Only the fields the caller's struct has; the others keep the defaults.
  copyOptionsFields(&options, given, given->size);
  return Error::success();
}

Error writeOptions(const ddprt_options &options, ddprt_options *given) {
  if (!given)
    return invalid("the options pointer is null");
  DDPRT_TRY(checkOptionsLayout(given));
  copyOptionsFields(given, &options, given->size);
  return Error::success();
}

Error writeCounters(const ddprt_counters &counters, ddprt_counters *given) {
  if (!given)
    return invalid("the counters pointer is null");
  // One layout so far (0.2.0); a later one appends fields and lists the
  // older sizes here. 0.1.0's had other roles: its size is refused first.
  const char *fill = "fill the counters with ddprt_default_counters or "
                     "DDPRT_COUNTERS_INITIALIZER first";
  if (given->version >= kFirstStructVersion &&
      given->version < kFirstCountersVersion)
    return invalid("counters.version is " + std::to_string(given->version) +
                   " (" + versionText(given->version) +
                   "): ddprt_counters before " +
                   versionText(kFirstCountersVersion) +
                   " counted other roles; rebuild the caller with this "
                   "runtime's ddprt.h (" +
                   versionText(DDPRT_VERSION) + ")");
  DDPRT_TRY(checkCallerStruct("counters", "ddprt_counters", given->size,
                              given->size == sizeof(ddprt_counters),
                              sizeof(ddprt_counters), given->version, fill));
  size_t size = given->size;
  unsigned version = given->version;
  std::memcpy(given, &counters, size);
  given->size = size;
  given->version = version;
  return Error::success();
}

Error readSimulatedLinkVariable(ddprt_options &options) {
  const char *value = std::getenv(kSimulatedLinkVariable);
  if (!value || !*value)
    return Error::success();
  SimulatedLink link;
  std::string error;
  if (!parseSimulatedLink(value, link, error))
    return invalid(std::string(kSimulatedLinkVariable) + "=" + value + ": " +
                   error);
  options.simulated_link_gbps = link.gbps;
  options.simulated_link_latency_us = link.latencyUs;
  return Error::success();
}

Error readRanksPerNodeVariable(ddprt_options &options) {
  const char *value = std::getenv(kRanksPerNodeVariable);
  if (!value || !*value)
    return Error::success();
  char *end = nullptr;
  errno = 0;
  long k = std::strtol(value, &end, 10);
  if (errno != 0 || *end != '\0' || k < 0 || k > INT_MAX)
    return invalid(std::string(kRanksPerNodeVariable) + "=" + value +
                   ": not a number of ranks (0 for the processor names)");
  options.ranks_per_node = int(k);
  return Error::success();
}

Error checkOptions(const ddprt_options &options) {
  if (!(options.timeout_seconds >= 0.0))
    return invalid("timeout_seconds must be >= 0");
  if (options.ranks_per_node < 0)
    return invalid("ranks_per_node must be >= 0 (0: ranks with the same "
                   "processor name share a node)");
  if (asInt(options.backend) != DDPRT_BACKEND_CPU &&
      asInt(options.backend) != DDPRT_BACKEND_CUDA)
    return invalid("unknown backend " + std::to_string(asInt(options.backend)));
#if !defined(DDPRT_HAVE_CUDA)
  if (options.backend == DDPRT_BACKEND_CUDA)
    return fail(DDPRT_ERROR_UNSUPPORTED,
                "this build of the runtime has no CUDA backend");
#endif
  std::string error;
  if (!checkSimulatedLink(options.simulated_link_gbps,
                          options.simulated_link_latency_us, error))
    return invalid(
        "simulated_link_gbps " + std::to_string(options.simulated_link_gbps) +
        ", simulated_link_latency_us " +
        std::to_string(options.simulated_link_latency_us) + ": " + error);
  if (options.backend == DDPRT_BACKEND_CUDA && options.simulated_link_gbps > 0)
    return fail(DDPRT_ERROR_UNSUPPORTED,
                "the simulated link models the CPU backend's MPI collectives; "
                "the CUDA backend's run on the device (NCCL)");
  return checkJoin(options);
}

Error checkJoin(const ddprt_options &options) {
  if (options.device < -1)
    return invalid("device " + std::to_string(options.device) +
                   ": a CUDA device number, or -1 for the rank's own");
  if (options.backend != DDPRT_BACKEND_CUDA &&
      (options.device != -1 || options.stream))
    return invalid("device and stream are the CUDA backend's");
  switch (asInt(options.join)) {
  case DDPRT_JOIN_NONE:
    if (options.join_handle)
      return invalid("join_handle is set but join is DDPRT_JOIN_NONE");
    return Error::success();
  case DDPRT_JOIN_MPI:
#if !defined(DDPRT_HAVE_MPI)
    return fail(DDPRT_ERROR_UNSUPPORTED,
                "join is DDPRT_JOIN_MPI but this build of the runtime has no "
                "MPI");
#endif
    if (!options.join_handle)
      return invalid("join is DDPRT_JOIN_MPI but join_handle is null (the "
                     "address of an MPI_Comm)");
    return Error::success();
  case DDPRT_JOIN_NCCL_COMM:
  case DDPRT_JOIN_NCCL_UNIQUE_ID: {
    const char *kind = options.join == DDPRT_JOIN_NCCL_COMM
                           ? "DDPRT_JOIN_NCCL_COMM"
                           : "DDPRT_JOIN_NCCL_UNIQUE_ID";
    if (options.backend != DDPRT_BACKEND_CUDA)
      return invalid(std::string("join is ") + kind +
                     ", which only the CUDA backend can join");
    if (options.join == DDPRT_JOIN_NCCL_COMM && !options.join_handle)
      return invalid("join is DDPRT_JOIN_NCCL_COMM but join_handle is null "
                     "(an ncclComm_t)");
    if (options.join_world_size < 1 || options.join_rank < 0 ||
        options.join_rank >= options.join_world_size)
      return invalid(std::string("join is ") + kind + " but join_rank " +
                     std::to_string(options.join_rank) +
                     " is no rank of join_world_size " +
                     std::to_string(options.join_world_size));
    if (options.ranks_per_node > 0 &&
        options.join_world_size % options.ranks_per_node != 0)
      return invalid("ranks_per_node " +
                     std::to_string(options.ranks_per_node) +
                     " does not divide join_world_size " +
                     std::to_string(options.join_world_size));
    return Error::success();
  }
  default:
    return invalid("unknown join kind " + std::to_string(asInt(options.join)));
  }
}

} // namespace ddprt
