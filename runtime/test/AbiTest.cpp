//===- AbiTest.cpp - the versioned ABI and its thread semantics -----------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// What ddprt.h promises about versions (ddprt_get_version, the version
// macros and the project's VERSION file), the extensible ddprt_options
// (sizes and versions refused and accepted, an older and smaller struct
// read only as far as its size, and written back so by ddprt_get_options),
// the simulated link's options and DDPRT_SIMULATED_LINK, and the
// process-wide, thread-safe current context and error handler.
//
//===----------------------------------------------------------------------===//

#include "ddprt/ddprt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

//===----------------------------------------------------------------------===//
// Version
//===----------------------------------------------------------------------===//

TEST(AbiVersion, MatchesTheVersionFile) {
  int version = -1;
  ASSERT_EQ(ddprt_get_version(&version), DDPRT_OK);
  EXPECT_EQ(version, DDPRT_VERSION);
  // DDPRT_PROJECT_VERSION is the VERSION file's line, passed by CMake.
  std::string text = std::to_string(version / 10000) + "." +
                     std::to_string(version / 100 % 100) + "." +
                     std::to_string(version % 100);
  EXPECT_EQ(text, DDPRT_PROJECT_VERSION);
  EXPECT_EQ(DDPRT_VERSION, DDPRT_VERSION_MAJOR * 10000 +
                               DDPRT_VERSION_MINOR * 100 + DDPRT_VERSION_PATCH);
  EXPECT_EQ(ddprt_get_version(nullptr), DDPRT_ERROR_INVALID_ARGUMENT);
}

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

TEST(AbiOptions, InitializerAndDefaultsAgree) {
  ddprt_options initialized = DDPRT_OPTIONS_INITIALIZER;
  EXPECT_EQ(initialized.size, sizeof(ddprt_options));
  EXPECT_EQ(initialized.version, unsigned(DDPRT_VERSION));
  ddprt_options filled;
  std::memset(&filled, 0xab, sizeof filled);
  ddprt_default_options(&filled);
  EXPECT_EQ(filled.size, initialized.size);
  EXPECT_EQ(filled.version, initialized.version);
  EXPECT_EQ(filled.backend, initialized.backend);
  EXPECT_EQ(filled.timeout_seconds, initialized.timeout_seconds);
  EXPECT_EQ(filled.check_shapes, initialized.check_shapes);
  EXPECT_EQ(filled.simulated_link_gbps, initialized.simulated_link_gbps);
  EXPECT_EQ(filled.simulated_link_latency_us,
            initialized.simulated_link_latency_us);
  EXPECT_EQ(initialized.simulated_link_gbps, 0.0) << "off by default";
  EXPECT_EQ(initialized.join, DDPRT_JOIN_NONE);
  EXPECT_EQ(initialized.join_handle, nullptr);
  EXPECT_EQ(initialized.device, -1) << "the rank's own device by default";
  EXPECT_EQ(initialized.stream, nullptr);
  EXPECT_EQ(filled.join, initialized.join);
  EXPECT_EQ(filled.join_handle, initialized.join_handle);
  EXPECT_EQ(filled.join_rank, initialized.join_rank);
  EXPECT_EQ(filled.join_world_size, initialized.join_world_size);
  EXPECT_EQ(filled.device, initialized.device);
  EXPECT_EQ(filled.stream, initialized.stream);
  for (unsigned char byte : filled.nccl_unique_id)
    EXPECT_EQ(byte, 0);
}

/// ddprt_init with `options` (which may be a smaller, older struct); the
/// status, and the message if it failed.
ddprt_status init(const void *options, std::string &message) {
  ddprt_context *context = nullptr;
  ddprt_status status =
      ddprt_init(static_cast<const ddprt_options *>(options), &context);
  message = ddprt_last_error(context);
  if (context)
    ddprt_finalize(context);
  return status;
}

TEST(AbiOptions, AStructNotFilledIsRefused) {
  ddprt_options options = {}; // size 0, version 0
  options.timeout_seconds = 5;
  std::string message;
  EXPECT_EQ(init(&options, message), DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("options.size is 0 bytes"), std::string::npos)
      << message;
  EXPECT_NE(message.find("DDPRT_OPTIONS_INITIALIZER"), std::string::npos)
      << message;
}

