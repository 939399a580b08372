//===- CApiTest.cpp - the C ABI on one rank -------------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Everything a host sees through ddprt.h with world size 1 (MPI starts as a
// singleton): init and finalize, argument checks and their messages,
// collectives and counters, the kernels dispatched per tensor, persistent
// state and checkpoints.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"
#include "cpu/Kernels.h"
#include "ddprt/ddprt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <sys/resource.h>
#include <tuple>
#include <vector>

using namespace ddprt::test;

namespace {

/// Keeps MPI initialized for the whole binary: the first context
/// initializes MPI and finalizes it with itself, and MPI cannot start again
/// after that, so one context lives from before the first test to after the
/// last and every test creates and finalizes its own.
class KeepMpiAlive : public ::testing::Environment {
public:
  void SetUp() override { ASSERT_EQ(ddprt_init(nullptr, &context_), DDPRT_OK); }
  void TearDown() override { ddprt_finalize(context_); }

private:
  ddprt_context *context_ = nullptr;
};
const ::testing::Environment *const kKeepMpiAlive =
    ::testing::AddGlobalTestEnvironment(new KeepMpiAlive);

class CApi : public ::testing::Test {
protected:
  void SetUp() override {
    ddprt_options options;
    ddprt_default_options(&options);
    ASSERT_EQ(ddprt_init(&options, &context), DDPRT_OK)
        << ddprt_last_error(context);
  }
  void TearDown() override {
    if (context) {
      EXPECT_EQ(ddprt_finalize(context), DDPRT_OK);
    }
  }

  /// A successful call clears the last error, so that a failure's message
  /// is known to be its own.
  void clearLastError() {
    ASSERT_EQ(ddprt_scale(context, DDPRT_SCALE_NONE, nullptr, 0), DDPRT_OK);
    ASSERT_STREQ(ddprt_last_error(context), "");
  }

  ddprt_context *context = nullptr;
};

/// Expects `call` to fail with `status` and a message containing `needle`.
#define EXPECT_FAILS(call, status, needle)                                     \
  do {                                                                         \
    clearLastError();                                                          \
    ddprt_status got = (call);                                                 \
    EXPECT_EQ(got, status) << #call << " returned "                            \
                           << ddprt_status_string(got);                        \
    std::string message = ddprt_last_error(context);                           \
    EXPECT_NE(message.find(needle), std::string::npos)                         \
        << #call << " said '" << message << "', expected '" << needle << "'";  \
  } while (false)

constexpr ddprt_dtype kUnknownDtype = ddprt_dtype(42);

//===----------------------------------------------------------------------===//
// Lifecycle
//===----------------------------------------------------------------------===//

TEST(CApiLifecycle, InitReportsRankWorldAndBackend) {
  ddprt_context *context = nullptr;
  ASSERT_EQ(ddprt_init(nullptr, &context), DDPRT_OK);
  ASSERT_NE(context, nullptr);
  EXPECT_EQ(ddprt_rank(context), 0);
  EXPECT_EQ(ddprt_world_size(context), 1);
  EXPECT_EQ(ddprt_backend(context), DDPRT_BACKEND_CPU);
  EXPECT_STREQ(ddprt_last_error(context), "");
  EXPECT_EQ(ddprt_finalize(context), DDPRT_OK);
}

TEST(CApiLifecycle, DefaultOptions) {
  ddprt_options options;
  options.backend = DDPRT_BACKEND_CUDA;
  options.timeout_seconds = -5;
  options.check_shapes = 0;
  ddprt_default_options(&options);
  EXPECT_EQ(options.backend, DDPRT_BACKEND_CPU);
  EXPECT_EQ(options.timeout_seconds, 300.0);
  EXPECT_EQ(options.check_shapes, 1);
  ddprt_default_options(nullptr); // must not crash
}

TEST(CApiLifecycle, NullArgumentsOfInitAndFinalize) {
  EXPECT_EQ(ddprt_init(nullptr, nullptr), DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ddprt_finalize(nullptr), DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STRNE(ddprt_last_error(nullptr), "");
  EXPECT_EQ(ddprt_rank(nullptr), -1);
  EXPECT_EQ(ddprt_world_size(nullptr), 0);
}

TEST(CApiLifecycle, CudaBackendWithoutCudaOrAGpuIsUnsupported) {
  ddprt_options options;
  ddprt_default_options(&options);
  options.backend = DDPRT_BACKEND_CUDA;
  ddprt_context *context = nullptr;
  ddprt_status status = ddprt_init(&options, &context);
  if (status == DDPRT_OK) {
    ddprt_finalize(context);
    GTEST_SKIP() << "this machine has a usable GPU";
  }
  // A build without CUDA, or no usable device: either way the same status.
  EXPECT_EQ(status, DDPRT_ERROR_UNSUPPORTED);
  ASSERT_NE(context, nullptr) << "the context must say why";
  EXPECT_NE(std::string(ddprt_last_error(context)).find("CUDA"),
            std::string::npos)
      << ddprt_last_error(context);
  // The failed context refuses work instead of crashing.
  float value = 1.0f;
  ddprt_buffer buffer{&value, DDPRT_F32, 1};
  EXPECT_EQ(
      ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, &buffer, 1),
      DDPRT_ERROR_STATE);
  EXPECT_STRNE(ddprt_last_error(context), "");
  EXPECT_EQ(ddprt_finalize(context), DDPRT_OK);
}

TEST(CApiLifecycle, UnknownBackendIsAnInvalidArgument) {
  ddprt_options options;
  ddprt_default_options(&options);
  options.backend = ddprt_backend_kind(7);
  ddprt_context *context = nullptr;
  EXPECT_EQ(ddprt_init(&options, &context), DDPRT_ERROR_INVALID_ARGUMENT);
  ASSERT_NE(context, nullptr);
  EXPECT_NE(std::string(ddprt_last_error(context)).find("backend"),
            std::string::npos)
      << ddprt_last_error(context);
  EXPECT_EQ(ddprt_finalize(context), DDPRT_OK);
}

TEST(CApiLifecycle, NegativeOrNaNTimeoutIsRejected) {
  for (double timeout : {-1.0, std::nan("")}) {
    ddprt_options options;
    ddprt_default_options(&options);
    options.timeout_seconds = timeout;
    ddprt_context *context = nullptr;
    EXPECT_EQ(ddprt_init(&options, &context), DDPRT_ERROR_INVALID_ARGUMENT)
        << timeout;
    ASSERT_NE(context, nullptr);
    EXPECT_NE(std::string(ddprt_last_error(context)).find("timeout"),
              std::string::npos)
        << ddprt_last_error(context);
    EXPECT_EQ(ddprt_finalize(context), DDPRT_OK);
  }
}

TEST(CApiLifecycle, StatusStringsAndDtypeSizes) {
  EXPECT_STREQ(ddprt_status_string(DDPRT_OK), "DDPRT_OK");
  EXPECT_STREQ(ddprt_status_string(DDPRT_ERROR_TIMEOUT), "DDPRT_ERROR_TIMEOUT");
  EXPECT_STREQ(ddprt_status_string(DDPRT_ERROR_MISMATCH),
               "DDPRT_ERROR_MISMATCH");
  EXPECT_STREQ(ddprt_status_string(DDPRT_ERROR_STATE), "DDPRT_ERROR_STATE");
  EXPECT_STRNE(ddprt_status_string(ddprt_status(99)), "");
  EXPECT_EQ(ddprt_dtype_size(DDPRT_F32), 4u);
  EXPECT_EQ(ddprt_dtype_size(DDPRT_F64), 8u);
  EXPECT_EQ(ddprt_dtype_size(DDPRT_F16), 2u);
  EXPECT_EQ(ddprt_dtype_size(DDPRT_BF16), 2u);
  EXPECT_EQ(ddprt_dtype_size(DDPRT_I64), 8u);
  EXPECT_EQ(ddprt_dtype_size(DDPRT_I8), 1u);
  EXPECT_EQ(ddprt_dtype_size(DDPRT_I32), 4u);
  EXPECT_EQ(ddprt_dtype_size(kUnknownDtype), 0u);
}

//===----------------------------------------------------------------------===//
// Argument checks
//===----------------------------------------------------------------------===//

TEST(CApiArguments, NullContextIsRejectedEverywhere) {
  float value = 1.0f;
  ddprt_buffer buffer{&value, DDPRT_F32, 1};
  ddprt_matrix matrix{&value, DDPRT_F32, 1, 1};
  ddprt_request *request = nullptr;
  ddprt_state *state = nullptr;
  ddprt_counters counters = DDPRT_COUNTERS_INITIALIZER;
  const ddprt_status invalid = DDPRT_ERROR_INVALID_ARGUMENT;
  EXPECT_EQ(
      ddprt_allreduce(nullptr, DDPRT_SUM, DDPRT_ROLE_GRADIENT, &buffer, 1),
      invalid);
  EXPECT_EQ(ddprt_allreduce_start(nullptr, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                                  &buffer, 1, &request),
            invalid);
  EXPECT_EQ(request, nullptr);
  EXPECT_EQ(
      ddprt_allgather(nullptr, DDPRT_ROLE_COMPRESSED, &buffer, &buffer, 1),
      invalid);
  EXPECT_EQ(ddprt_wait(nullptr, nullptr), invalid);
  EXPECT_EQ(ddprt_host_barrier(nullptr), invalid);
  EXPECT_EQ(ddprt_synchronize(nullptr), invalid);
  EXPECT_EQ(ddprt_scale(nullptr, DDPRT_SCALE_NONE, &buffer, 1), invalid);
  EXPECT_EQ(ddprt_cast(nullptr, DDPRT_SCALE_NONE, &buffer, &buffer, 1),
            invalid);
  EXPECT_EQ(ddprt_project(nullptr, &matrix, nullptr, &matrix, &matrix, 1),
            invalid);
  EXPECT_EQ(ddprt_backproject(nullptr, &matrix, nullptr, &matrix, &matrix, 1),
            invalid);
  EXPECT_EQ(ddprt_orthogonalize(nullptr, &matrix, 1, 0.0), invalid);
  EXPECT_EQ(ddprt_reconstruct(nullptr, &matrix, &matrix, nullptr, nullptr,
                              &matrix, 1),
            invalid);
  EXPECT_EQ(ddprt_random_normal(nullptr, &buffer, 0, 0, 0), invalid);
  EXPECT_EQ(ddprt_state_get(nullptr, "x", DDPRT_F32, 1, &state), invalid);
  EXPECT_EQ(ddprt_checkpoint_save(nullptr, "/tmp/x"), invalid);
  EXPECT_EQ(ddprt_checkpoint_load(nullptr, "/tmp/x"), invalid);
  EXPECT_EQ(ddprt_get_counters(nullptr, &counters), invalid);
  EXPECT_EQ(ddprt_reset_counters(nullptr), invalid);
  EXPECT_EQ(ddprt_gemm(nullptr, DDPRT_F32, 0, 0, 1, 1, 1, 1, 1.0f, &value, 1,
                       0, &value, 1, 0, 1.0f, &value, 1, 0),
            invalid);
  EXPECT_EQ(ddprt_set_compute_threads(nullptr, 1), invalid);
  EXPECT_EQ(value, 1.0f);
}

TEST_F(CApi, AllreduceArgumentChecks) {
  float values[4] = {1, 2, 3, 4};
  ddprt_buffer good{values, DDPRT_F32, 4};
  const ddprt_status invalid = DDPRT_ERROR_INVALID_ARGUMENT;
  EXPECT_FAILS(
      ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, &good, -1),
      invalid, "negative");
  EXPECT_FAILS(
      ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, nullptr, 1),
      invalid, "null");
  EXPECT_FAILS(ddprt_allreduce(context, ddprt_reduction(9), DDPRT_ROLE_GRADIENT,
                               &good, 1),
               invalid, "reduction");
  EXPECT_FAILS(ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_COUNT, &good, 1),
               invalid, "role");
  EXPECT_FAILS(ddprt_allreduce(context, DDPRT_SUM, ddprt_role(-1), &good, 1),
               invalid, "role");
  ddprt_buffer bad[2] = {good, good};
  bad[1].dtype = kUnknownDtype;
  EXPECT_FAILS(
      ddprt_allreduce(context, DDPRT_MEAN, DDPRT_ROLE_GRADIENT, bad, 2),
      invalid, "dtype");
  bad[1] = {values, DDPRT_F32, -3};
  EXPECT_FAILS(
      ddprt_allreduce(context, DDPRT_MEAN, DDPRT_ROLE_GRADIENT, bad, 2),
      invalid, "negative size");
  bad[1] = {nullptr, DDPRT_F32, 3};
  EXPECT_FAILS(
      ddprt_allreduce(context, DDPRT_MEAN, DDPRT_ROLE_GRADIENT, bad, 2),
      invalid, "#1: data is null");

  ddprt_request *request = nullptr;
  EXPECT_FAILS(ddprt_allreduce_start(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                                     &good, 1, nullptr),
               invalid, "request");
  EXPECT_FAILS(ddprt_allreduce_start(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                                     bad, 2, &request),
               invalid, "null");
  EXPECT_EQ(request, nullptr);
  EXPECT_FAILS(ddprt_wait(context, nullptr), invalid, "request");
  int32_t completed = -1;
  EXPECT_FAILS(ddprt_request_completed(context, nullptr, &completed), invalid,
               "request");
  EXPECT_EQ(completed, -1);

  // Nothing ran: the buffers are untouched and nothing was counted.
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[3], 4.0f);
  ddprt_counters counters = DDPRT_COUNTERS_INITIALIZER;
  ASSERT_EQ(ddprt_get_counters(context, &counters), DDPRT_OK);
  EXPECT_EQ(counters.collectives[DDPRT_ROLE_GRADIENT], 0u);
}