TEST(AbiOptions, SizesItDoesNotKnowAreRefused) {
  std::string message;
  // Larger: a caller built against a newer ddprt.h, whose fields this
  // runtime cannot honour.
  struct {
    ddprt_options known;
    double newerField;
  } newer = {DDPRT_OPTIONS_INITIALIZER, 1.0};
  newer.known.size = sizeof newer;
  EXPECT_EQ(init(&newer, message), DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("newer ddprt.h"), std::string::npos) << message;
  // Smaller, but no layout ddprt_options ever had.
  for (size_t size : {size_t(8), size_t(20), sizeof(ddprt_options) - 4}) {
    ddprt_options options = DDPRT_OPTIONS_INITIALIZER;
    options.size = size;
    EXPECT_EQ(init(&options, message), DDPRT_ERROR_INVALID_ARGUMENT) << size;
    EXPECT_NE(message.find("no ddprt_options this runtime knows"),
              std::string::npos)
        << message;
  }
}

TEST(AbiOptions, VersionsItDoesNotKnowAreRefused) {
  std::string message;
  ddprt_options options = DDPRT_OPTIONS_INITIALIZER;
  options.version = DDPRT_VERSION + 1;
  EXPECT_EQ(init(&options, message), DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("newer than this runtime"), std::string::npos)
      << message;
  options.version = 0;
  EXPECT_EQ(init(&options, message), DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("options.version is 0, which is no ddprt version"),
            std::string::npos)
      << message;
}

TEST(AbiCounters, AStructNotFilledOrOfAnUnknownLayoutIsRefused) {
  ddprt_options options = DDPRT_OPTIONS_INITIALIZER;
  ddprt_context *context = nullptr;
  ASSERT_EQ(ddprt_init(&options, &context), DDPRT_OK);
  ddprt_counters counters = DDPRT_COUNTERS_INITIALIZER;
  EXPECT_EQ(counters.size, sizeof(ddprt_counters));
  EXPECT_EQ(counters.version, unsigned(DDPRT_VERSION));
  ASSERT_EQ(ddprt_count_uncompressed(context, 7), DDPRT_OK);
  ASSERT_EQ(ddprt_get_counters(context, &counters), DDPRT_OK);
  EXPECT_EQ(counters.elements_before_compression, 7u);
  // The caller's size and version stay as it filled them.
  EXPECT_EQ(counters.size, sizeof(ddprt_counters));
  ddprt_counters filled;
  ddprt_default_counters(&filled);
  EXPECT_EQ(filled.size, sizeof(ddprt_counters));

  ddprt_counters zero = {}; // size 0, version 0
  EXPECT_EQ(ddprt_get_counters(context, &zero), DDPRT_ERROR_INVALID_ARGUMENT);
  std::string message = ddprt_last_error(context);
  EXPECT_NE(message.find("counters.size is 0 bytes"), std::string::npos)
      << message;
  EXPECT_NE(message.find("DDPRT_COUNTERS_INITIALIZER"), std::string::npos)
      << message;
  EXPECT_EQ(zero.elements_before_compression, 0u) << "nothing written";
  ddprt_counters larger = DDPRT_COUNTERS_INITIALIZER;
  larger.size += 8;
  EXPECT_EQ(ddprt_get_counters(context, &larger), DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ddprt_last_error(context)).find("newer ddprt.h"),
            std::string::npos);
  ddprt_counters newer = DDPRT_COUNTERS_INITIALIZER;
  newer.version = DDPRT_VERSION + 1;
  EXPECT_EQ(ddprt_get_counters(context, &newer), DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(
      std::string(ddprt_last_error(context)).find("newer than this runtime"),
      std::string::npos);
  ddprt_finalize(context);
}

/// ddprt_counters as 0.1.0 laid it out: six roles (PowerSGD's P and Q had
/// their own), so every array and the struct were longer.
struct CountersOf010 {
  size_t size;
  unsigned int version;
  uint64_t collectives[6], elements_sent[6], bytes_sent[6];
  uint64_t elements_before_compression, elements_after_compression;
  double seconds[DDPRT_PHASE_COUNT];
  uint64_t nonfinite_skips;
};

TEST(AbiCounters, CountersOfTheRolesBefore020AreRefusedUntouched) {
  ddprt_options options = DDPRT_OPTIONS_INITIALIZER;
  ddprt_context *context = nullptr;
  ASSERT_EQ(ddprt_init(&options, &context), DDPRT_OK);
  ASSERT_EQ(ddprt_count_uncompressed(context, 7), DDPRT_OK);
  CountersOf010 old = {};
  old.size = sizeof(CountersOf010);
  old.version = 100;
  EXPECT_EQ(
      ddprt_get_counters(context, reinterpret_cast<ddprt_counters *>(&old)),
      DDPRT_ERROR_INVALID_ARGUMENT);
  std::string message = ddprt_last_error(context);
  EXPECT_NE(message.find("counters.version is 100 (0.1.0)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("rebuild the caller"), std::string::npos) << message;
  EXPECT_EQ(old.elements_before_compression, 0u) << "nothing written";
  static_assert(DDPRT_ROLE_COUNT == 4);
  ddprt_finalize(context);
}

/// What callers built against a ddprt.h whose options ended earlier pass:
/// each older layout is a prefix of today's.
struct OptionsUpToBackend {
  size_t size;
  unsigned int version;
  ddprt_backend_kind backend;
};
struct OptionsUpToTimeout {
  size_t size;
  unsigned int version;
  ddprt_backend_kind backend;
  double timeout_seconds;
};
/// Before the simulated link.
struct OptionsUpToCheckShapes {
  size_t size;
  unsigned int version;
  ddprt_backend_kind backend;
  double timeout_seconds;
  int check_shapes;
};

/// `old` at the start of a full ddprt_options whose other bytes are
/// garbage (a NaN timeout, if it were read): what follows a smaller struct
/// in the caller's memory.
template <typename Old> ddprt_options withGarbageAfter(const Old &old) {
  static_assert(sizeof(Old) < sizeof(ddprt_options), "an older, smaller one");
  ddprt_options options;
  std::memset(&options, 0xff, sizeof options);
  std::memcpy(&options, &old, sizeof old);
  return options;
}

TEST(AbiOptions, AnOlderSmallerStructIsReadOnlyAsFarAsItsSize) {
  std::string message;
  // Up to the backend: the NaN timeout after it is not read.
  OptionsUpToBackend upToBackend = {sizeof(OptionsUpToBackend), DDPRT_VERSION,
                                    DDPRT_BACKEND_CPU};
  ddprt_options options = withGarbageAfter(upToBackend);
  EXPECT_EQ(init(&options, message), DDPRT_OK) << message;
  // ... and the backend within it is.
  upToBackend.backend = ddprt_backend_kind(7);
  options = withGarbageAfter(upToBackend);
  EXPECT_EQ(init(&options, message), DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("unknown backend 7"), std::string::npos) << message;
  // Up to the timeout: it is read (a negative one is refused), and the
  // garbage check_shapes after it is not.
  OptionsUpToTimeout upToTimeout = {sizeof(OptionsUpToTimeout), DDPRT_VERSION,
                                    DDPRT_BACKEND_CPU, 5.0};
  options = withGarbageAfter(upToTimeout);
  EXPECT_EQ(init(&options, message), DDPRT_OK) << message;
  upToTimeout.timeout_seconds = -1.0;
  options = withGarbageAfter(upToTimeout);
  EXPECT_EQ(init(&options, message), DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("timeout_seconds"), std::string::npos) << message;
  // Up to check_shapes: the garbage (NaN) simulated link after it is not
  // read.
  OptionsUpToCheckShapes upToCheckShapes = {
      sizeof(OptionsUpToCheckShapes), DDPRT_VERSION, DDPRT_BACKEND_CPU, 5.0, 1};
  options = withGarbageAfter(upToCheckShapes);
  EXPECT_EQ(init(&options, message), DDPRT_OK) << message;
}

/// ddprt_options as 0.3.0 wrote it: everything before the join fields.
struct OptionsOf030 {
  size_t size;
  unsigned int version;
  ddprt_backend_kind backend;
  double timeout_seconds;
  int check_shapes;
  double simulated_link_gbps;
  double simulated_link_latency_us;
  int ranks_per_node;
};

TEST(AbiOptions, JoiningIsChecked) {
  std::string message;
  // A 0.3.0 caller's struct: the join fields after it are not read.
  OptionsOf030 old = {
      sizeof(OptionsOf030), 300, DDPRT_BACKEND_CPU, 5.0, 1, 0.0, 0.0, 0};
  ddprt_options options = withGarbageAfter(old);
  EXPECT_EQ(init(&options, message), DDPRT_OK) << message;
  auto refused = [&](const ddprt_options &bad, const char *why) {
    EXPECT_EQ(init(&bad, message), DDPRT_ERROR_INVALID_ARGUMENT) << why;
    EXPECT_NE(message.find(why), std::string::npos) << message;
  };
  ddprt_options bad = DDPRT_OPTIONS_INITIALIZER;
  bad.join = DDPRT_JOIN_NCCL_UNIQUE_ID;
  bad.join_world_size = 1;
  refused(bad, "only the CUDA backend can join");
  bad = ddprt_options DDPRT_OPTIONS_INITIALIZER;
  bad.join = DDPRT_JOIN_MPI;
  refused(bad, "join_handle is null");
  bad = ddprt_options DDPRT_OPTIONS_INITIALIZER;
  bad.join = ddprt_join_kind(9);
  refused(bad, "unknown join kind 9");
  bad = ddprt_options DDPRT_OPTIONS_INITIALIZER;
  int anything = 0;
  bad.join_handle = &anything;
  refused(bad, "join is DDPRT_JOIN_NONE");
  bad = ddprt_options DDPRT_OPTIONS_INITIALIZER;
  bad.device = 0;
  refused(bad, "device and stream are the CUDA backend's");
  // On the CUDA backend: a runtime built without CUDA refuses the backend
  // first; one with it, the field.
  auto refusedOnCuda = [&](const ddprt_options &bad, const char *why) {
    ddprt_status status = init(&bad, message);
    if (status == DDPRT_ERROR_UNSUPPORTED &&
        message.find("no CUDA backend") != std::string::npos)
      return;
    EXPECT_EQ(status, DDPRT_ERROR_INVALID_ARGUMENT) << why;
    EXPECT_NE(message.find(why), std::string::npos) << message;
  };
  bad = ddprt_options DDPRT_OPTIONS_INITIALIZER;
  bad.backend = DDPRT_BACKEND_CUDA;
  bad.device = -2;
  refusedOnCuda(bad, "device -2");
  bad = ddprt_options DDPRT_OPTIONS_INITIALIZER;
  bad.backend = DDPRT_BACKEND_CUDA;
  bad.join = DDPRT_JOIN_NCCL_UNIQUE_ID;
  bad.join_rank = 2;
  bad.join_world_size = 2;
  refusedOnCuda(bad, "join_rank 2 is no rank of join_world_size 2");
}

TEST(AbiOptions, GetOptionsWritesOnlyAsFarAsTheCallersSize) {
  ddprt_options given = DDPRT_OPTIONS_INITIALIZER;
  given.timeout_seconds = 7.0;
  ddprt_context *context = nullptr;
  ASSERT_EQ(ddprt_init(&given, &context), DDPRT_OK)
      << ddprt_last_error(context);
  ddprt_options full;
  std::memset(&full, 0, sizeof full);
  full.size = sizeof full;
  full.version = DDPRT_VERSION;
  ASSERT_EQ(ddprt_get_options(context, &full), DDPRT_OK);
  EXPECT_EQ(full.timeout_seconds, 7.0);
  EXPECT_EQ(full.check_shapes, 1);
  // An older caller's struct, with a sentinel after it.
  struct {
    OptionsUpToTimeout old;
    char after[sizeof(ddprt_options)];
  } older;
  std::memset(&older, 0x5a, sizeof older);
  older.old.size = sizeof(OptionsUpToTimeout);
  older.old.version = DDPRT_VERSION;
  ASSERT_EQ(
      ddprt_get_options(context, reinterpret_cast<ddprt_options *>(&older)),
      DDPRT_OK);
  EXPECT_EQ(older.old.timeout_seconds, 7.0);
  for (char byte : older.after)
    EXPECT_EQ(byte, 0x5a) << "written past the caller's size";
  ddprt_options unfilled = {};
  EXPECT_EQ(ddprt_get_options(context, &unfilled),
            DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ddprt_get_options(context, nullptr), DDPRT_ERROR_INVALID_ARGUMENT);
  ddprt_finalize(context);
}

//===----------------------------------------------------------------------===//
// The simulated link: options and DDPRT_SIMULATED_LINK
//===----------------------------------------------------------------------===//

/// Sets DDPRT_SIMULATED_LINK for one test (unset: null), and restores it.
class SimulatedLinkVariable : public ::testing::Test {
protected:
  void SetUp() override {
    if (const char *value = std::getenv("DDPRT_SIMULATED_LINK"))
      saved = value;
  }
  void TearDown() override {
    if (saved.empty())
      unsetenv("DDPRT_SIMULATED_LINK");
    else
      setenv("DDPRT_SIMULATED_LINK", saved.c_str(), 1);
  }
  void set(const char *value) {
    if (value)
      setenv("DDPRT_SIMULATED_LINK", value, 1);
    else
      unsetenv("DDPRT_SIMULATED_LINK");
  }
  /// ddprt_init with `options`; the link it runs with.
  ddprt_status start(const ddprt_options &options, double &gbps,
                     double &latencyUs, std::string &message) {
    ddprt_context *context = nullptr;
    ddprt_status status = ddprt_init(&options, &context);
    message = ddprt_last_error(context);
    ddprt_options running = DDPRT_OPTIONS_INITIALIZER;
    if (status == DDPRT_OK &&
        ddprt_get_options(context, &running) == DDPRT_OK) {
      gbps = running.simulated_link_gbps;
      latencyUs = running.simulated_link_latency_us;
    }
    if (context)
      ddprt_finalize(context);
    return status;
  }

  std::string saved;
};

TEST_F(SimulatedLinkVariable, SetsAndOverridesTheOptions) {
  ddprt_options options = DDPRT_OPTIONS_INITIALIZER;
  double gbps = -1, latencyUs = -1;
  std::string message;
  set(nullptr);
  ASSERT_EQ(start(options, gbps, latencyUs, message), DDPRT_OK) << message;
  EXPECT_EQ(gbps, 0.0) << "off by default";
  EXPECT_EQ(latencyUs, 0.0);
  options.simulated_link_gbps = 100;
  options.simulated_link_latency_us = 5;
  ASSERT_EQ(start(options, gbps, latencyUs, message), DDPRT_OK) << message;
  EXPECT_EQ(gbps, 100.0);
  EXPECT_EQ(latencyUs, 5.0);
  set("10,20");
  ASSERT_EQ(start(options, gbps, latencyUs, message), DDPRT_OK) << message;
  EXPECT_EQ(gbps, 10.0) << "the variable overrides the options";
  EXPECT_EQ(latencyUs, 20.0);
  set(""); // empty: as if unset
  ASSERT_EQ(start(options, gbps, latencyUs, message), DDPRT_OK) << message;
  EXPECT_EQ(gbps, 100.0);
}

TEST_F(SimulatedLinkVariable, AMalformedValueFailsNamingTheVariable) {
  ddprt_options options = DDPRT_OPTIONS_INITIALIZER;
  double gbps = 0, latencyUs = 0;
  std::string message;
  // Out of range too: 1e-300 Gb/s made the hold's nanoseconds overflow
  // (the job ran at full speed while claiming the link), and 1e12 us held
  // each collective for days.
  for (const char *bad : {"10", "10,", ",20", "fast,20", "10,20,30", "0,20",
                          "-1,20", "10,-5", "inf,0", "10, 20", "1e-300,0",
                          "1e308,0", "10,1e12"}) {
    set(bad);
    EXPECT_EQ(start(options, gbps, latencyUs, message),
              DDPRT_ERROR_INVALID_ARGUMENT)
        << bad;
    EXPECT_NE(message.find(std::string("DDPRT_SIMULATED_LINK=") + bad),
              std::string::npos)
        << message;
  }
}

TEST_F(SimulatedLinkVariable, BadOptionsAreRefused) {
  set(nullptr);
  double gbps = 0, latencyUs = 0;
  std::string message;
  ddprt_options options = DDPRT_OPTIONS_INITIALIZER;
  options.simulated_link_latency_us = 20; // without a bandwidth
  EXPECT_EQ(start(options, gbps, latencyUs, message),
            DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("simulated_link"), std::string::npos) << message;
  options = DDPRT_OPTIONS_INITIALIZER;
  options.simulated_link_gbps = -3;
  EXPECT_EQ(start(options, gbps, latencyUs, message),
            DDPRT_ERROR_INVALID_ARGUMENT);
  options = DDPRT_OPTIONS_INITIALIZER;
  options.simulated_link_gbps = 1e-300;
  EXPECT_EQ(start(options, gbps, latencyUs, message),
            DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("from 0.001 to 1e6"), std::string::npos) << message;
  // The CUDA backend's collectives run on the device: no link there.
  options = DDPRT_OPTIONS_INITIALIZER;
  options.backend = DDPRT_BACKEND_CUDA;
  options.simulated_link_gbps = 10;
  EXPECT_EQ(start(options, gbps, latencyUs, message), DDPRT_ERROR_UNSUPPORTED);
}

//===----------------------------------------------------------------------===//
// The current context and the error handler: process-wide, thread-safe
//===----------------------------------------------------------------------===//

class AbiThreads : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(ddprt_init(nullptr, &context), DDPRT_OK)
        << ddprt_last_error(context);
  }
  void TearDown() override {
    ddprt_set_current_context(nullptr);
    ddprt_set_error_handler(nullptr, nullptr);
    if (context) {
      EXPECT_EQ(ddprt_finalize(context), DDPRT_OK);
    }
  }

  ddprt_context *context = nullptr;
};