TEST_F(CApi, AllgatherArgumentChecks) {
  int8_t in[4] = {1, -2, 3, -4}, out[5] = {9, 9, 9, 9, 9};
  float f[2] = {};
  ddprt_buffer input{in, DDPRT_I8, 4}, output{out, DDPRT_I8, 4};
  ddprt_buffer inputs[2] = {input, input}, outputs[2] = {output, output};
  auto allgather = [&](int count) {
    return ddprt_allgather(context, DDPRT_ROLE_COMPRESSED, inputs, outputs,
                           count);
  };
  const ddprt_status invalid = DDPRT_ERROR_INVALID_ARGUMENT;
  EXPECT_FAILS(allgather(-1), invalid, "negative");
  EXPECT_FAILS(
      ddprt_allgather(context, DDPRT_ROLE_COMPRESSED, nullptr, outputs, 1),
      invalid, "allgather input: the array of 1 is null");
  EXPECT_FAILS(
      ddprt_allgather(context, DDPRT_ROLE_COMPRESSED, inputs, nullptr, 1),
      invalid, "allgather output: the array of 1 is null");
  EXPECT_FAILS(ddprt_allgather(context, DDPRT_ROLE_COUNT, inputs, outputs, 1),
               invalid, "unknown role 4");
  EXPECT_FAILS(ddprt_allgather(context, ddprt_role(-1), inputs, outputs, 1),
               invalid, "unknown role -1");
  inputs[1].dtype = kUnknownDtype;
  EXPECT_FAILS(allgather(2), invalid, "allgather input #1: unknown dtype 42");
  inputs[1] = {nullptr, DDPRT_I8, 4};
  EXPECT_FAILS(allgather(2), invalid, "allgather input #1: data is null");
  inputs[1] = {in, DDPRT_I8, -4};
  EXPECT_FAILS(allgather(2), invalid, "allgather input #1: negative size");
  inputs[1] = input;
  outputs[1] = {nullptr, DDPRT_I8, 4};
  EXPECT_FAILS(allgather(2), invalid, "allgather output #1: data is null");
  // On one rank the output holds 1 x the input's elements, of its dtype.
  outputs[1] = {out, DDPRT_I8, 5};
  EXPECT_FAILS(allgather(2), invalid,
               "allgather #1: the output must have the input's dtype (i8) "
               "and world size x its elements (1 x 4), but has i8 and 5 "
               "elements");
  outputs[1] = {f, DDPRT_F32, 4};
  EXPECT_FAILS(allgather(2), invalid, "but has f32 and 4 elements");
  outputs[1] = {out, DDPRT_I32, 1}; // the same bytes, another dtype
  EXPECT_FAILS(allgather(2), invalid, "but has i32 and 1 elements");

  // Nothing ran: the outputs are untouched and nothing was counted.
  for (int8_t value : out)
    EXPECT_EQ(value, 9);
  ddprt_counters counters = DDPRT_COUNTERS_INITIALIZER;
  ASSERT_EQ(ddprt_get_counters(context, &counters), DDPRT_OK);
  EXPECT_EQ(counters.collectives[DDPRT_ROLE_COMPRESSED], 0u);
  EXPECT_EQ(counters.elements_sent[DDPRT_ROLE_COMPRESSED], 0u);
}

TEST_F(CApi, ScaleAndCastArgumentChecks) {
  float in[3] = {1, 2, 3};
  uint16_t out[4] = {};
  ddprt_buffer input{in, DDPRT_F32, 3}, output{out, DDPRT_F16, 3};
  const ddprt_status invalid = DDPRT_ERROR_INVALID_ARGUMENT;
  EXPECT_FAILS(ddprt_scale(context, ddprt_world_scale(5), &input, 1), invalid,
               "world scale");
  EXPECT_FAILS(ddprt_scale(context, DDPRT_SCALE_NONE, &input, -2), invalid,
               "negative");
  EXPECT_FAILS(ddprt_scale(context, DDPRT_SCALE_NONE, nullptr, 1), invalid,
               "null");
  ddprt_buffer unknown{in, kUnknownDtype, 3};
  EXPECT_FAILS(ddprt_scale(context, DDPRT_SCALE_NONE, &unknown, 1), invalid,
               "dtype");
  EXPECT_FAILS(ddprt_cast(context, ddprt_world_scale(-1), &input, &output, 1),
               invalid, "world scale");
  EXPECT_FAILS(ddprt_cast(context, DDPRT_SCALE_NONE, &input, nullptr, 1),
               invalid, "null");
  EXPECT_FAILS(ddprt_cast(context, DDPRT_SCALE_NONE, &input, &unknown, 1),
               invalid, "dtype");
  ddprt_buffer longer{out, DDPRT_F16, 4};
  EXPECT_FAILS(ddprt_cast(context, DDPRT_SCALE_NONE, &input, &longer, 1),
               invalid, "3 inputs but 4 outputs");
  ddprt_buffer nullData{nullptr, DDPRT_F16, 3};
  EXPECT_FAILS(ddprt_cast(context, DDPRT_SCALE_NONE, &input, &nullData, 1),
               invalid, "data is null");
  EXPECT_EQ(out[0], 0u);
  EXPECT_EQ(in[2], 3.0f);
}

TEST_F(CApi, ProjectionArgumentChecks) {
  std::vector<float> data(64, 1.0f);
  std::vector<double> wide(64, 1.0);
  float *d = data.data();
  const ddprt_status invalid = DDPRT_ERROR_INVALID_ARGUMENT;
  ddprt_matrix m{d, DDPRT_F32, 4, 3}, e{d, DDPRT_F32, 4, 3},
      q{d, DDPRT_F32, 3, 2}, p{d, DDPRT_F32, 4, 2};

  // P = M Q: Q must be m x r, P n x r, E n x m, all one dtype.
  ddprt_matrix wrong = q;
  wrong.rows = 4;
  EXPECT_FAILS(ddprt_project(context, &m, nullptr, &wrong, &p, 1), invalid,
               "factor #0 is 4x2 but must be 3x2");
  wrong = p;
  wrong.rows = 3;
  EXPECT_FAILS(ddprt_project(context, &m, nullptr, &q, &wrong, 1), invalid,
               "output #0 is 3x2 but must be 4x2");
  wrong = e;
  wrong.cols = 4;
  EXPECT_FAILS(ddprt_project(context, &m, &wrong, &q, &p, 1), invalid,
               "residual #0 is 4x4");
  wrong = e;
  wrong.dtype = DDPRT_F64;
  wrong.data = wide.data();
  EXPECT_FAILS(ddprt_project(context, &m, &wrong, &q, &p, 1), invalid, "dtype");
  wrong = q;
  wrong.dtype = DDPRT_F16;
  EXPECT_FAILS(ddprt_project(context, &m, nullptr, &wrong, &p, 1), invalid,
               "dtype");
  wrong = m;
  wrong.dtype = kUnknownDtype;
  EXPECT_FAILS(ddprt_project(context, &wrong, nullptr, &q, &p, 1), invalid,
               "unknown dtype");
  wrong = m;
  wrong.rows = -4;
  EXPECT_FAILS(ddprt_project(context, &wrong, nullptr, &q, &p, 1), invalid,
               "negative");
  wrong = q;
  wrong.cols = -2;
  EXPECT_FAILS(ddprt_project(context, &m, nullptr, &wrong, &p, 1), invalid,
               "negative");
  wrong = m;
  wrong.data = nullptr;
  EXPECT_FAILS(ddprt_project(context, &wrong, nullptr, &q, &p, 1), invalid,
               "data is null");
  EXPECT_FAILS(ddprt_project(context, &m, nullptr, nullptr, &p, 1), invalid,
               "null");
  EXPECT_FAILS(ddprt_project(context, &m, nullptr, &q, nullptr, 1), invalid,
               "null");
  EXPECT_FAILS(ddprt_project(context, nullptr, nullptr, &q, &p, 1), invalid,
               "null");
  EXPECT_FAILS(ddprt_project(context, &m, nullptr, &q, &p, -1), invalid,
               "negative");

  // Q = M^T P: P must be n x r, Q m x r.
  wrong = p;
  wrong.rows = 3;
  EXPECT_FAILS(ddprt_backproject(context, &m, nullptr, &wrong, &q, 1), invalid,
               "factor #0 is 3x2 but must be 4x2");
  wrong = q;
  wrong.cols = 3;
  EXPECT_FAILS(ddprt_backproject(context, &m, nullptr, &p, &wrong, 1), invalid,
               "output #0 is 3x3 but must be 3x2");
  wrong = e;
  wrong.rows = 5;
  EXPECT_FAILS(ddprt_backproject(context, &m, &wrong, &p, &q, 1), invalid,
               "residual");
  wrong = p;
  wrong.dtype = DDPRT_BF16;
  EXPECT_FAILS(ddprt_backproject(context, &m, nullptr, &wrong, &q, 1), invalid,
               "dtype");
  EXPECT_FAILS(ddprt_backproject(context, &m, nullptr, &p, &q, -3), invalid,
               "negative");
  EXPECT_EQ(data[0], 1.0f);
}

TEST_F(CApi, OrthogonalizeArgumentChecks) {
  std::vector<float> data(8, 1.0f);
  ddprt_matrix p{data.data(), DDPRT_F32, 4, 2};
  const ddprt_status invalid = DDPRT_ERROR_INVALID_ARGUMENT;
  for (double epsilon : {-1e-8, std::nan(""), HUGE_VAL})
    EXPECT_FAILS(ddprt_orthogonalize(context, &p, 1, epsilon), invalid,
                 "epsilon");
  EXPECT_FAILS(ddprt_orthogonalize(context, &p, -1, 0.0), invalid, "negative");
  EXPECT_FAILS(ddprt_orthogonalize(context, nullptr, 1, 0.0), invalid, "null");
  ddprt_matrix wrong = p;
  wrong.dtype = kUnknownDtype;
  EXPECT_FAILS(ddprt_orthogonalize(context, &wrong, 1, 0.0), invalid,
               "unknown dtype");
  wrong = p;
  wrong.cols = -2;
  EXPECT_FAILS(ddprt_orthogonalize(context, &wrong, 1, 0.0), invalid,
               "negative");
  wrong = p;
  wrong.data = nullptr;
  EXPECT_FAILS(ddprt_orthogonalize(context, &wrong, 1, 0.0), invalid,
               "data is null");
  EXPECT_EQ(data[0], 1.0f);
}