TEST_F(AbiThreads, TheContextSetOnOneThreadIsCurrentOnAnother) {
  ddprt_set_current_context(context);
  ddprt_context *seen = nullptr;
  std::thread([&] { seen = ddprt_current_context(); }).join();
  EXPECT_EQ(seen, context);
}

TEST_F(AbiThreads, FinalizingOnAnotherThreadClearsItForAll) {
  ddprt_context *other = nullptr;
  ASSERT_EQ(ddprt_init(nullptr, &other), DDPRT_OK);
  ddprt_set_current_context(context);
  // Finalizing a context that is not current leaves the current one.
  std::thread([&] { EXPECT_EQ(ddprt_finalize(other), DDPRT_OK); }).join();
  EXPECT_EQ(ddprt_current_context(), context);
  std::thread([&] { EXPECT_EQ(ddprt_finalize(context), DDPRT_OK); }).join();
  context = nullptr;
  EXPECT_EQ(ddprt_current_context(), nullptr);
}

struct Seen {
  int calls = 0;
  std::thread::id thread;
  ddprt_status status = DDPRT_OK;
};
void recordThread(ddprt_context *, ddprt_status status, const char *,
                  void *user) {
  auto *seen = static_cast<Seen *>(user);
  ++seen->calls;
  seen->thread = std::this_thread::get_id();
  seen->status = status;
}

TEST_F(AbiThreads, TheHandlerRunsOnTheThreadThatChecked) {
  Seen seen;
  ddprt_set_error_handler(recordThread, &seen);
  std::thread::id worker;
  std::thread([&] {
    worker = std::this_thread::get_id();
    ddprt_check(context, DDPRT_ERROR_TIMEOUT, "ddp.allreduce at step.mlir:3");
  }).join();
  EXPECT_EQ(seen.calls, 1);
  EXPECT_EQ(seen.thread, worker);
  EXPECT_EQ(seen.status, DDPRT_ERROR_TIMEOUT);
}

TEST_F(AbiThreads, ConcurrentSettersLeaveOneOfTheirContexts) {
  // Opaque pointers: the runtime stores the current context, it does not
  // look into it until compiled code calls with it.
  char tokens[4];
  std::vector<ddprt_context *> contexts;
  for (char &token : tokens)
    contexts.push_back(reinterpret_cast<ddprt_context *>(&token));
  auto isOneOfThem = [&](ddprt_context *value) {
    return std::find(contexts.begin(), contexts.end(), value) != contexts.end();
  };
  std::vector<std::thread> threads;
  std::vector<int> strays(contexts.size(), 0);
  for (size_t t = 0; t < contexts.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) {
        ddprt_set_current_context(contexts[t]);
        strays[t] += !isOneOfThem(ddprt_current_context());
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int stray : strays)
    EXPECT_EQ(stray, 0);
  EXPECT_TRUE(isOneOfThem(ddprt_current_context()));
}

} // namespace