TEST_F(CApi, ReconstructArgumentChecks) {
  std::vector<float> data(64, 1.0f);
  float *d = data.data();
  const ddprt_status invalid = DDPRT_ERROR_INVALID_ARGUMENT;
  ddprt_matrix p{d, DDPRT_F32, 4, 2}, q{d, DDPRT_F32, 3, 2},
      g{d, DDPRT_F32, 4, 3}, e{d, DDPRT_F32, 4, 3}, out{d, DDPRT_F32, 4, 3};
  EXPECT_FAILS(ddprt_reconstruct(context, &p, &q, &g, nullptr, &out, 1),
               invalid, "both");
  EXPECT_FAILS(ddprt_reconstruct(context, &p, &q, nullptr, &e, &out, 1),
               invalid, "both");
  ddprt_matrix wrong = q;
  wrong.cols = 3;
  EXPECT_FAILS(
      ddprt_reconstruct(context, &p, &wrong, nullptr, nullptr, &out, 1),
      invalid, "Q #0 must have 2 columns");
  wrong = q;
  wrong.dtype = DDPRT_F64;
  EXPECT_FAILS(
      ddprt_reconstruct(context, &p, &wrong, nullptr, nullptr, &out, 1),
      invalid, "dtype");
  wrong = out;
  wrong.cols = 4;
  EXPECT_FAILS(ddprt_reconstruct(context, &p, &q, nullptr, nullptr, &wrong, 1),
               invalid, "reconstruction #0 is 4x4 but must be 4x3");
  wrong = g;
  wrong.rows = 3;
  EXPECT_FAILS(ddprt_reconstruct(context, &p, &q, &wrong, &e, &out, 1), invalid,
               "matrix #0 is 3x3");
  wrong = e;
  wrong.dtype = DDPRT_F16;
  EXPECT_FAILS(ddprt_reconstruct(context, &p, &q, &g, &wrong, &out, 1), invalid,
               "residual #0: dtype");
  wrong = p;
  wrong.dtype = kUnknownDtype;
  EXPECT_FAILS(
      ddprt_reconstruct(context, &wrong, &q, nullptr, nullptr, &out, 1),
      invalid, "unknown dtype");
  EXPECT_FAILS(
      ddprt_reconstruct(context, &p, nullptr, nullptr, nullptr, &out, 1),
      invalid, "null");
  EXPECT_FAILS(ddprt_reconstruct(context, &p, &q, nullptr, nullptr, nullptr, 1),
               invalid, "null");
  EXPECT_FAILS(ddprt_reconstruct(context, &p, &q, nullptr, nullptr, &out, -1),
               invalid, "negative");
  EXPECT_EQ(data[0], 1.0f);
}

TEST_F(CApi, RandomNormalAndStateArgumentChecks) {
  const ddprt_status invalid = DDPRT_ERROR_INVALID_ARGUMENT;
  EXPECT_FAILS(ddprt_random_normal(context, nullptr, 1, 2, 3), invalid,
               "output");
  float value = 0.0f;
  ddprt_buffer unknown{&value, kUnknownDtype, 1};
  EXPECT_FAILS(ddprt_random_normal(context, &unknown, 1, 2, 3), invalid,
               "dtype");
  ddprt_buffer nullData{nullptr, DDPRT_F32, 5};
  EXPECT_FAILS(ddprt_random_normal(context, &nullData, 1, 2, 3), invalid,
               "data is null");
  ddprt_buffer negative{&value, DDPRT_F32, -1};
  EXPECT_FAILS(ddprt_random_normal(context, &negative, 1, 2, 3), invalid,
               "negative");

  ddprt_state *state = nullptr;
  EXPECT_FAILS(ddprt_state_get(context, nullptr, DDPRT_F32, 4, &state), invalid,
               "name");
  EXPECT_FAILS(ddprt_state_get(context, "", DDPRT_F32, 4, &state), invalid,
               "name");
  EXPECT_FAILS(ddprt_state_get(context, "s", DDPRT_F32, 4, nullptr), invalid,
               "result pointer");
  EXPECT_FAILS(ddprt_state_get(context, "s", kUnknownDtype, 4, &state), invalid,
               "unknown dtype");
  EXPECT_FAILS(ddprt_state_get(context, "s", DDPRT_F32, -4, &state), invalid,
               "negative size");
  // A name is one file-name component: --dump-state writes it into a path.
  EXPECT_FAILS(ddprt_state_get(context, "../../x", DDPRT_F32, 4, &state),
               invalid, "path separator");
  EXPECT_FAILS(ddprt_state_get(context, "..", DDPRT_F32, 4, &state), invalid,
               "directory");
  EXPECT_FAILS(ddprt_state_get(context, "a\nb", DDPRT_F32, 4, &state),
               invalid, "control character");
  EXPECT_EQ(state, nullptr);
  EXPECT_STREQ(ddprt_name_problem("a\0x", 3), "it holds a NUL character");
  EXPECT_STREQ(ddprt_name_problem("", 0), "it is empty");
  EXPECT_EQ(ddprt_name_problem("ddp.q.layer-1.weight", 20), nullptr);

  EXPECT_FAILS(ddprt_checkpoint_save(context, nullptr), invalid, "path");
  EXPECT_FAILS(ddprt_checkpoint_save(context, ""), invalid, "path");
  EXPECT_FAILS(ddprt_checkpoint_load(context, nullptr), invalid, "path");
  EXPECT_FAILS(ddprt_checkpoint_load(context, ""), invalid, "path");
  EXPECT_EQ(ddprt_get_counters(context, nullptr), invalid);
}

// ddprt.h: "After a failure, ddprt_last_error(ctx) says what went wrong."
// ddprt_get_counters takes a const context and cannot record a message, so
// a null output is refused silently (or with a stale message).
TEST_F(CApi, GetCountersWithNullOutputSaysWhy) {
  clearLastError();
  EXPECT_EQ(ddprt_get_counters(context, nullptr), DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STRNE(ddprt_last_error(context), "");
}

//===----------------------------------------------------------------------===//
// Collectives and counters on one rank
//===----------------------------------------------------------------------===//

TEST_F(CApi, LaunchKernelIsCheckedAndUnsupportedOnTheCpu) {
  const char image[] = "//PTX";
  void *params[] = {nullptr};
  const ddprt_status invalid = DDPRT_ERROR_INVALID_ARGUMENT;
  EXPECT_FAILS(
      ddprt_launch_kernel(context, nullptr, "k", 1, 1, 1, 1, 1, 1, 0, params),
      invalid, "no image");
  EXPECT_FAILS(
      ddprt_launch_kernel(context, image, "k", 1, 1, 1, 0, 1, 1, 0, params),
      invalid, "block 0x1x1");
  EXPECT_FAILS(
      ddprt_launch_kernel(context, image, "k", 1, 1, 1, 2048, 1, 1, 0, params),
      invalid, "block 2048x1x1");
  EXPECT_FAILS(
      ddprt_launch_kernel(context, image, "k", -1, 1, 1, 1, 1, 1, 0, params),
      invalid, "grid -1x1x1");
  EXPECT_FAILS(
      ddprt_launch_kernel(context, image, "k", 1, 1, 1, 1, 1, 1, -4, params),
      invalid, "negative shared memory");
  // A step lowered for a GPU, run on the CPU backend: a clear refusal.
  EXPECT_FAILS(ddprt_launch_kernel(context, image, "step_kernel", 1, 1, 1, 256,
                                   1, 1, 0, params),
               DDPRT_ERROR_UNSUPPORTED,
               "kernel 'step_kernel' was compiled for a GPU");
  // An empty grid has nothing to run, on any backend.
  EXPECT_EQ(
      ddprt_launch_kernel(context, image, "k", 0, 1, 1, 1, 1, 1, 0, params),
      DDPRT_OK);
}

TEST_F(CApi, DeviceMemoryIsHostMemoryOnTheCpu) {
  void *pointer = nullptr;
  ASSERT_EQ(ddprt_device_alloc(context, 100, &pointer), DDPRT_OK);
  ASSERT_NE(pointer, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pointer) % 64, 0u);
  static_cast<char *>(pointer)[99] = 1;
  EXPECT_EQ(ddprt_device_free(context, pointer), DDPRT_OK);
  EXPECT_EQ(ddprt_device_free(context, nullptr), DDPRT_OK);
  EXPECT_FAILS(ddprt_device_alloc(context, 8, nullptr),
               DDPRT_ERROR_INVALID_ARGUMENT, "");
}

TEST_F(CApi, GemmArgumentChecks) {
  float a[6] = {}, b[6] = {}, c[4] = {};
  const ddprt_status invalid = DDPRT_ERROR_INVALID_ARGUMENT;
  // 2x3 times 3x2.
  EXPECT_FAILS(ddprt_gemm(context, DDPRT_F64, 0, 0, 1, 2, 2, 3, 1.0f, a, 3,
                          0, b, 2, 0, 0.0f, c, 2, 0),
               DDPRT_ERROR_UNSUPPORTED, "only f32");
  EXPECT_FAILS(ddprt_gemm(context, DDPRT_F32, 0, 0, 1, -2, 2, 3, 1.0f, a, 3,
                          0, b, 2, 0, 0.0f, c, 2, 0),
               invalid, "negative size");
  EXPECT_FAILS(ddprt_gemm(context, DDPRT_F32, 0, 0, 1, 2, 2, 3, 1.0f, a, 2,
                          0, b, 2, 0, 0.0f, c, 2, 0),
               invalid, "A: leading dimension 2 is less than its 3 columns");
  // Transposed, A is stored 3 x 2: lda 2 is right, 1 is not.
  EXPECT_EQ(ddprt_gemm(context, DDPRT_F32, 1, 0, 1, 2, 2, 3, 1.0f, a, 2, 0, b,
                       2, 0, 0.0f, c, 2, 0),
            DDPRT_OK);
  EXPECT_FAILS(ddprt_gemm(context, DDPRT_F32, 1, 0, 1, 2, 2, 3, 1.0f, a, 1,
                          0, b, 2, 0, 0.0f, c, 2, 0),
               invalid, "A: leading dimension 1");
  EXPECT_FAILS(ddprt_gemm(context, DDPRT_F32, 0, 0, 1, 2, 2, 3, 1.0f, a, 3,
                          0, nullptr, 2, 0, 0.0f, c, 2, 0),
               invalid, "B: data is null");
  EXPECT_FAILS(ddprt_gemm(context, DDPRT_F32, 0, 0, 2, 2, 2, 3, 1.0f, a, 3,
                          0, b, 2, 0, 0.0f, c, 2, 3),
               invalid, "C: batch stride 3 overlaps");
  EXPECT_FAILS(ddprt_gemm(context, DDPRT_F32, 0, 0, 3, 2, 2, 3, 1.0f, a, 3,
                          int64_t(1) << 62, b, 2, 0, 0.0f, c, 2, 4),
               invalid, "A: its strides reach beyond 2^63 elements");
  EXPECT_FAILS(ddprt_gemm(context, DDPRT_F32, 0, 0, 1, int64_t(1) << 31, 2,
                          3, 1.0f, a, 3, 0, b, 2, 0, 0.0f, c, 2, 0),
               DDPRT_ERROR_UNSUPPORTED, "at most 2^31 - 1");
  // An empty product touches nothing, null data included.
  EXPECT_EQ(ddprt_gemm(context, DDPRT_F32, 0, 0, 1, 0, 2, 3, 1.0f, nullptr,
                       3, 0, nullptr, 2, 0, 0.0f, nullptr, 2, 0),
            DDPRT_OK);
  EXPECT_FAILS(ddprt_set_compute_threads(context, 0), invalid,
               "0 threads (at least 1)");
  EXPECT_EQ(ddprt_set_compute_threads(context, 1), DDPRT_OK);
}

/// C_b = alpha op(A_b) op(B_b) + beta C_b in doubles, row-major.
static std::vector<float> referenceGemm(bool ta, bool tb, int batch, int m,
                                        int n, int k, float alpha,
                                        const std::vector<float> &a, int lda,
                                        int strideA,
                                        const std::vector<float> &b, int ldb,
                                        int strideB, float beta,
                                        std::vector<float> c, int ldc,
                                        int strideC) {
  for (int p = 0; p < batch; ++p)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double sum = 0;
        for (int l = 0; l < k; ++l) {
          double x = ta ? a[p * strideA + l * lda + i]
                        : a[p * strideA + i * lda + l];
          double y = tb ? b[p * strideB + j * ldb + l]
                        : b[p * strideB + l * ldb + j];
          sum += x * y;
        }
        float &out = c[p * strideC + i * ldc + j];
        out = float(alpha * sum + beta * double(out));
      }
  return c;
}

TEST_F(CApi, GemmMatchesAReferenceInEveryLayout) {
  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const int batch = 3, m = 5, n = 7, k = 9;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int repeatB = 0; repeatB < 2; ++repeatB) {
        // Padded rows: leading dimensions above the row length.
        int lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n + 3;
        int strideA = (ta ? k : m) * lda;
        int strideB = repeatB ? 0 : (tb ? n : k) * ldb;
        int strideC = m * ldc;
        std::vector<float> a(size_t(batch * strideA)),
            b(size_t(batch * (tb ? n : k) * ldb)), c(size_t(batch * strideC));
        for (float &x : a)
          x = uniform(random);
        for (float &x : b)
          x = uniform(random);
        for (float &x : c)
          x = uniform(random);
        std::vector<float> expected =
            referenceGemm(ta, tb, batch, m, n, k, 0.5f, a, lda, strideA, b,
                          ldb, strideB, 1.0f, c, ldc, strideC);
        ASSERT_EQ(ddprt_gemm(context, DDPRT_F32, ta, tb, batch, m, n, k, 0.5f,
                             a.data(), lda, strideA, b.data(), ldb, strideB,
                             1.0f, c.data(), ldc, strideC),
                  DDPRT_OK)
            << ddprt_last_error(context);
        for (size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], expected[i], 1e-5f)
              << "ta " << ta << " tb " << tb << " repeatB " << repeatB
              << " element " << i;
      }
}

TEST_F(CApi, AllreduceOnOneRankIsTheIdentity) {
  std::mt19937 rng(20);
  for (ddprt_dtype dtype : kAllDtypes)
    for (ddprt_reduction reduction : {DDPRT_SUM, DDPRT_MEAN}) {
      TypedArray data(dtype, 1000);
      data.randomize(rng);
      TypedArray before = data;
      ddprt_buffer buffer = data.buffer();
      ASSERT_EQ(
          ddprt_allreduce(context, reduction, DDPRT_ROLE_GRADIENT, &buffer, 1),
          DDPRT_OK)
          << ddprt_last_error(context);
      EXPECT_TRUE(data.bitwiseEqual(before))
          << dtypeName(dtype) << " reduction " << reduction;
    }
}

/// A bucket of tensors of mixed dtypes and sizes (some empty), each followed
/// by guard elements that no call may touch.
struct Bucket {
  static constexpr int64_t kGuard = 3;
  static constexpr double kGuardValue = -96.0; // exact in every dtype
  std::vector<TypedArray> storage;
  std::vector<ddprt_buffer> buffers;
  std::vector<int64_t> sizes;

  Bucket(const std::vector<std::pair<ddprt_dtype, int64_t>> &layout,
         std::mt19937 &rng) {
    for (auto [dtype, numel] : layout) {
      TypedArray array(dtype, numel + kGuard);
      array.randomize(rng);
      for (int64_t i = numel; i < numel + kGuard; ++i)
        array.set(i, kGuardValue);
      storage.push_back(array);
      sizes.push_back(numel);
    }
    for (size_t i = 0; i < storage.size(); ++i)
      buffers.push_back({sizes[i] ? storage[i].data() : nullptr,
                         storage[i].dtype(), sizes[i]});
  }
  int count() const { return int(buffers.size()); }
  bool guardsIntact() const {
    for (size_t i = 0; i < storage.size(); ++i)
      for (int64_t k = 0; k < kGuard; ++k)
        if (storage[i].get(sizes[i] + k) != kGuardValue)
          return false;
    return true;
  }
};

const std::vector<std::pair<ddprt_dtype, int64_t>> kMixedLayout = {
    {DDPRT_F32, 5}, {DDPRT_F16, 0},  {DDPRT_F64, 3}, {DDPRT_BF16, 7},
    {DDPRT_F32, 0}, {DDPRT_F32, 11}, {DDPRT_F16, 2}, {DDPRT_BF16, 1}};

TEST_F(CApi, MixedBucketOnOneRankIsTheIdentity) {
  std::mt19937 rng(21);
  for (ddprt_reduction reduction : {DDPRT_SUM, DDPRT_MEAN}) {
    Bucket bucket(kMixedLayout, rng);
    std::vector<TypedArray> before = bucket.storage;
    ASSERT_EQ(ddprt_allreduce(context, reduction, DDPRT_ROLE_UNCOMPRESSED,
                              bucket.buffers.data(), bucket.count()),
              DDPRT_OK)
        << ddprt_last_error(context);
    for (size_t i = 0; i < before.size(); ++i)
      EXPECT_TRUE(bucket.storage[i].bitwiseEqual(before[i])) << "tensor " << i;
    EXPECT_TRUE(bucket.guardsIntact());
  }
  EXPECT_EQ(
      ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, nullptr, 0),
      DDPRT_OK)
      << "an empty bucket";
}

TEST_F(CApi, StartAndWaitWithTwoRequestsInFlight) {
  std::mt19937 rng(22);
  Bucket first(kMixedLayout, rng),
      second({{DDPRT_F64, 9}, {DDPRT_F64, 4}}, rng);
  std::vector<TypedArray> firstBefore = first.storage,
                          secondBefore = second.storage;
  ddprt_request *a = nullptr, *b = nullptr;
  ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                                  first.buffers.data(), first.count(), &a),
            DDPRT_OK);
  ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_MEAN, DDPRT_ROLE_GRADIENT,
                                  second.buffers.data(), second.count(), &b),
            DDPRT_OK);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // Started collectives do not hold the host barrier up.
  EXPECT_EQ(ddprt_host_barrier(context), DDPRT_OK);
  int32_t completed = -1;
  EXPECT_FAILS(ddprt_request_completed(context, a, nullptr),
               DDPRT_ERROR_INVALID_ARGUMENT, "output");
  ASSERT_EQ(ddprt_request_completed(context, a, &completed), DDPRT_OK);
  EXPECT_TRUE(completed == 0 || completed == 1) << completed;
  EXPECT_EQ(ddprt_wait(context, a), DDPRT_OK);
  EXPECT_EQ(ddprt_wait(context, b), DDPRT_OK);
  for (size_t i = 0; i < firstBefore.size(); ++i)
    EXPECT_TRUE(first.storage[i].bitwiseEqual(firstBefore[i]));
  for (size_t i = 0; i < secondBefore.size(); ++i)
    EXPECT_TRUE(second.storage[i].bitwiseEqual(secondBefore[i]));
  EXPECT_TRUE(first.guardsIntact() && second.guardsIntact());
}

// On one rank an allgather is a copy: every dtype of the list, integers
// included, in one call, with empty tensors and guards after each output.
TEST_F(CApi, AllgatherOnOneRankCopiesEveryDtype) {
  std::mt19937 rng(23);
  std::vector<std::pair<ddprt_dtype, int64_t>> layout;
  for (ddprt_dtype dtype : kEveryDtype)
    layout.push_back({dtype, 17});
  layout.push_back({DDPRT_I8, 0});
  layout.push_back({DDPRT_F32, 70001});
  Bucket inputs(layout, rng), outputs(layout, rng);
  std::vector<TypedArray> before = inputs.storage;
  ASSERT_EQ(ddprt_allgather(context, DDPRT_ROLE_COMPRESSED,
                            inputs.buffers.data(), outputs.buffers.data(),
                            inputs.count()),
            DDPRT_OK)
      << ddprt_last_error(context);
  for (size_t i = 0; i < layout.size(); ++i) {
    std::string what =
        std::string(dtypeName(layout[i].first)) + " #" + std::to_string(i);
    EXPECT_TRUE(inputs.storage[i].bitwiseEqual(before[i])) << what;
    EXPECT_EQ(std::memcmp(outputs.storage[i].data(), before[i].data(),
                          size_t(layout[i].second) *
                              ddprt_dtype_size(layout[i].first)),
              0)
        << what;
  }
  EXPECT_TRUE(outputs.guardsIntact());
  EXPECT_EQ(
      ddprt_allgather(context, DDPRT_ROLE_COMPRESSED, nullptr, nullptr, 0),
      DDPRT_OK)
      << "no tensors";
}

TEST_F(CApi, AllgatherCountsWhatThisRankContributes) {
  std::vector<int8_t> payload(100, 1), gathered(100);
  std::vector<float> scales(3, 0.5f), gatheredScales(3);
  ddprt_buffer inputs[2] = {{payload.data(), DDPRT_I8, 100},
                            {scales.data(), DDPRT_F32, 3}};
  ddprt_buffer outputs[2] = {{gathered.data(), DDPRT_I8, 100},
                             {gatheredScales.data(), DDPRT_F32, 3}};
  ASSERT_EQ(ddprt_allgather(context, DDPRT_ROLE_COMPRESSED, inputs, outputs, 2),
            DDPRT_OK)
      << ddprt_last_error(context);
  ddprt_counters counters = DDPRT_COUNTERS_INITIALIZER;
  ASSERT_EQ(ddprt_get_counters(context, &counters), DDPRT_OK);
  for (int role = 0; role < DDPRT_ROLE_COUNT; ++role) {
    if (role != DDPRT_ROLE_COMPRESSED) {
      EXPECT_EQ(counters.collectives[role], 0u) << "role " << role;
    }
  }
  EXPECT_EQ(counters.collectives[DDPRT_ROLE_COMPRESSED], 1u);
  EXPECT_EQ(counters.elements_sent[DDPRT_ROLE_COMPRESSED], 103u);
  EXPECT_EQ(counters.bytes_sent[DDPRT_ROLE_COMPRESSED], 112u);
  // What a scheme sends instead of its bucket: after compression only;
  // the bucket counts before (ddprt_count_uncompressed).
  EXPECT_EQ(counters.elements_before_compression, 0u);
  EXPECT_EQ(counters.elements_after_compression, 103u);
  EXPECT_GT(counters.seconds[DDPRT_PHASE_COMMUNICATION], 0.0);
  EXPECT_EQ(counters.seconds[DDPRT_PHASE_CAST], 0.0);
  EXPECT_EQ(gathered[99], 1);
  EXPECT_EQ(gatheredScales[2], 0.5f);
}

TEST(SimulatedLinkText, ParsedAsTheEnvironmentVariableIs) {
  double gbps = -1.0, latency = -1.0;
  const char *why = nullptr;
  ASSERT_EQ(ddprt_parse_simulated_link("10,20", &gbps, &latency, &why),
            DDPRT_OK);
  EXPECT_EQ(gbps, 10.0);
  EXPECT_EQ(latency, 20.0);
  for (const char *bad :
       {"", "10", "10,", ",20", "x,20", "0,20", "10,1e12", "-1,0", " 10,20"}) {
    why = nullptr;
    EXPECT_EQ(ddprt_parse_simulated_link(bad, &gbps, &latency, &why),
              DDPRT_ERROR_INVALID_ARGUMENT)
        << bad;
    ASSERT_NE(why, nullptr) << bad;
    EXPECT_NE(std::string(why).find('\'' + std::string(bad) + '\''),
              std::string::npos)
        << "'" << why << "' does not quote '" << bad << "'";
  }
  EXPECT_EQ(ddprt_parse_simulated_link(nullptr, &gbps, &latency, &why),
            DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(why).find("null"), std::string::npos);
  // `why` may be null.
  EXPECT_EQ(ddprt_parse_simulated_link("abc", &gbps, &latency, nullptr),
            DDPRT_ERROR_INVALID_ARGUMENT);
}

TEST_F(CApi, CountUncompressedAddsABucketBeforeCompression) {
  ASSERT_EQ(ddprt_count_uncompressed(context, 9610), DDPRT_OK);
  ASSERT_EQ(ddprt_count_uncompressed(context, 0), DDPRT_OK);
  ddprt_counters counters = DDPRT_COUNTERS_INITIALIZER;
  ASSERT_EQ(ddprt_get_counters(context, &counters), DDPRT_OK);
  EXPECT_EQ(counters.elements_before_compression, 9610u);
  EXPECT_EQ(counters.elements_after_compression, 0u);
  for (int role = 0; role < DDPRT_ROLE_COUNT; ++role)
    EXPECT_EQ(counters.collectives[role], 0u) << "role " << role;
  EXPECT_FAILS(ddprt_count_uncompressed(context, -1),
               DDPRT_ERROR_INVALID_ARGUMENT, "-1 elements");
  EXPECT_EQ(ddprt_count_uncompressed(nullptr, 5),
            DDPRT_ERROR_INVALID_ARGUMENT);
}

TEST_F(CApi, CountersFollowRolesAndCompression) {
  ddprt_counters counters = DDPRT_COUNTERS_INITIALIZER;
  ASSERT_EQ(ddprt_get_counters(context, &counters), DDPRT_OK);
  for (int role = 0; role < DDPRT_ROLE_COUNT; ++role) {
    EXPECT_EQ(counters.collectives[role], 0u);
    EXPECT_EQ(counters.elements_sent[role], 0u);
    EXPECT_EQ(counters.bytes_sent[role], 0u);
  }
  EXPECT_EQ(counters.elements_before_compression, 0u);
  EXPECT_EQ(counters.elements_after_compression, 0u);
  for (int phase = 0; phase < DDPRT_PHASE_COUNT; ++phase)
    EXPECT_EQ(counters.seconds[phase], 0.0);

  std::vector<float> f32(1000, 1.0f);
  std::vector<uint16_t> narrow(1000, 0);
  // A gradient bucket: 10 f32 + 6 f16 = 16 elements, 52 bytes.
  ddprt_buffer gradient[2] = {{f32.data(), DDPRT_F32, 10},
                              {narrow.data(), DDPRT_F16, 6}};
  ASSERT_EQ(
      ddprt_allreduce(context, DDPRT_MEAN, DDPRT_ROLE_GRADIENT, gradient, 2),
      DDPRT_OK);
  // PowerSGD's P and Q count after compression only.
  ddprt_buffer p{f32.data(), DDPRT_F32, 5};
  ASSERT_EQ(ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_COMPRESSED, &p, 1),
            DDPRT_OK);
  ddprt_buffer q{narrow.data(), DDPRT_BF16, 4};
  ddprt_request *request = nullptr;
  ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_MEAN, DDPRT_ROLE_COMPRESSED,
                                  &q, 1, &request),
            DDPRT_OK);
  ASSERT_EQ(ddprt_wait(context, request), DDPRT_OK);
  ddprt_buffer uncompressed{f32.data(), DDPRT_F32, 7},
      warmup{narrow.data(), DDPRT_F16, 3};
  ASSERT_EQ(ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_UNCOMPRESSED,
                            &uncompressed, 1),
            DDPRT_OK);
  ASSERT_EQ(ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_WARMUP, &warmup, 1),
            DDPRT_OK);
  // A failed collective counts nothing.
  ddprt_buffer bad{nullptr, DDPRT_F32, 3};
  ASSERT_EQ(ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, &bad, 1),
            DDPRT_ERROR_INVALID_ARGUMENT);
  // project adds n*m before compression; backproject adds nothing.
  ddprt_matrix m{f32.data(), DDPRT_F32, 37, 19},
      qm{f32.data() + 703, DDPRT_F32, 19, 2},
      pm{f32.data() + 741, DDPRT_F32, 37, 2};
  ASSERT_EQ(ddprt_project(context, &m, nullptr, &qm, &pm, 1), DDPRT_OK);
  ASSERT_EQ(ddprt_orthogonalize(context, &pm, 1, 0.0), DDPRT_OK);
  std::vector<float> backprojected(38), reconstruction(703);
  ddprt_matrix qOut{backprojected.data(), DDPRT_F32, 19, 2},
      out{reconstruction.data(), DDPRT_F32, 37, 19};
  ASSERT_EQ(ddprt_backproject(context, &m, nullptr, &pm, &qOut, 1), DDPRT_OK);
  ASSERT_EQ(ddprt_reconstruct(context, &pm, &qOut, nullptr, nullptr, &out, 1),
            DDPRT_OK);
  ddprt_buffer scaled{f32.data(), DDPRT_F32, 10};
  ASSERT_EQ(ddprt_scale(context, DDPRT_SCALE_WORLD_SIZE, &scaled, 1), DDPRT_OK);

  ASSERT_EQ(ddprt_get_counters(context, &counters), DDPRT_OK);
  EXPECT_EQ(counters.collectives[DDPRT_ROLE_GRADIENT], 1u);
  EXPECT_EQ(counters.elements_sent[DDPRT_ROLE_GRADIENT], 16u);
  EXPECT_EQ(counters.bytes_sent[DDPRT_ROLE_GRADIENT], 52u);
  // P (5 f32) and Q (4 bf16).
  EXPECT_EQ(counters.collectives[DDPRT_ROLE_COMPRESSED], 2u);
  EXPECT_EQ(counters.elements_sent[DDPRT_ROLE_COMPRESSED], 9u);
  EXPECT_EQ(counters.bytes_sent[DDPRT_ROLE_COMPRESSED], 28u);
  EXPECT_EQ(counters.collectives[DDPRT_ROLE_UNCOMPRESSED], 1u);
  EXPECT_EQ(counters.bytes_sent[DDPRT_ROLE_UNCOMPRESSED], 28u);
  EXPECT_EQ(counters.collectives[DDPRT_ROLE_WARMUP], 1u);
  EXPECT_EQ(counters.bytes_sent[DDPRT_ROLE_WARMUP], 6u);
  EXPECT_EQ(counters.elements_before_compression, 16u + 7 + 3 + 37 * 19);
  EXPECT_EQ(counters.elements_after_compression, 16u + 5 + 4 + 7 + 3);
  for (int phase = 0; phase < DDPRT_PHASE_COUNT; ++phase) {
    EXPECT_GT(counters.seconds[phase], 0.0) << "phase " << phase;
    EXPECT_LT(counters.seconds[phase], 60.0) << "phase " << phase;
  }

  ASSERT_EQ(ddprt_reset_counters(context), DDPRT_OK);
  ASSERT_EQ(ddprt_get_counters(context, &counters), DDPRT_OK);
  for (int role = 0; role < DDPRT_ROLE_COUNT; ++role) {
    EXPECT_EQ(counters.collectives[role], 0u);
    EXPECT_EQ(counters.elements_sent[role], 0u);
    EXPECT_EQ(counters.bytes_sent[role], 0u);
  }
  EXPECT_EQ(counters.elements_before_compression, 0u);
  EXPECT_EQ(counters.elements_after_compression, 0u);
  for (int phase = 0; phase < DDPRT_PHASE_COUNT; ++phase)
    EXPECT_EQ(counters.seconds[phase], 0.0);
}

//===----------------------------------------------------------------------===//
// Kernels through the C API: each tensor of a bucket as the kernel does it
//===----------------------------------------------------------------------===//

TEST_F(CApi, PowerSgdCallsMatchTheKernelsPerTensor) {
  std::mt19937 rng(23);
  struct Tensor {
    ddprt_dtype dtype;
    int64_t n, m, r;
  };
  const Tensor tensors[] = {{DDPRT_F32, 37, 19, 2},
                            {DDPRT_F16, 8, 5, 1},
                            {DDPRT_F64, 3, 11, 3},
                            {DDPRT_BF16, 6, 6, 2}};
  const int count = 4;
  std::vector<TypedArray> g, e, q, p, out;
  for (const Tensor &t : tensors) {
    g.emplace_back(t.dtype, t.n * t.m);
    e.emplace_back(t.dtype, t.n * t.m);
    q.emplace_back(t.dtype, t.m * t.r);
    p.emplace_back(t.dtype, t.n * t.r);
    out.emplace_back(t.dtype, t.n * t.m);
    g.back().randomize(rng);
    e.back().randomize(rng, 0.3);
    q.back().randomize(rng);
  }
  // The same steps on copies, tensor by tensor, with the kernels directly.
  std::vector<TypedArray> ge = g, ee = e, qe = q, pe = p, oute = out;
  // Views of tensor i as n x m ('g'), m x r ('q') or n x r ('p').
  auto matrices = [&](std::vector<TypedArray> &arrays, char shape) {
    std::vector<ddprt_matrix> result;
    for (int i = 0; i < count; ++i) {
      const Tensor &t = tensors[i];
      int64_t rows = shape == 'q' ? t.m : t.n;
      int64_t cols = shape == 'g' ? t.m : t.r;
      result.push_back(arrays[size_t(i)].matrix(rows, cols));
    }
    return result;
  };
  std::vector<ddprt_matrix> gm = matrices(g, 'g'), em = matrices(e, 'g'),
                            qm = matrices(q, 'q'), pm = matrices(p, 'p'),
                            outm = matrices(out, 'g');
  ASSERT_EQ(
      ddprt_project(context, gm.data(), em.data(), qm.data(), pm.data(), count),
      DDPRT_OK);
  ASSERT_EQ(ddprt_orthogonalize(context, pm.data(), count, 1e-8), DDPRT_OK);
  ASSERT_EQ(ddprt_backproject(context, gm.data(), em.data(), pm.data(),
                              qm.data(), count),
            DDPRT_OK);
  ASSERT_EQ(ddprt_reconstruct(context, pm.data(), qm.data(), gm.data(),
                              em.data(), outm.data(), count),
            DDPRT_OK);

  for (int i = 0; i < count; ++i) {
    const Tensor &t = tensors[i];
    ddprt_matrix G = ge[size_t(i)].matrix(t.n, t.m),
                 E = ee[size_t(i)].matrix(t.n, t.m),
                 Q = qe[size_t(i)].matrix(t.m, t.r),
                 P = pe[size_t(i)].matrix(t.n, t.r),
                 O = oute[size_t(i)].matrix(t.n, t.m);
    ddprt::cpu::project(G, &E, Q, P);
    ddprt::cpu::orthogonalize(P, 1e-8);
    ddprt::cpu::backproject(G, &E, P, Q);
    ddprt::cpu::reconstruct(P, Q, &G, &E, O);
    std::string what =
        std::string("tensor ") + std::to_string(i) + " " + dtypeName(t.dtype);
    EXPECT_TRUE(p[size_t(i)].bitwiseEqual(pe[size_t(i)])) << what << ": P";
    EXPECT_TRUE(q[size_t(i)].bitwiseEqual(qe[size_t(i)])) << what << ": Q";
    EXPECT_TRUE(out[size_t(i)].bitwiseEqual(oute[size_t(i)]))
        << what << ": M_hat";
    EXPECT_TRUE(e[size_t(i)].bitwiseEqual(ee[size_t(i)])) << what << ": E";
    EXPECT_TRUE(g[size_t(i)].bitwiseEqual(ge[size_t(i)])) << what << ": G";
  }
}

// Non-finite values (issue: one NaN on one rank used to poison E and Q for
// good): a tensor whose summed P or Q is not finite keeps its E; the others
// in the same call are done as usual; the call says which and counts it.
TEST_F(CApi, ReconstructSkipsTheErrorFeedbackOfNonFiniteTensors) {
  std::mt19937 rng(5);
  for (ddprt_dtype dtype : {DDPRT_F32, DDPRT_F16, DDPRT_BF16, DDPRT_F64}) {
    for (double poison : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
      const int64_t n = 6, m = 5, r = 2;
      std::vector<TypedArray> g, e, p, q, out;
      for (int i = 0; i < 3; ++i) {
        g.emplace_back(dtype, n * m);
        e.emplace_back(dtype, n * m);
        p.emplace_back(dtype, n * r);
        q.emplace_back(dtype, m * r);
        out.emplace_back(dtype, n * m);
        g.back().randomize(rng);
        e.back().randomize(rng, 0.3);
        p.back().randomize(rng);
        q.back().randomize(rng);
      }
      // Tensor 1: a poisoned P; tensor 2: a poisoned Q.
      p[1].set(3, poison);
      q[2].set(0, poison);
      std::vector<TypedArray> expectedE = e, expectedOut = out;
      {
        ddprt_matrix P = p[0].matrix(n, r), Q = q[0].matrix(m, r),
                     G = g[0].matrix(n, m), E = expectedE[0].matrix(n, m),
                     O = expectedOut[0].matrix(n, m);
        ddprt::cpu::reconstruct(P, Q, &G, &E, O);
      }
      std::vector<ddprt_matrix> pm, qm, gm, em, om;
      for (size_t i = 0; i < 3; ++i) {
        pm.push_back(p[i].matrix(n, r));
        qm.push_back(q[i].matrix(m, r));
        gm.push_back(g[i].matrix(n, m));
        em.push_back(e[i].matrix(n, m));
        om.push_back(out[i].matrix(n, m));
      }
      ddprt_counters before = DDPRT_COUNTERS_INITIALIZER,
                     after = DDPRT_COUNTERS_INITIALIZER;
      ASSERT_EQ(ddprt_get_counters(context, &before), DDPRT_OK);
      EXPECT_FAILS(ddprt_reconstruct(context, pm.data(), qm.data(), gm.data(),
                                     em.data(), om.data(), 3),
                   DDPRT_NONFINITE,
                   "P or Q of tensor #1 (6x5), #2 (6x5) of 3: the error "
                   "feedback skipped this step");
      ASSERT_EQ(ddprt_get_counters(context, &after), DDPRT_OK);
      EXPECT_EQ(after.nonfinite_skips - before.nonfinite_skips, 2u);
      std::string what =
          dtypeName(dtype) + std::string(" poison ") + std::to_string(poison);
      EXPECT_TRUE(e[0].bitwiseEqual(expectedE[0])) << what;
      EXPECT_TRUE(out[0].bitwiseEqual(expectedOut[0])) << what;
      for (size_t i = 1; i < 3; ++i) {
        EXPECT_TRUE(e[i].bitwiseEqual(expectedE[i]))
            << what << ": E of poisoned tensor " << i << " changed";
        bool anyNonFinite = false;
        for (int64_t k = 0; k < n * m; ++k)
          anyNonFinite |= !std::isfinite(out[i].get(k));
        EXPECT_TRUE(anyNonFinite) << what << ": output " << i;
      }
      // Without error feedback there is no state to keep: no status.
      EXPECT_EQ(ddprt_reconstruct(context, pm.data(), qm.data(), nullptr,
                                  nullptr, om.data(), 3),
                DDPRT_OK);
    }
  }
}

// Sizes whose bytes do not fit in 64 bits: refused, not wrapped into a
// small allocation that later copies overrun.
TEST_F(CApi, SizesBeyondSixtyFourBitBytesAreRefused) {
  double value = 0;
  ddprt_buffer huge{&value, DDPRT_F64, int64_t(1) << 61};
  EXPECT_FAILS(
      ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, &huge, 1),
      DDPRT_ERROR_INVALID_ARGUMENT, "more bytes than a 64-bit size holds");
  ddprt_state *state = nullptr;
  EXPECT_FAILS(
      ddprt_state_get(context, "huge", DDPRT_F64, int64_t(1) << 61, &state),
      DDPRT_ERROR_INVALID_ARGUMENT, "a 64-bit size cannot hold");
  EXPECT_EQ(state, nullptr);
}

TEST_F(CApi, InspectTellsFiniteAndNonzeroPerBuffer) {
  for (ddprt_dtype dtype : {DDPRT_F32, DDPRT_F16, DDPRT_BF16, DDPRT_F64}) {
    std::vector<TypedArray> arrays(6, TypedArray(dtype, 7));
    arrays[0].fill(0.0); // collapsed
    arrays[1].fill(0.0); // one nonzero
    arrays[1].set(6, -0.5);
    arrays[2].fill(1.0); // NaN
    arrays[2].set(3, std::nan(""));
    arrays[3].fill(0.0); // Inf among zeros
    arrays[3].set(0, -HUGE_VAL);
    arrays[4].fill(-0.0);             // negative zero is zero
    arrays[5] = TypedArray(dtype, 0); // empty: finite, all zero
    std::vector<ddprt_buffer> buffers;
    for (TypedArray &a : arrays)
      buffers.push_back(a.buffer());
    int32_t finite[6] = {-1, -1, -1, -1, -1, -1};
    int32_t nonzero[6] = {-1, -1, -1, -1, -1, -1};
    ASSERT_EQ(ddprt_inspect(context, buffers.data(), 6, finite, nonzero),
              DDPRT_OK);
    const int32_t wantFinite[6] = {1, 1, 0, 0, 1, 1};
    const int32_t wantNonzero[6] = {0, 1, 1, 1, 0, 0};
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(finite[i], wantFinite[i]) << dtypeName(dtype) << " #" << i;
      EXPECT_EQ(nonzero[i], wantNonzero[i]) << dtypeName(dtype) << " #" << i;
    }
    // Either output may be null.
    EXPECT_EQ(ddprt_inspect(context, buffers.data(), 6, nullptr, nonzero),
              DDPRT_OK);
    EXPECT_EQ(ddprt_inspect(context, buffers.data(), 6, finite, nullptr),
              DDPRT_OK);
  }
  ddprt_buffer unknown{nullptr, kUnknownDtype, 0};
  EXPECT_FAILS(ddprt_inspect(context, &unknown, 1, nullptr, nullptr),
               DDPRT_ERROR_INVALID_ARGUMENT, "unknown dtype");
  EXPECT_FAILS(ddprt_inspect(context, nullptr, 2, nullptr, nullptr),
               DDPRT_ERROR_INVALID_ARGUMENT, "is null");
}

TEST_F(CApi, TopKSelectsAndChecksItsArguments) {
  float x[6] = {0.5f, -3.0f, 1.0f, 2.0f, -0.25f, 4.0f};
  float values[3] = {};
  int32_t indices[3] = {-1, -1, -1};
  ddprt_buffer in{x, DDPRT_F32, 6}, out{values, DDPRT_F32, 3},
      at{indices, DDPRT_I32, 3};
  ddprt_counters before = DDPRT_COUNTERS_INITIALIZER;
  ASSERT_EQ(ddprt_get_counters(context, &before), DDPRT_OK);
  ASSERT_EQ(ddprt_top_k(context, &in, &out, &at), DDPRT_OK);
  EXPECT_EQ(std::vector<int32_t>(indices, indices + 3),
            (std::vector<int32_t>{5, 1, 3}));
  EXPECT_EQ(std::vector<float>(values, values + 3),
            (std::vector<float>{4.0f, -3.0f, 2.0f}));
  ddprt_counters after = DDPRT_COUNTERS_INITIALIZER;
  ASSERT_EQ(ddprt_get_counters(context, &after), DDPRT_OK);
  EXPECT_GE(after.seconds[DDPRT_PHASE_COMPRESSION],
            before.seconds[DDPRT_PHASE_COMPRESSION]);

  const ddprt_status invalid = DDPRT_ERROR_INVALID_ARGUMENT;
  EXPECT_FAILS(ddprt_top_k(context, nullptr, &out, &at), invalid, "null");
  ddprt_buffer wrongValues{values, DDPRT_F64, 3};
  EXPECT_FAILS(ddprt_top_k(context, &in, &wrongValues, &at), invalid,
               "the values are f64 but the input is f32");
  float floatIndices[3];
  ddprt_buffer wrongIndices{floatIndices, DDPRT_F32, 3};
  EXPECT_FAILS(ddprt_top_k(context, &in, &out, &wrongIndices), invalid,
               "not i32 or i64");
  ddprt_buffer fewer{indices, DDPRT_I32, 2};
  EXPECT_FAILS(ddprt_top_k(context, &in, &out, &fewer), invalid,
               "3 values but 2 indices");
  float many[7];
  int32_t manyIndices[7];
  ddprt_buffer tooMany{many, DDPRT_F32, 7},
      tooManyAt{manyIndices, DDPRT_I32, 7};
  EXPECT_FAILS(ddprt_top_k(context, &in, &tooMany, &tooManyAt), invalid,
               "k = 7 must be between 1 and the input's 6 elements");
  ddprt_buffer none{values, DDPRT_F32, 0}, noneAt{indices, DDPRT_I32, 0};
  EXPECT_FAILS(ddprt_top_k(context, &in, &none, &noneAt), invalid, "k = 0");
  ddprt_buffer inside{x + 2, DDPRT_F32, 3};
  EXPECT_FAILS(ddprt_top_k(context, &in, &inside, &at), invalid,
               "must not overlap");
  ddprt_buffer integers{indices, DDPRT_I32, 3};
  EXPECT_FAILS(ddprt_top_k(context, &integers, &out, &at), invalid,
               "only for state buffers");
  // Indices of an input too large for i32 (never read: the check fails
  // first).
  ddprt_buffer huge{x, DDPRT_F32, int64_t(INT32_MAX) + 2};
  EXPECT_FAILS(ddprt_top_k(context, &huge, &out, &at), invalid,
               "i32 indices cannot address");
}

TEST_F(CApi, ScaleCastAndRandomNormalMatchTheKernels) {
  std::mt19937 rng(24);
  TypedArray a(DDPRT_F32, 100), b(DDPRT_BF16, 50), aHalf(DDPRT_F16, 100),
      bWide(DDPRT_F64, 50);
  a.randomize(rng);
  b.randomize(rng);
  TypedArray ae = a, be = b, aHalfE = aHalf, bWideE = bWide;
  ddprt_buffer inputs[2] = {a.buffer(), b.buffer()};
  ddprt_buffer outputs[2] = {aHalf.buffer(), bWide.buffer()};
  ASSERT_EQ(
      ddprt_cast(context, DDPRT_SCALE_INVERSE_WORLD_SIZE, inputs, outputs, 2),
      DDPRT_OK);
  ddprt::cpu::cast(1.0, ae.buffer(), aHalfE.buffer());
  ddprt::cpu::cast(1.0, be.buffer(), bWideE.buffer());
  EXPECT_TRUE(aHalf.bitwiseEqual(aHalfE));
  EXPECT_TRUE(bWide.bitwiseEqual(bWideE));

  ASSERT_EQ(ddprt_scale(context, DDPRT_SCALE_WORLD_SIZE, inputs, 2), DDPRT_OK);
  EXPECT_TRUE(a.bitwiseEqual(ae) && b.bitwiseEqual(be)) << "world size 1";

  for (ddprt_dtype dtype : kAllDtypes) {
    TypedArray drawn(dtype, 77), expected(dtype, 77);
    drawn.poison();
    ddprt_buffer buffer = drawn.buffer();
    ASSERT_EQ(ddprt_random_normal(context, &buffer, 11, 12, 13), DDPRT_OK);
    ddprt::cpu::randomNormal(expected.buffer(), 11, 12, 13);
    EXPECT_TRUE(drawn.bitwiseEqual(expected)) << dtypeName(dtype);
  }
  ddprt_buffer empty{nullptr, DDPRT_F32, 0};
  EXPECT_EQ(ddprt_random_normal(context, &empty, 1, 2, 3), DDPRT_OK);
}

//===----------------------------------------------------------------------===//
// State and checkpoints
//===----------------------------------------------------------------------===//

TEST_F(CApi, StateIsZeroInitializedAndFoundAgainByName) {
  int index = 0;
  for (ddprt_dtype dtype : kAllDtypes) {
    std::string name = "state." + std::to_string(index++);
    ddprt_state *state = nullptr;
    ASSERT_EQ(ddprt_state_get(context, name.c_str(), dtype, 257, &state),
              DDPRT_OK);
    ASSERT_NE(state, nullptr);
    ddprt_buffer buffer = ddprt_state_buffer(state);
    EXPECT_EQ(buffer.dtype, dtype);
    EXPECT_EQ(buffer.numel, 257);
    ASSERT_NE(buffer.data, nullptr);
    const unsigned char *bytes = static_cast<unsigned char *>(buffer.data);
    for (size_t i = 0; i < 257 * ddprt_dtype_size(dtype); ++i)
      ASSERT_EQ(bytes[i], 0) << name << " byte " << i;

    ddprt_state *again = nullptr;
    ASSERT_EQ(ddprt_state_get(context, name.c_str(), dtype, 257, &again),
              DDPRT_OK);
    EXPECT_EQ(again, state);
  }
  ddprt_state *empty = nullptr;
  ASSERT_EQ(ddprt_state_get(context, "empty", DDPRT_F32, 0, &empty), DDPRT_OK);
  EXPECT_EQ(ddprt_state_buffer(empty).numel, 0);
  ddprt_buffer none = ddprt_state_buffer(nullptr);
  EXPECT_EQ(none.data, nullptr);
  EXPECT_EQ(none.numel, 0);
}

TEST_F(CApi, StateWithTheSameNameButAnotherShapeIsAMismatch) {
  ddprt_state *state = nullptr, *other = nullptr;
  ASSERT_EQ(ddprt_state_get(context, "error.conv1", DDPRT_F32, 64, &state),
            DDPRT_OK);
  EXPECT_FAILS(ddprt_state_get(context, "error.conv1", DDPRT_F32, 65, &other),
               DDPRT_ERROR_MISMATCH, "error.conv1");
  EXPECT_FAILS(ddprt_state_get(context, "error.conv1", DDPRT_F16, 64, &other),
               DDPRT_ERROR_MISMATCH, "error.conv1");
  EXPECT_EQ(other, nullptr);
  ASSERT_EQ(ddprt_state_get(context, "error.conv1", DDPRT_F32, 64, &other),
            DDPRT_OK);
  EXPECT_EQ(other, state);
}

namespace fs = std::filesystem;

class Checkpoint : public CApi {
protected:
  void SetUp() override {
    CApi::SetUp();
    char pattern[] = "/tmp/ddprt-capi-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory = pattern;
    path = (directory / "checkpoint.bin").string();
    states = createStates(context, {{"error.fc", DDPRT_F32, 1000},
                                    {"p.conv", DDPRT_F16, 37},
                                    {"q.conv", DDPRT_BF16, 19},
                                    {"rng", DDPRT_F64, 5},
                                    {"empty", DDPRT_F32, 0}});
    randomizeStates(1);
  }
  void TearDown() override {
    CApi::TearDown();
    std::error_code ignored;
    fs::remove_all(directory, ignored);
  }

  struct StateSpec {
    const char *name;
    ddprt_dtype dtype;
    int64_t numel;
  };
  static std::vector<ddprt_state *>
  createStates(ddprt_context *context, const std::vector<StateSpec> &specs) {
    std::vector<ddprt_state *> result;
    for (const StateSpec &spec : specs) {
      ddprt_state *state = nullptr;
      EXPECT_EQ(
          ddprt_state_get(context, spec.name, spec.dtype, spec.numel, &state),
          DDPRT_OK);
      result.push_back(state);
    }
    return result;
  }

  /// Random bytes in every state (any bit pattern must round trip).
  void randomizeStates(unsigned seed) {
    std::mt19937 rng(seed);
    for (ddprt_state *state : states) {
      ddprt_buffer buffer = ddprt_state_buffer(state);
      unsigned char *bytes = static_cast<unsigned char *>(buffer.data);
      for (size_t i = 0;
           i < size_t(buffer.numel) * ddprt_dtype_size(buffer.dtype); ++i)
        bytes[i] = static_cast<unsigned char>(rng());
    }
  }
  std::vector<unsigned char> snapshot() const {
    std::vector<unsigned char> all;
    for (ddprt_state *state : states) {
      ddprt_buffer buffer = ddprt_state_buffer(state);
      const unsigned char *bytes = static_cast<unsigned char *>(buffer.data);
      all.insert(all.end(), bytes,
                 bytes + size_t(buffer.numel) * ddprt_dtype_size(buffer.dtype));
    }
    return all;
  }
  std::vector<char> readFile(const std::string &file) const {
    std::ifstream in(file, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in),
                             std::istreambuf_iterator<char>());
  }
  void writeFile(const std::string &file, const std::vector<char> &bytes) {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
  /// No "<path>.tmp.<rank>" or other stray file is left in the directory.
  void expectOnlyFiles(const std::vector<std::string> &names) {
    std::vector<std::string> found;
    for (const fs::directory_entry &entry : fs::directory_iterator(directory))
      found.push_back(entry.path().filename().string());
    std::sort(found.begin(), found.end());
    std::vector<std::string> expected = names;
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(found, expected);
  }

  fs::path directory;
  std::string path;
  std::vector<ddprt_state *> states;
};

TEST_F(Checkpoint, SaveModifyLoadRestoresBitwise) {
  std::vector<unsigned char> saved = snapshot();
  ASSERT_EQ(ddprt_checkpoint_save(context, path.c_str()), DDPRT_OK)
      << ddprt_last_error(context);
  expectOnlyFiles({"checkpoint.bin"});
  randomizeStates(2);
  ASSERT_NE(snapshot(), saved);
  ASSERT_EQ(ddprt_checkpoint_load(context, path.c_str()), DDPRT_OK)
      << ddprt_last_error(context);
  EXPECT_EQ(snapshot(), saved);
  EXPECT_STREQ(ddprt_last_error(context), "");

  // Saving again over the old checkpoint replaces it.
  randomizeStates(3);
  std::vector<unsigned char> newer = snapshot();
  ASSERT_EQ(ddprt_checkpoint_save(context, path.c_str()), DDPRT_OK);
  randomizeStates(4);
  ASSERT_EQ(ddprt_checkpoint_load(context, path.c_str()), DDPRT_OK);
  EXPECT_EQ(snapshot(), newer);
  expectOnlyFiles({"checkpoint.bin"});
}

TEST_F(Checkpoint, RestartedJobRestoresFromTheFile) {
  ASSERT_EQ(ddprt_checkpoint_save(context, path.c_str()), DDPRT_OK);
  std::vector<unsigned char> saved = snapshot();
  // A new context with the same states, created in another order.
  ddprt_context *restarted = nullptr;
  ASSERT_EQ(ddprt_init(nullptr, &restarted), DDPRT_OK);
  std::vector<ddprt_state *> fresh =
      createStates(restarted, {{"empty", DDPRT_F32, 0},
                               {"rng", DDPRT_F64, 5},
                               {"q.conv", DDPRT_BF16, 19},
                               {"p.conv", DDPRT_F16, 37},
                               {"error.fc", DDPRT_F32, 1000}});
  EXPECT_EQ(ddprt_checkpoint_load(restarted, path.c_str()), DDPRT_OK)
      << ddprt_last_error(restarted);
  std::vector<unsigned char> restored;
  for (auto it = fresh.rbegin(); it != fresh.rend(); ++it) {
    ddprt_buffer buffer = ddprt_state_buffer(*it);
    const unsigned char *bytes = static_cast<unsigned char *>(buffer.data);
    restored.insert(restored.end(), bytes,
                    bytes +
                        size_t(buffer.numel) * ddprt_dtype_size(buffer.dtype));
  }
  EXPECT_EQ(restored, saved);
  EXPECT_EQ(ddprt_finalize(restarted), DDPRT_OK);
}

TEST_F(Checkpoint, MissingFileIsAnIOError) {
  std::vector<unsigned char> before = snapshot();
  std::string missing = (directory / "missing.bin").string();
  EXPECT_FAILS(ddprt_checkpoint_load(context, missing.c_str()), DDPRT_ERROR_IO,
               "missing.bin");
  EXPECT_EQ(snapshot(), before);
}

// ddprt_checkpoint_load (CApi.cpp, reading the file through
// std::istreambuf_iterator) lets a read error escape as a C++ exception: a
// directory opens fine, then libstdc++ throws std::ios_base::failure
// ("basic_filebuf::underflow error reading the file: Is a directory")
// through the extern "C" function, where a C caller gets std::terminate.
// ddprt.h: "Library code never aborts or exits the process."
TEST_F(Checkpoint, LoadingADirectoryIsAnIoErrorNotAnException) {
  std::vector<unsigned char> before = snapshot();
  ddprt_status status = DDPRT_OK;
  std::string escaped;
  try {
    status = ddprt_checkpoint_load(context, directory.c_str());
  } catch (const std::exception &exception) {
    escaped = exception.what();
  }
  EXPECT_EQ(escaped, "") << "an exception crossed the C ABI";
  EXPECT_EQ(status, DDPRT_ERROR_IO);
  EXPECT_EQ(snapshot(), before);
}

TEST_F(Checkpoint, TruncatedFileIsRejectedWithoutTouchingState) {
  ASSERT_EQ(ddprt_checkpoint_save(context, path.c_str()), DDPRT_OK);
  std::vector<char> bytes = readFile(path);
  ASSERT_GT(bytes.size(), 2000u);
  randomizeStates(5);
  std::vector<unsigned char> before = snapshot();
  for (size_t length : {size_t(0), size_t(7), size_t(16), size_t(40),
                        bytes.size() / 2, bytes.size() - 9, bytes.size() - 1}) {
    writeFile(path, std::vector<char>(bytes.begin(), bytes.begin() + length));
    EXPECT_FAILS(ddprt_checkpoint_load(context, path.c_str()), DDPRT_ERROR_IO,
                 "checkpoint.bin");
    EXPECT_EQ(snapshot(), before) << "truncated to " << length;
  }
}

TEST_F(Checkpoint, FlippedByteIsRejectedWithoutTouchingState) {
  ASSERT_EQ(ddprt_checkpoint_save(context, path.c_str()), DDPRT_OK);
  std::vector<char> bytes = readFile(path);
  randomizeStates(6);
  std::vector<unsigned char> before = snapshot();
  for (size_t position :
       {size_t(0), size_t(8), size_t(12), size_t(16), size_t(30),
        bytes.size() / 2, bytes.size() - 9, bytes.size() - 1}) {
    std::vector<char> damaged = bytes;
    damaged[position] = char(damaged[position] ^ 0x10);
    writeFile(path, damaged);
    EXPECT_FAILS(ddprt_checkpoint_load(context, path.c_str()), DDPRT_ERROR_IO,
                 "not valid");
    EXPECT_EQ(snapshot(), before) << "byte " << position << " flipped";
  }
}

TEST_F(Checkpoint, FileOfAJobWithOtherStatesIsAMismatch) {
  // Each job's states, and what the message says of them: every name on
  // one side only, so that a renamed gradient shows as such.
  const std::vector<std::pair<std::vector<StateSpec>, std::string>> otherJobs =
      {// fewer states
       {{{"error.fc", DDPRT_F32, 1000}, {"p.conv", DDPRT_F16, 37}},
        "only in the checkpoint: none; only in this job: 'empty', 'q.conv', "
        "'rng' (states are named after the gradients"},
       // as many, one with another name
       {{{"error.fc", DDPRT_F32, 1000},
         {"p.conv", DDPRT_F16, 37},
         {"q.conv", DDPRT_BF16, 19},
         {"rng", DDPRT_F64, 5},
         {"error.other", DDPRT_F32, 0}},
        "only in the checkpoint: 'error.other'; only in this job: 'empty'"},
       // the same names, one with another size
       {{{"error.fc", DDPRT_F32, 999},
         {"p.conv", DDPRT_F16, 37},
         {"q.conv", DDPRT_BF16, 19},
         {"rng", DDPRT_F64, 5},
         {"empty", DDPRT_F32, 0}},
        "state 'error.fc' has another dtype or size"},
       // the same names, one with another dtype
       {{{"error.fc", DDPRT_F32, 1000},
         {"p.conv", DDPRT_BF16, 37},
         {"q.conv", DDPRT_BF16, 19},
         {"rng", DDPRT_F64, 5},
         {"empty", DDPRT_F32, 0}},
        "state 'p.conv' has another dtype or size"}};
  std::vector<unsigned char> before = snapshot();
  int job = 0;
  for (const auto &[specs, says] : otherJobs) {
    ddprt_context *other = nullptr;
    ASSERT_EQ(ddprt_init(nullptr, &other), DDPRT_OK);
    createStates(other, specs);
    std::string otherPath =
        (directory / ("job" + std::to_string(job++) + ".bin")).string();
    ASSERT_EQ(ddprt_checkpoint_save(other, otherPath.c_str()), DDPRT_OK);
    ASSERT_EQ(ddprt_finalize(other), DDPRT_OK);
    EXPECT_FAILS(ddprt_checkpoint_load(context, otherPath.c_str()),
                 DDPRT_ERROR_MISMATCH, says);
    EXPECT_EQ(snapshot(), before) << "job " << job - 1;
  }
}

/// A checkpoint of `entries` (name, dtype, numel; data all `fill`) for
/// rank 0 of 1, with a valid checksum: what a forger or a buggy writer
/// could make.
std::vector<char> forgeCheckpoint(
    const std::vector<std::tuple<std::string, ddprt_dtype, int64_t>> &entries,
    char fill) {
  std::vector<char> bytes = {'D', 'D', 'P', 'R', 'T', 'C', 'K', '1'};
  auto put = [&](const void *data, size_t size) {
    const char *from = static_cast<const char *>(data);
    bytes.insert(bytes.end(), from, from + size);
  };
  uint32_t rank = 0, world = 1;
  uint64_t count = entries.size();
  put(&rank, 4);
  put(&world, 4);
  put(&count, 8);
  for (const auto &[name, dtype, numel] : entries) {
    uint32_t nameSize = uint32_t(name.size()), type = uint32_t(dtype);
    put(&nameSize, 4);
    put(name.data(), name.size());
    put(&type, 4);
    put(&numel, 8);
    bytes.insert(bytes.end(), size_t(numel) * ddprt_dtype_size(dtype), fill);
  }
  uint64_t hash = 1469598103934665603ull; // FNV-1a, as the runtime's
  for (char c : bytes) {
    hash ^= uint8_t(c);
    hash *= 1099511628211ull;
  }
  put(&hash, 8);
  return bytes;
}

// One state twice and another missing, with a valid checksum: refused (the
// missing state was left as it was, silently), nothing touched.
TEST_F(Checkpoint, StateTwiceAndAnotherMissingIsRejected) {
  std::vector<unsigned char> before = snapshot();
  std::vector<std::tuple<std::string, ddprt_dtype, int64_t>> entries = {
      {"error.fc", DDPRT_F32, 1000},
      {"p.conv", DDPRT_F16, 37},
      {"q.conv", DDPRT_BF16, 19},
      {"rng", DDPRT_F64, 5},
      {"empty", DDPRT_F32, 0}};
  auto twice = entries;
  twice[3] = entries[0]; // "rng" missing, "error.fc" twice
  writeFile(path, forgeCheckpoint(twice, 7));
  EXPECT_FAILS(ddprt_checkpoint_load(context, path.c_str()), DDPRT_ERROR_IO,
               "holds state 'error.fc' twice");
  EXPECT_EQ(snapshot(), before);
  // The same entries, each once, load.
  writeFile(path, forgeCheckpoint(entries, 7));
  EXPECT_EQ(ddprt_checkpoint_load(context, path.c_str()), DDPRT_OK)
      << ddprt_last_error(context);
  EXPECT_NE(snapshot(), before);
}

// An entry of a dtype no runtime writes, or of a size past the file's
// end, with a valid checksum: refused as not a checkpoint, nothing touched
// (its size is not taken from the job's state of the same name).
TEST_F(Checkpoint, UnknownDtypeOrOversizedEntryIsRejected) {
  std::vector<unsigned char> before = snapshot();
  // The dtype field (after magic, rank, world, count, name size, name) set
  // to 99 in the bytes: no enum value is made of it here.
  auto patched = [](std::vector<char> bytes, size_t offset, const void *value,
                    size_t size) {
    std::memcpy(bytes.data() + offset, value, size);
    uint64_t hash = 1469598103934665603ull;
    for (size_t i = 0; i + 8 < bytes.size(); ++i) {
      hash ^= uint8_t(bytes[i]);
      hash *= 1099511628211ull;
    }
    std::memcpy(bytes.data() + bytes.size() - 8, &hash, 8);
    return bytes;
  };
  uint32_t unknown = 99;
  writeFile(path, patched(forgeCheckpoint({{"error.fc", DDPRT_F32, 0}}, 7),
                          8 + 16 + 4 + 8, &unknown, 4));
  EXPECT_FAILS(ddprt_checkpoint_load(context, path.c_str()), DDPRT_ERROR_IO,
               "state 'error.fc' has an unknown dtype 99");
  // numel of the entry (after the dtype): far past the file, and
  // overflowing size_t at 4 bytes.
  int64_t numel = int64_t(1) << 62;
  writeFile(path, patched(forgeCheckpoint({{"error.fc", DDPRT_F32, 0}}, 7),
                          8 + 16 + 4 + 8 + 4, &numel, 8));
  EXPECT_FAILS(ddprt_checkpoint_load(context, path.c_str()), DDPRT_ERROR_IO,
               "truncated data of state 'error.fc'");
  EXPECT_EQ(snapshot(), before);
}

// A file longer than any checkpoint of the job's states (/dev/zero, a
// wrong file) is refused after reading at most that much.
TEST_F(Checkpoint, EndlessOrOversizedFileIsRejectedWithoutReadingItAll) {
  std::vector<unsigned char> before = snapshot();
  EXPECT_FAILS(ddprt_checkpoint_load(context, "/dev/zero"), DDPRT_ERROR_IO,
               "far longer than a checkpoint of this job's states");
  ASSERT_EQ(ddprt_checkpoint_save(context, path.c_str()), DDPRT_OK);
  std::vector<char> bytes = readFile(path);
  bytes.insert(bytes.end() - 8, 2 << 20, '\0');
  writeFile(path, bytes);
  EXPECT_FAILS(ddprt_checkpoint_load(context, path.c_str()), DDPRT_ERROR_IO,
               "longer than");
  EXPECT_EQ(snapshot(), before);
}

TEST_F(Checkpoint, UnwritablePathIsAnIOErrorAndLeavesNoFile) {
  std::string noDirectory = (directory / "no/such/dir/checkpoint.bin").string();
  EXPECT_FAILS(ddprt_checkpoint_save(context, noDirectory.c_str()),
               DDPRT_ERROR_IO, "no/such/dir");
  expectOnlyFiles({});
  // The temporary file is written, but renaming it onto a directory fails:
  // it must be removed.
  fs::create_directory(directory / "taken");
  std::string taken = (directory / "taken").string();
  EXPECT_FAILS(ddprt_checkpoint_save(context, taken.c_str()), DDPRT_ERROR_IO,
               "taken");
  expectOnlyFiles({"taken"});
  EXPECT_TRUE(fs::is_empty(directory / "taken"));
}

// ddprt_checkpoint_save (CApi.cpp, the "cannot write checkpoint" branch)
// returns when writing the temporary file fails without removing it: a
// failed save (disk full, quota, file size limit) leaves "<path>.tmp.<rank>"
// behind. Simulated with a file size limit smaller than the checkpoint.
TEST_F(Checkpoint, FailedWriteLeavesNoTemporaryFile) {
  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit limited = saved;
  limited.rlim_cur = 1024;
  auto previousHandler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  ddprt_status status = ddprt_checkpoint_save(context, path.c_str());
  std::string message = ddprt_last_error(context);
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previousHandler);
  EXPECT_EQ(status, DDPRT_ERROR_IO) << message;
  expectOnlyFiles({});
}

} // namespace

// The step counter is an i64 state: it checkpoints bitwise like the others,
// and no kernel or collective takes i64.
TEST(StepCounter, I64StateRoundTripsAndComputeRejectsIt) {
  ddprt_context *context = nullptr;
  ASSERT_EQ(ddprt_init(nullptr, &context), DDPRT_OK);
  ddprt_state *step = nullptr;
  ASSERT_EQ(ddprt_state_get(context, "ddp.step.train", DDPRT_I64, 1, &step),
            DDPRT_OK)
      << ddprt_last_error(context);
  ddprt_buffer buffer = ddprt_state_buffer(step);
  auto *counter = static_cast<int64_t *>(buffer.data);
  EXPECT_EQ(*counter, 0);
  *counter = (int64_t(1) << 40) + 7;
  std::string path = ::testing::TempDir() + "ddprt-step-counter.bin";
  ASSERT_EQ(ddprt_checkpoint_save(context, path.c_str()), DDPRT_OK);
  *counter = 3;
  ASSERT_EQ(ddprt_checkpoint_load(context, path.c_str()), DDPRT_OK)
      << ddprt_last_error(context);
  EXPECT_EQ(*counter, (int64_t(1) << 40) + 7);
  std::remove(path.c_str());

  EXPECT_EQ(
      ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, &buffer, 1),
      DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ddprt_last_error(context)).find("i64"),
            std::string::npos)
      << ddprt_last_error(context);
  EXPECT_EQ(ddprt_scale(context, DDPRT_SCALE_WORLD_SIZE, &buffer, 1),
            DDPRT_ERROR_INVALID_ARGUMENT);
  // ... but an allgather does (a copy on one rank).
  int64_t gathered = 0;
  ddprt_buffer output{&gathered, DDPRT_I64, 1};
  EXPECT_EQ(
      ddprt_allgather(context, DDPRT_ROLE_COMPRESSED, &buffer, &output, 1),
      DDPRT_OK)
      << ddprt_last_error(context);
  EXPECT_EQ(gathered, (int64_t(1) << 40) + 7);
  EXPECT_EQ(ddprt_finalize(context), DDPRT_OK);
}

TEST_F(CApi, AllreducesAndKernelsRefuseIntegersNamingThem) {
  int8_t bytes[4] = {};
  int32_t words[4] = {};
  ddprt_buffer i8{bytes, DDPRT_I8, 4}, i32{words, DDPRT_I32, 4};
  EXPECT_FAILS(
      ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_COMPRESSED, &i8, 1),
      DDPRT_ERROR_INVALID_ARGUMENT,
      "allreduce buffer #0: i8 is only for state buffers and "
      "ddprt_allgather");
  EXPECT_FAILS(ddprt_scale(context, DDPRT_SCALE_NONE, &i32, 1),
               DDPRT_ERROR_INVALID_ARGUMENT,
               "i32 is only for state buffers and ddprt_allgather");
}

TEST_F(CApi, CopyMovesBuffersAndChecksThem) {
  std::vector<float> from = {1.5f, -2.0f, 3.25f}, to(3, 0.0f);
  std::vector<double> wide = {7.0, 8.0};
  std::vector<double> wideTo(2, 0.0);
  ddprt_buffer sources[2] = {{from.data(), DDPRT_F32, 3},
                             {wide.data(), DDPRT_F64, 2}};
  ddprt_buffer destinations[2] = {{to.data(), DDPRT_F32, 3},
                                  {wideTo.data(), DDPRT_F64, 2}};
  ASSERT_EQ(ddprt_copy(context, sources, destinations, 2), DDPRT_OK)
      << ddprt_last_error(context);
  EXPECT_EQ(to, from);
  EXPECT_EQ(wideTo, wide);

  ddprt_buffer shorter = {to.data(), DDPRT_F32, 2};
  EXPECT_FAILS(ddprt_copy(context, sources, &shorter, 1),
               DDPRT_ERROR_INVALID_ARGUMENT, "differ in dtype or size");
  ddprt_buffer narrow = {to.data(), DDPRT_F16, 3};
  EXPECT_FAILS(ddprt_copy(context, sources, &narrow, 1),
               DDPRT_ERROR_INVALID_ARGUMENT, "differ in dtype or size");
  EXPECT_FAILS(ddprt_copy(context, nullptr, destinations, 1),
               DDPRT_ERROR_INVALID_ARGUMENT, "null");
}

TEST_F(CApi, StateDataIsTheBufferAndStepCountersLiveOnTheHost) {
  ddprt_state *state = nullptr, *step = nullptr;
  ASSERT_EQ(ddprt_state_get(context, "q", DDPRT_F32, 8, &state), DDPRT_OK);
  EXPECT_EQ(ddprt_state_data(state), ddprt_state_buffer(state).data);
  EXPECT_EQ(ddprt_state_data(nullptr), nullptr);
  ASSERT_EQ(ddprt_state_get(context, "step", DDPRT_I64, 1, &step), DDPRT_OK);
  // Host memory on every backend: compiled code reads it directly.
  auto *counter = static_cast<int64_t *>(ddprt_state_data(step));
  EXPECT_EQ(*counter, 0);
  *counter = 41;
  EXPECT_EQ(*static_cast<int64_t *>(ddprt_state_buffer(step).data), 41);
}

namespace {
struct HandledFailure {
  int calls = 0;
  ddprt_status status = DDPRT_OK;
  std::string where, message;
};
void recordFailure(ddprt_context *context, ddprt_status status,
                   const char *where, void *user) {
  auto *seen = static_cast<HandledFailure *>(user);
  ++seen->calls;
  seen->status = status;
  seen->where = where;
  seen->message = ddprt_last_error(context);
}
} // namespace

TEST_F(CApi, CurrentContextAndErrorHandlerForCompiledCode) {
  ddprt_set_current_context(context);
  EXPECT_EQ(ddprt_current_context(), context);
  HandledFailure seen;
  ddprt_set_error_handler(recordFailure, &seen);
  ddprt_check(context, DDPRT_OK, "ddp.allreduce at step.mlir:3:8");
  EXPECT_EQ(seen.calls, 0);
  ddprt_status status =
      ddprt_scale(context, DDPRT_SCALE_WORLD_SIZE, nullptr, 1);
  ddprt_check(context, status, "ddp.scale at step.mlir:4:8");
  EXPECT_EQ(seen.calls, 1);
  EXPECT_EQ(seen.status, DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(seen.where, "ddp.scale at step.mlir:4:8");
  EXPECT_NE(seen.message.find("null"), std::string::npos) << seen.message;
  ddprt_set_error_handler(nullptr, nullptr);
  // Finalizing the current context clears it: no dangling pointer.
  EXPECT_EQ(ddprt_finalize(context), DDPRT_OK);
  context = nullptr;
  EXPECT_EQ(ddprt_current_context(), nullptr);
}

// ddprt_fail: a failed check of compiled code's own (a cf.assert) reaches
// the handler as a failed call does, with its message as the last error;
// without a handler it is printed.
TEST_F(CApi, FailReportsCompiledCodesOwnChecks) {
  HandledFailure seen;
  ddprt_set_error_handler(recordFailure, &seen);
  ddprt_fail(context, "cf.assert at step.mlir:7:3",
             "the hook @h returns a tensor of another size");
  ddprt_set_error_handler(nullptr, nullptr);
  EXPECT_EQ(seen.calls, 1);
  EXPECT_EQ(seen.status, DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(seen.where, "cf.assert at step.mlir:7:3");
  EXPECT_EQ(seen.message, "the hook @h returns a tensor of another size");
  testing::internal::CaptureStderr();
  ddprt_fail(context, "cf.assert at step.mlir:8:3", "sizes differ");
  std::string printed = testing::internal::GetCapturedStderr();
  EXPECT_NE(printed.find("cf.assert at step.mlir:8:3"), std::string::npos)
      << printed;
  EXPECT_NE(printed.find("sizes differ"), std::string::npos) << printed;
}

TEST_F(CApi, SharedAllocationsAreAlignedAndUsableByCalls) {
  void *pointer = nullptr;
  ASSERT_EQ(ddprt_alloc(context, 1000, &pointer), DDPRT_OK)
      << ddprt_last_error(context);
  ASSERT_NE(pointer, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pointer) % 64, 0u);
  auto *values = static_cast<float *>(pointer);
  std::fill(values, values + 250, 2.0f);
  ddprt_buffer buffer = {pointer, DDPRT_F32, 250};
  ASSERT_EQ(ddprt_scale(context, DDPRT_SCALE_WORLD_SIZE, &buffer, 1), DDPRT_OK);
  EXPECT_EQ(values[249], 2.0f); // world size 1
  ddprt_free(context, pointer);
  void *empty = nullptr;
  EXPECT_EQ(ddprt_alloc(context, 0, &empty), DDPRT_OK);
  ddprt_free(context, empty);
  ddprt_free(context, nullptr);
  EXPECT_FAILS(ddprt_alloc(context, 8, nullptr), DDPRT_ERROR_INVALID_ARGUMENT,
               "null");
}
