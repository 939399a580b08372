//===- CudaTest.cpp - the CUDA backend against the CPU kernels ------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Every op through the C ABI on the CUDA backend, on fresh random data,
// against the CPU kernels on the same inputs (which KernelTest checks
// against a float64 reference), through both projectors (the fused kernels
// and cuBLAS, forced with DDPRT_CUDA_PROJECTION). Built wherever the CUDA
// backend is; without a GPU every test is skipped and says why, and with
// one, a backend that fails to start fails every test.
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"
#include "cpu/Kernels.h"
#include "ddprt/ddprt.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace ddprt;
using namespace ddprt::test;

namespace {

/// A device copy of a TypedArray.
class DeviceArray {
public:
  explicit DeviceArray(const TypedArray &host)
      : dtype_(host.dtype()), numel_(host.size()), bytes_(host.byteSize()) {
    EXPECT_EQ(cudaMalloc(&data_, bytes_ + 1), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data_, host.data(), bytes_, cudaMemcpyHostToDevice),
              cudaSuccess);
    // A pageable copy returns before its DMA lands, on the legacy stream,
    // which the runtime's non-blocking streams do not wait for.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;

  TypedArray toHost() const {
    TypedArray host(dtype_, numel_);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, bytes_, cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }
  ddprt_buffer buffer() { return {data_, dtype_, numel_}; }
  ddprt_matrix matrix(int64_t rows, int64_t cols) {
    return {data_, dtype_, rows, cols};
  }
  /// The matrix `offset` elements in (unaligned for vector accesses).
  ddprt_matrix matrixAt(int64_t offset, int64_t rows, int64_t cols) {
    return {static_cast<char *>(data_) + offset * ddprt_dtype_size(dtype_),
            dtype_, rows, cols};
  }

private:
  ddprt_dtype dtype_;
  int64_t numel_;
  size_t bytes_;
  void *data_ = nullptr;
};

/// Relative error bound of one kernel result in `dtype`, for sums of `terms`
/// products.
double tolerance(ddprt_dtype dtype, int64_t terms) {
  double unit = dtype == DDPRT_F64   ? 1e-15
                : dtype == DDPRT_F32 ? 1e-7
                : dtype == DDPRT_F16 ? 1e-3
                                     : 8e-3;
  return 8 * unit * std::sqrt(double(std::max<int64_t>(terms, 1))) + 4 * unit;
}

void expectClose(const TypedArray &actual, const TypedArray &expected,
                 double relative, const std::string &what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double scale = 0;
  for (int64_t i = 0; i < expected.size(); ++i)
    scale = std::max(scale, std::fabs(expected.get(i)));
  for (int64_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(expected.get(i)) && std::isnan(actual.get(i)))
      continue; // both untouched poison, or both NaN by the same rule
    ASSERT_NEAR(actual.get(i), expected.get(i), relative * (scale + 1e-30))
        << what << " element " << i;
  }
}

/// Whether the machine has a GPU the CUDA runtime sees.
bool machineHasGpu() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

class Cuda : public ::testing::Test {
protected:
  void SetUp() override { start(); }
  /// Starts a context (again); `projection` sets DDPRT_CUDA_PROJECTION.
  void start(const char *projection = "auto") {
    if (context_)
      ddprt_finalize(context_);
    context_ = nullptr;
    setenv("DDPRT_CUDA_PROJECTION", projection, 1);
    ddprt_options options;
    ddprt_default_options(&options);
    options.backend = DDPRT_BACKEND_CUDA;
    options.timeout_seconds = 60;
    ddprt_status status = ddprt_init(&options, &context_);
    unsetenv("DDPRT_CUDA_PROJECTION");
    if (status != DDPRT_OK) {
      std::string why = ddprt_last_error(context_);
      ddprt_finalize(context_);
      context_ = nullptr;
      // A GPU that is there but cannot be used (CUDA or NCCL failed to
      // start) is a failure, not a reason to skip.
      if (machineHasGpu())
        FAIL() << "the CUDA backend did not start on a machine with a GPU ("
               << ddprt_status_string(status) << ": " << why << ")";
      GTEST_SKIP() << "SKIPPED: no usable GPU for the CUDA backend ("
                   << ddprt_status_string(status) << ": " << why << ")";
    }
  }
  void TearDown() override {
    if (context_)
      ddprt_finalize(context_);
  }
  void sync() {
    ASSERT_EQ(ddprt_synchronize(context_), DDPRT_OK)
        << ddprt_last_error(context_);
  }

  ddprt_context *context_ = nullptr;
  std::mt19937 rng_{2026};
};

struct Shape {
  int64_t n, m, r;
};
/// Odd and even sizes, rows whose length is not a multiple of 4, and the
/// shapes of real layers (a GPT-2 MLP both ways, a ResNet-50 conv).
const Shape kShapes[] = {{1, 1, 1},      {37, 19, 2},     {256, 300, 4},
                         {1000, 72, 8},  {64, 4608, 3},   {300, 200, 11},
                         {50, 147, 2},   {4096, 1024, 2}, {1024, 4096, 2},
                         {512, 4608, 4}, {64, 40, 1},     {37, 20, 2}};

std::string describe(ddprt_dtype dtype, Shape s, bool residual,
                     int64_t offset) {
  return std::string(dtypeName(dtype)) + " " + std::to_string(s.n) + "x" +
         std::to_string(s.m) + " r" + std::to_string(s.r) +
         (residual ? " with residual" : "") +
         (offset ? " at offset " + std::to_string(offset) : "");
}

/// The matrix `offset` elements into a host array.
ddprt_matrix hostMatrix(TypedArray &array, int64_t offset, int64_t rows,
                        int64_t cols) {
  return {static_cast<char *>(array.data()) +
              offset * ddprt_dtype_size(array.dtype()),
          array.dtype(), rows, cols};
}

/// project, backproject and reconstruct (into G, with the residual update)
/// on the device against the CPU kernels, every array `offset` elements
/// into its allocation (1 makes every vector access unaligned); whole
/// arrays are compared, so writes outside the matrices are caught too.
void checkProjections(ddprt_context *context, std::mt19937 &rng,
                      ddprt_dtype dtype, Shape s, bool residual,
                      int64_t offset) {
  std::string what = describe(dtype, s, residual, offset);
  int64_t o = offset;
  // One element more at the end of each array: writes past a matrix show.
  TypedArray g(dtype, o + s.n * s.m + 1), e(dtype, o + s.n * s.m + 1),
      q(dtype, o + s.m * s.r + 1), p(dtype, o + s.n * s.r + 1),
      p2(dtype, o + s.n * s.r + 1);
  g.randomize(rng);
  e.randomize(rng, 0.1);
  q.randomize(rng);
  p.fill(std::nan("")); // every element of P must be written
  p2.randomize(rng);
  DeviceArray dg(g), de(e), dq(q), dp(p), dp2(p2);
  ddprt_matrix gm = dg.matrixAt(o, s.n, s.m), em = de.matrixAt(o, s.n, s.m);
  ddprt_matrix qm = dq.matrixAt(o, s.m, s.r), pm = dp.matrixAt(o, s.n, s.r);
  ASSERT_EQ(ddprt_project(context, &gm, residual ? &em : nullptr, &qm, &pm, 1),
            DDPRT_OK)
      << ddprt_last_error(context);
  ASSERT_EQ(ddprt_synchronize(context), DDPRT_OK) << ddprt_last_error(context);
  TypedArray expectedP = p;
  ddprt_matrix hostE = hostMatrix(e, o, s.n, s.m);
  cpu::project(hostMatrix(g, o, s.n, s.m), residual ? &hostE : nullptr,
               hostMatrix(q, o, s.m, s.r), hostMatrix(expectedP, o, s.n, s.r));
  expectClose(dp.toHost(), expectedP, tolerance(dtype, s.m), "project " + what);

  ddprt_matrix pIn = dp2.matrixAt(o, s.n, s.r);
  TypedArray qBefore = dq.toHost();
  ASSERT_EQ(
      ddprt_backproject(context, &gm, residual ? &em : nullptr, &pIn, &qm, 1),
      DDPRT_OK)
      << ddprt_last_error(context);
  ASSERT_EQ(ddprt_synchronize(context), DDPRT_OK) << ddprt_last_error(context);
  TypedArray expectedQ = qBefore;
  cpu::backproject(hostMatrix(g, o, s.n, s.m), residual ? &hostE : nullptr,
                   hostMatrix(p2, o, s.n, s.r),
                   hostMatrix(expectedQ, o, s.m, s.r));
  expectClose(dq.toHost(), expectedQ, tolerance(dtype, s.n),
              "backproject " + what);

  // Reconstruct from P2 and the new Q, into G itself (in place).
  TypedArray newQ = dq.toHost(), expectedOut = g, expectedE = e;
  ASSERT_EQ(ddprt_reconstruct(context, &pIn, &qm, residual ? &gm : nullptr,
                              residual ? &em : nullptr, &gm, 1),
            DDPRT_OK)
      << ddprt_last_error(context);
  ASSERT_EQ(ddprt_synchronize(context), DDPRT_OK) << ddprt_last_error(context);
  TypedArray gCopy = g;
  ddprt_matrix hostG = hostMatrix(gCopy, o, s.n, s.m),
               hostE2 = hostMatrix(expectedE, o, s.n, s.m);
  cpu::reconstruct(hostMatrix(p2, o, s.n, s.r), hostMatrix(newQ, o, s.m, s.r),
                   residual ? &hostG : nullptr, residual ? &hostE2 : nullptr,
                   hostMatrix(expectedOut, o, s.n, s.m));
  expectClose(dg.toHost(), expectedOut, tolerance(dtype, s.r),
              "reconstruct " + what);
  if (residual)
    expectClose(de.toHost(), expectedE, tolerance(dtype, s.r) * 4,
                "residual update " + what);
}

TEST_F(Cuda, ProjectBackprojectReconstructMatchTheCpuKernels) {
  for (ddprt_dtype dtype : kAllDtypes)
    for (Shape s : kShapes)
      for (bool residual : {false, true})
        for (int64_t offset : {0, 1}) {
          if (s.n * s.m > 1000000 && (dtype != DDPRT_F32 || offset))
            continue; // the big shapes once, in the common case
          checkProjections(context_, rng_, dtype, s, residual, offset);
          if (HasFatalFailure())
            return;
        }
}

/// Ranks above the fused kernels' 8 columns per pass, through each
/// projector: both must agree with the CPU kernels.
TEST_F(Cuda, BothProjectorsMatchTheCpuKernelsAtLargeRanks) {
  const Shape shapes[] = {{300, 200, 16},
                          {1024, 512, 32},
                          {64, 4608, 17},
                          {37, 19, 19},
                          {4096, 1024, 16}};
  for (const char *projection : {"fused", "gemm"}) {
    start(projection);
    if (HasFatalFailure() || IsSkipped())
      return;
    for (ddprt_dtype dtype : {DDPRT_F32, DDPRT_F64})
      for (Shape s : shapes)
        for (bool residual : {false, true}) {
          SCOPED_TRACE(projection);
          checkProjections(context_, rng_, dtype, s, residual, 0);
          if (HasFatalFailure())
            return;
        }
  }
}

TEST(CudaPolicy, AnUnknownProjectionIsRefused) {
  if (!machineHasGpu())
    GTEST_SKIP() << "SKIPPED: no GPU";
  setenv("DDPRT_CUDA_PROJECTION", "fast", 1);
  ddprt_options options;
  ddprt_default_options(&options);
  options.backend = DDPRT_BACKEND_CUDA;
  ddprt_context *context = nullptr;
  EXPECT_EQ(ddprt_init(&options, &context), DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ddprt_last_error(context)).find("fast"),
            std::string::npos);
  ddprt_finalize(context);
  unsetenv("DDPRT_CUDA_PROJECTION");
}

TEST(CudaJoin, AJobJoinedByAnNcclIdRunsOnTheCallersDeviceAndStream) {
  if (!machineHasGpu())
    GTEST_SKIP() << "SKIPPED: no GPU";
  // What a framework does (ddp_opt.torch on PyTorch's stream): rank 0 makes
  // the id, every rank joins with it, on a stream of the caller's.
  ddprt_options options;
  ddprt_default_options(&options);
  options.backend = DDPRT_BACKEND_CUDA;
  options.timeout_seconds = 60;
  ASSERT_EQ(ddprt_nccl_unique_id(options.nccl_unique_id), DDPRT_OK);
  options.join = DDPRT_JOIN_NCCL_UNIQUE_ID;
  options.join_rank = 0;
  options.join_world_size = 1;
  options.device = 0;
  // Non-blocking, as PyTorch's side streams are: nothing but the runtime's
  // use of it orders the runtime's work after the caller's.
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            cudaSuccess);
  options.stream = stream;
  ddprt_context *context = nullptr;
  ASSERT_EQ(ddprt_init(&options, &context), DDPRT_OK)
      << ddprt_last_error(context);
  EXPECT_EQ(ddprt_world_size(context), 1);
  EXPECT_EQ(ddprt_rank(context), 0);
  // The caller's work, late on its stream: a host function holds the
  // stream 200 ms, then the gradient is filled with 3.0. The runtime's cast
  // to f16 and allreduce, enqueued right away, must see 3.0: run anywhere
  // but behind the fill, the cast would read the zeros before it.
  const int64_t n = 1 << 20;
  float *device = nullptr;
  uint16_t *narrow = nullptr;
  ASSERT_EQ(cudaMalloc(&device, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&narrow, n * sizeof(uint16_t)), cudaSuccess);
  ASSERT_EQ(cudaMemset(device, 0, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(narrow, 0, n * sizeof(uint16_t)), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(
                stream,
                [](void *) {
                  std::this_thread::sleep_for(std::chrono::milliseconds(200));
                },
                nullptr),
            cudaSuccess);
  std::vector<float> host(size_t(n), 3.0f);
  ASSERT_EQ(cudaMemcpyAsync(device, host.data(), n * sizeof(float),
                            cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  ddprt_buffer wide{device, DDPRT_F32, n};
  ddprt_buffer half{narrow, DDPRT_F16, n};
  ASSERT_EQ(ddprt_cast(context, DDPRT_SCALE_NONE, &wide, &half, 1), DDPRT_OK)
      << ddprt_last_error(context);
  ASSERT_EQ(ddprt_allreduce(context, DDPRT_MEAN, DDPRT_ROLE_GRADIENT, &half, 1),
            DDPRT_OK)
      << ddprt_last_error(context);
  ASSERT_EQ(ddprt_synchronize(context), DDPRT_OK) << ddprt_last_error(context);
  std::vector<uint16_t> back(size_t(n), 0);
  ASSERT_EQ(cudaMemcpy(back.data(), narrow, n * sizeof(uint16_t),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(back.front(), 0x4200u) << "f16 bits of 3.0";
  EXPECT_EQ(back.back(), 0x4200u) << "f16 bits of 3.0";
  EXPECT_EQ(ddprt_finalize(context), DDPRT_OK);
  // The caller's stream outlives the runtime.
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaFree(device);
  cudaFree(narrow);
  cudaStreamDestroy(stream);
}

TEST_F(Cuda, OrthogonalizeMatchesTheCpuKernelAndKeepsZeroColumns) {
  const Shape shapes[] = {{1, 1, 1},     {37, 19, 2},    {256, 300, 4},
                          {1000, 72, 8}, {300, 200, 11}, {50257, 1, 2},
                          {4096, 1, 16}, {700, 1, 33}};
  for (ddprt_dtype dtype : kAllDtypes)
    for (Shape s : shapes)
      for (double epsilon : {0.0, 1e-8}) {
        TypedArray p(dtype, s.n * s.r);
        p.randomize(rng_);
        if (s.r > 1)
          for (int64_t i = 0; i < s.n; ++i)
            p.set(i * s.r + 1, 0.0); // a zero column stays zero
        TypedArray expected = p;
        cpu::orthogonalize(expected.matrix(s.n, s.r), epsilon);
        DeviceArray dp(p);
        ddprt_matrix m = dp.matrix(s.n, s.r);
        ASSERT_EQ(ddprt_orthogonalize(context_, &m, 1, epsilon), DDPRT_OK)
            << ddprt_last_error(context_);
        sync();
        TypedArray actual = dp.toHost();
        expectClose(actual, expected, tolerance(dtype, s.n) * 4,
                    std::string("orthogonalize ") + dtypeName(dtype) + " " +
                        std::to_string(s.n) + "x" + std::to_string(s.r));
        for (int64_t i = 0; s.r > 1 && i < s.n; ++i)
          EXPECT_EQ(actual.get(i * s.r + 1), 0.0);
      }
}

TEST_F(Cuda, OrthogonalizeTurnsANonFiniteColumnAndTheLaterOnesIntoNaN) {
  for (ddprt_dtype dtype : kAllDtypes) {
    const int64_t n = 300, r = 4;
    TypedArray p(dtype, n * r);
    p.randomize(rng_);
    p.set(5 * r + 2, std::numeric_limits<double>::infinity());
    DeviceArray dp(p);
    ddprt_matrix m = dp.matrix(n, r);
    ASSERT_EQ(ddprt_orthogonalize(context_, &m, 1, 0.0), DDPRT_OK);
    sync();
    TypedArray actual = dp.toHost();
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_TRUE(std::isfinite(actual.get(i * r + 0))) << dtypeName(dtype);
      EXPECT_TRUE(std::isfinite(actual.get(i * r + 1))) << dtypeName(dtype);
      EXPECT_TRUE(std::isnan(actual.get(i * r + 2))) << dtypeName(dtype);
      EXPECT_TRUE(std::isnan(actual.get(i * r + 3))) << dtypeName(dtype);
    }
  }
}

// The non-finite policy on device memory: ddprt_inspect reads the data
// where it is, and a reconstruct whose P holds an Inf leaves that tensor's E
// bitwise as it was while the other tensor's E is updated.
TEST_F(Cuda, InspectAndTheNonFiniteSkipWorkOnDeviceMemory) {
  for (ddprt_dtype dtype : kAllDtypes) {
    TypedArray zero(dtype, 300), poisoned(dtype, 300);
    zero.fill(0.0);
    poisoned.randomize(rng_);
    poisoned.set(299, std::nan(""));
    DeviceArray dzero(zero), dpoisoned(poisoned);
    ddprt_buffer buffers[2] = {dzero.buffer(), dpoisoned.buffer()};
    int32_t finite[2] = {-1, -1}, nonzero[2] = {-1, -1};
    ASSERT_EQ(ddprt_inspect(context_, buffers, 2, finite, nonzero), DDPRT_OK)
        << ddprt_last_error(context_);
    EXPECT_EQ(finite[0], 1) << dtypeName(dtype);
    EXPECT_EQ(nonzero[0], 0) << dtypeName(dtype);
    EXPECT_EQ(finite[1], 0) << dtypeName(dtype);
    EXPECT_EQ(nonzero[1], 1) << dtypeName(dtype);

    const int64_t n = 40, m = 24, r = 2;
    TypedArray g(dtype, n * m), e(dtype, n * m), p(dtype, n * r),
        q(dtype, m * r), out(dtype, n * m);
    g.randomize(rng_);
    e.randomize(rng_);
    p.randomize(rng_);
    q.randomize(rng_);
    TypedArray bad = p;
    bad.set(7, std::numeric_limits<double>::infinity());
    DeviceArray dg0(g), de0(e), dp0(p), dq0(q), dout0(out);
    DeviceArray dg1(g), de1(e), dp1(bad), dq1(q), dout1(out);
    ddprt_matrix ps[2] = {dp0.matrix(n, r), dp1.matrix(n, r)};
    ddprt_matrix qs[2] = {dq0.matrix(m, r), dq1.matrix(m, r)};
    ddprt_matrix gs[2] = {dg0.matrix(n, m), dg1.matrix(n, m)};
    ddprt_matrix es[2] = {de0.matrix(n, m), de1.matrix(n, m)};
    ddprt_matrix outs[2] = {dout0.matrix(n, m), dout1.matrix(n, m)};
    EXPECT_EQ(ddprt_reconstruct(context_, ps, qs, gs, es, outs, 2),
              DDPRT_NONFINITE)
        << dtypeName(dtype);
    sync();
    TypedArray expectedE = e, expectedOut = out;
    ddprt_matrix P = p.matrix(n, r), Q = q.matrix(m, r), G = g.matrix(n, m),
                 E = expectedE.matrix(n, m), O = expectedOut.matrix(n, m);
    ddprt::cpu::reconstruct(P, Q, &G, &E, O);
    expectClose(de0.toHost(), expectedE, tolerance(dtype, r),
                std::string("clean E ") + dtypeName(dtype));
    EXPECT_TRUE(de1.toHost().bitwiseEqual(e))
        << "the poisoned tensor's E changed, " << dtypeName(dtype);
  }
}

// A stream query that answers "not ready" leaves that answer as the
// thread's last CUDA error. The runtime's synchronize polls that way, and
// a launch must not take the leftover for its own failure.
TEST_F(Cuda, ALaunchAfterANotReadyQuerySucceeds) {
  const int64_t numel = int64_t(1) << 26;
  TypedArray big(DDPRT_F32, numel), narrow(DDPRT_F16, numel);
  big.randomize(rng_);
  DeviceArray din(big), dout(narrow);
  ddprt_buffer a = din.buffer(), b = dout.buffer();
  // Keep the device busy, then synchronize while it is.
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(ddprt_cast(context_, DDPRT_SCALE_NONE, &a, &b, 1), DDPRT_OK);
  sync();
  // The same leftover from a query of the test's own: a long copy.
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            cudaSuccess);
  void *copy = nullptr;
  ASSERT_EQ(cudaMalloc(&copy, big.byteSize()), cudaSuccess);
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(cudaMemcpyAsync(copy, a.data, big.byteSize(),
                              cudaMemcpyDeviceToDevice, stream),
              cudaSuccess);
  cudaError_t query = cudaStreamQuery(stream);
  EXPECT_TRUE(query == cudaErrorNotReady || query == cudaSuccess);
  ASSERT_EQ(ddprt_cast(context_, DDPRT_SCALE_NONE, &a, &b, 1), DDPRT_OK)
      << ddprt_last_error(context_);
  sync();
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaFree(copy);
  cudaStreamDestroy(stream);
  TypedArray expected(DDPRT_F16, numel);
  cpu::cast(1.0, ddprt_buffer{big.data(), DDPRT_F32, numel},
            ddprt_buffer{expected.data(), DDPRT_F16, numel});
  EXPECT_TRUE(dout.toHost().bitwiseEqual(expected));
}

// The C API's factors are powers of the world size, 1 on one rank: this
// checks the conversions; the factor's arithmetic is the CPU kernels' (the
// MPI tests) and shared with them (convertTo, roundToOddFloat).
TEST_F(Cuda, CastAndScaleMatchTheCpuKernelBitwise) {
  for (ddprt_dtype from : kAllDtypes)
    for (ddprt_dtype to : kAllDtypes)
      for (int64_t numel : {1, 7, 8, 2049, 4096, 4097, 100003})
        for (int64_t offset : {0, 1}) {
          TypedArray in(from, numel + offset), out(to, numel + offset);
          in.randomize(rng_, 100.0);
          out.fill(std::nan(""));
          DeviceArray din(in), dout(out);
          ddprt_buffer a{din.matrixAt(offset, 1, numel).data, from, numel};
          ddprt_buffer b{dout.matrixAt(offset, 1, numel).data, to, numel};
          ASSERT_EQ(ddprt_cast(context_, DDPRT_SCALE_NONE, &a, &b, 1),
                    DDPRT_OK);
          ASSERT_EQ(
              ddprt_scale(context_, DDPRT_SCALE_INVERSE_WORLD_SIZE, &b, 1),
              DDPRT_OK);
          sync();
          TypedArray expected = out;
          cpu::cast(
              1.0,
              ddprt_buffer{hostMatrix(in, offset, 1, numel).data, from, numel},
              ddprt_buffer{hostMatrix(expected, offset, 1, numel).data, to,
                           numel});
          EXPECT_TRUE(dout.toHost().bitwiseEqual(expected))
              << dtypeName(from) << " -> " << dtypeName(to) << " n=" << numel
              << " offset " << offset;
        }
}

/// One call over many tensors of mixed shapes and ranks (more than one
/// launch's worth of descriptors, rows split over different numbers of
/// threads, factor columns in chunks of 8, the orthogonalization's working
/// copies side by side), each step checked against the CPU kernels on the
/// GPU's inputs to that step, so that roundings do not compound.
void checkManyMixedTensors(ddprt_context *context, std::mt19937 &rng,
                           int64_t maxRank, const std::string &what) {
  struct Tensor {
    Shape s;
    TypedArray g, e, q, p;
    std::unique_ptr<DeviceArray> dg, de, dq, dp;
  };
  std::vector<Tensor> tensors;
  for (int t = 0; t < 130; ++t) {
    Shape s{1 + (t * 37) % 300, 1 + (t * 53) % 700, 1 + t % maxRank};
    s.r = std::min({s.r, s.n, s.m});
    Tensor x;
    x.s = s;
    // One poisoned or random element past each matrix: writes past the
    // end show in the whole-array comparisons.
    x.g = TypedArray(DDPRT_F32, s.n * s.m + 1);
    x.e = TypedArray(DDPRT_F32, s.n * s.m + 1);
    x.q = TypedArray(DDPRT_F32, s.m * s.r + 1);
    x.p = TypedArray(DDPRT_F32, s.n * s.r + 1);
    x.g.randomize(rng);
    x.e.randomize(rng, 0.1);
    x.q.randomize(rng);
    x.p.fill(std::nan(""));
    x.dg = std::make_unique<DeviceArray>(x.g);
    x.de = std::make_unique<DeviceArray>(x.e);
    x.dq = std::make_unique<DeviceArray>(x.q);
    x.dp = std::make_unique<DeviceArray>(x.p);
    tensors.push_back(std::move(x));
  }
  std::vector<ddprt_matrix> gs, es, qs, ps;
  for (Tensor &x : tensors) {
    gs.push_back(x.dg->matrix(x.s.n, x.s.m));
    es.push_back(x.de->matrix(x.s.n, x.s.m));
    qs.push_back(x.dq->matrix(x.s.m, x.s.r));
    ps.push_back(x.dp->matrix(x.s.n, x.s.r));
  }
  int n = int(tensors.size());
  auto name = [&](int t) {
    return what + " " + describe(DDPRT_F32, tensors[t].s, true, 0) +
           " (tensor " + std::to_string(t) + ")";
  };
  // Q = orthogonalize(Q).
  std::vector<TypedArray> before;
  for (Tensor &x : tensors)
    before.push_back(x.dq->toHost());
  ASSERT_EQ(ddprt_orthogonalize(context, qs.data(), n, 0.0), DDPRT_OK);
  ASSERT_EQ(ddprt_synchronize(context), DDPRT_OK) << ddprt_last_error(context);
  for (int t = 0; t < n; ++t) {
    Shape s = tensors[t].s;
    cpu::orthogonalize(before[t].matrix(s.m, s.r), 0.0);
    expectClose(tensors[t].dq->toHost(), before[t],
                tolerance(DDPRT_F32, s.m) * 4,
                "orthogonalized Q of " + name(t));
  }
  // P = (G + E) Q, compared before it is orthogonalized.
  ASSERT_EQ(
      ddprt_project(context, gs.data(), es.data(), qs.data(), ps.data(), n),
      DDPRT_OK);
  ASSERT_EQ(ddprt_synchronize(context), DDPRT_OK) << ddprt_last_error(context);
  for (int t = 0; t < n; ++t) {
    Tensor &x = tensors[t];
    Shape s = x.s;
    TypedArray q = x.dq->toHost(), expected = x.p;
    ddprt_matrix hostE = x.e.matrix(s.n, s.m);
    cpu::project(x.g.matrix(s.n, s.m), &hostE, q.matrix(s.m, s.r),
                 expected.matrix(s.n, s.r));
    expectClose(x.dp->toHost(), expected, tolerance(DDPRT_F32, s.m),
                "P of " + name(t));
  }
  // P = orthogonalize(P).
  before.clear();
  for (Tensor &x : tensors)
    before.push_back(x.dp->toHost());
  ASSERT_EQ(ddprt_orthogonalize(context, ps.data(), n, 0.0), DDPRT_OK);
  ASSERT_EQ(ddprt_synchronize(context), DDPRT_OK) << ddprt_last_error(context);
  for (int t = 0; t < n; ++t) {
    Shape s = tensors[t].s;
    cpu::orthogonalize(before[t].matrix(s.n, s.r), 0.0);
    // Orthogonalization amplifies rounding where P is ill-conditioned.
    expectClose(tensors[t].dp->toHost(), before[t],
                tolerance(DDPRT_F32, s.n) * 64,
                "orthogonalized P of " + name(t));
  }
  // Q = (G + E)^T P.
  ASSERT_EQ(
      ddprt_backproject(context, gs.data(), es.data(), ps.data(), qs.data(), n),
      DDPRT_OK);
  ASSERT_EQ(ddprt_synchronize(context), DDPRT_OK) << ddprt_last_error(context);
  for (int t = 0; t < n; ++t) {
    Tensor &x = tensors[t];
    Shape s = x.s;
    TypedArray p = x.dp->toHost(), expected = x.q;
    ddprt_matrix hostE = x.e.matrix(s.n, s.m);
    cpu::backproject(x.g.matrix(s.n, s.m), &hostE, p.matrix(s.n, s.r),
                     expected.matrix(s.m, s.r));
    expectClose(x.dq->toHost(), expected, tolerance(DDPRT_F32, s.n),
                "Q of " + name(t));
  }
  // G = P Q^T, E = G + E - P Q^T (into G itself).
  ASSERT_EQ(ddprt_reconstruct(context, ps.data(), qs.data(), gs.data(),
                              es.data(), gs.data(), n),
            DDPRT_OK);
  ASSERT_EQ(ddprt_synchronize(context), DDPRT_OK) << ddprt_last_error(context);
  for (int t = 0; t < n; ++t) {
    Tensor &x = tensors[t];
    Shape s = x.s;
    TypedArray p = x.dp->toHost(), q = x.dq->toHost(), out = x.g, e = x.e;
    ddprt_matrix hostG = x.g.matrix(s.n, s.m), hostE = e.matrix(s.n, s.m);
    cpu::reconstruct(p.matrix(s.n, s.r), q.matrix(s.m, s.r), &hostG, &hostE,
                     out.matrix(s.n, s.m));
    expectClose(x.dg->toHost(), out, tolerance(DDPRT_F32, s.r) * 4,
                "reconstruction of " + name(t));
    expectClose(x.de->toHost(), e, tolerance(DDPRT_F32, s.r) * 8,
                "residual of " + name(t));
  }
}

TEST_F(Cuda, OneCallOverManyMixedTensorsMatchesTheCpuKernels) {
  // Ranks up to 8 (one column chunk; reconstruct's unrolled kernels), then
  // up to 11 through the fused kernels (a second column chunk) and through
  // the default choice (cuBLAS above 8).
  checkManyMixedTensors(context_, rng_, 8, "auto, r <= 8:");
  if (HasFatalFailure())
    return;
  start("fused");
  if (HasFatalFailure() || IsSkipped())
    return;
  checkManyMixedTensors(context_, rng_, 11, "fused, r <= 11:");
  if (HasFatalFailure())
    return;
  start("auto");
  if (HasFatalFailure() || IsSkipped())
    return;
  checkManyMixedTensors(context_, rng_, 11, "auto, r <= 11:");
}

/// Matrices with no rows or no columns: P of an n x 0 gradient is zero,
/// and nothing is written for the others.
TEST_F(Cuda, EmptyMatricesProjectToZero) {
  const Shape shapes[] = {{5, 0, 2}, {0, 7, 2}};
  for (Shape s : shapes) {
    TypedArray g(DDPRT_F32, s.n * s.m + 1), q(DDPRT_F32, s.m * s.r + 1),
        p(DDPRT_F32, s.n * s.r + 1);
    q.randomize(rng_);
    p.fill(std::nan(""));
    DeviceArray dg(g), dq(q), dp(p);
    ddprt_matrix gm = dg.matrix(s.n, s.m), qm = dq.matrix(s.m, s.r),
                 pm = dp.matrix(s.n, s.r);
    ASSERT_EQ(ddprt_project(context_, &gm, nullptr, &qm, &pm, 1), DDPRT_OK)
        << ddprt_last_error(context_);
    ASSERT_EQ(ddprt_backproject(context_, &gm, nullptr, &pm, &qm, 1), DDPRT_OK)
        << ddprt_last_error(context_);
    sync();
    TypedArray expectedP = p, expectedQ = q;
    cpu::project(g.matrix(s.n, s.m), nullptr, q.matrix(s.m, s.r),
                 expectedP.matrix(s.n, s.r));
    cpu::backproject(g.matrix(s.n, s.m), nullptr, expectedP.matrix(s.n, s.r),
                     expectedQ.matrix(s.m, s.r));
    std::string what = describe(DDPRT_F32, s, false, 0);
    expectClose(dp.toHost(), expectedP, 0.0, "P of " + what);
    expectClose(dq.toHost(), expectedQ, 0.0, "Q of " + what);
  }
}

TEST_F(Cuda, ManyTensorsInOneCallCostAFewLaunchesAndAreAllWritten) {
  // 250 tensors: more than one launch's worth of descriptors.
  std::vector<TypedArray> inputs, outputs;
  std::vector<std::unique_ptr<DeviceArray>> din, dout;
  std::vector<ddprt_buffer> a, b;
  for (int t = 0; t < 250; ++t) {
    inputs.emplace_back(DDPRT_F32, 1 + t * 37);
    inputs.back().randomize(rng_);
    outputs.emplace_back(DDPRT_F16, 1 + t * 37);
    outputs.back().fill(std::nan(""));
  }
  for (int t = 0; t < 250; ++t) {
    din.push_back(std::make_unique<DeviceArray>(inputs[t]));
    dout.push_back(std::make_unique<DeviceArray>(outputs[t]));
    a.push_back(din.back()->buffer());
    b.push_back(dout.back()->buffer());
  }
  ASSERT_EQ(ddprt_cast(context_, DDPRT_SCALE_NONE, a.data(), b.data(), 250),
            DDPRT_OK);
  sync();
  for (int t = 0; t < 250; ++t) {
    TypedArray expected(DDPRT_F16, inputs[t].size());
    cpu::cast(1.0, ddprt_buffer{inputs[t].data(), DDPRT_F32, inputs[t].size()},
              ddprt_buffer{expected.data(), DDPRT_F16, inputs[t].size()});
    EXPECT_TRUE(dout[t]->toHost().bitwiseEqual(expected)) << "tensor " << t;
  }
}

TEST_F(Cuda, RandomNormalIsDeterministicAndStandard) {
  TypedArray host(DDPRT_F32, 100000);
  DeviceArray first(host), second(host);
  ddprt_buffer a = first.buffer(), b = second.buffer();
  ASSERT_EQ(ddprt_random_normal(context_, &a, 7, 3, 11), DDPRT_OK);
  ASSERT_EQ(ddprt_random_normal(context_, &b, 7, 3, 11), DDPRT_OK);
  sync();
  TypedArray x = first.toHost();
  EXPECT_TRUE(x.bitwiseEqual(second.toHost()));
  double sum = 0, squares = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    sum += x.get(i);
    squares += x.get(i) * x.get(i);
  }
  double mean = sum / x.size();
  EXPECT_LT(std::fabs(mean), 0.02);
  EXPECT_LT(std::fabs(squares / x.size() - mean * mean - 1.0), 0.03);
}

TEST_F(Cuda, TopKMatchesTheCpuKernel) {
  std::mt19937 rng(5);
  for (ddprt_dtype dtype : {DDPRT_F32, DDPRT_F64, DDPRT_F16, DDPRT_BF16})
    for (int64_t n : {1, 7, 4099, 300000})
      for (ddprt_dtype indexType : {DDPRT_I32, DDPRT_I64}) {
        TypedArray host(dtype, n);
        host.randomize(rng);
        if (n > 3) {
          host.set(2, std::nan(""));
          host.set(3, -HUGE_VAL);
        }
        int64_t k = std::max<int64_t>(1, n / 100);
        TypedArray values(dtype, k), indices(indexType, k);
        TypedArray wantValues(dtype, k), wantIndices(indexType, k);
        cpu::topK(host.buffer(), wantValues.buffer(), wantIndices.buffer());
        DeviceArray in(host), outValues(values), outIndices(indices);
        ddprt_buffer a = in.buffer(), b = outValues.buffer(),
                     c = outIndices.buffer();
        ASSERT_EQ(ddprt_top_k(context_, &a, &b, &c), DDPRT_OK)
            << ddprt_last_error(context_);
        sync();
        EXPECT_TRUE(outValues.toHost().bitwiseEqual(wantValues))
            << dtypeName(dtype) << " n " << n;
        EXPECT_TRUE(outIndices.toHost().bitwiseEqual(wantIndices))
            << dtypeName(dtype) << " n " << n;
      }
}

TEST_F(Cuda, AllreduceOnOneRankAndCheckpointOfDeviceState) {
  TypedArray x(DDPRT_F32, 4099);
  x.randomize(rng_);
  DeviceArray dx(x);
  ddprt_buffer buffer = dx.buffer();
  ASSERT_EQ(
      ddprt_allreduce(context_, DDPRT_MEAN, DDPRT_ROLE_GRADIENT, &buffer, 1),
      DDPRT_OK)
      << ddprt_last_error(context_);
  sync();
  EXPECT_TRUE(dx.toHost().bitwiseEqual(x)); // world size 1: the mean is x

  ddprt_state *state = nullptr;
  ASSERT_EQ(ddprt_state_get(context_, "q", DDPRT_F32, 4099, &state), DDPRT_OK);
  ddprt_buffer q = ddprt_state_buffer(state);
  ASSERT_EQ(ddprt_cast(context_, DDPRT_SCALE_NONE, &buffer, &q, 1), DDPRT_OK);
  std::string path = ::testing::TempDir() + "ddprt-cuda-checkpoint";
  ASSERT_EQ(ddprt_checkpoint_save(context_, path.c_str()), DDPRT_OK)
      << ddprt_last_error(context_);
  ASSERT_EQ(ddprt_random_normal(context_, &q, 1, 1, 1), DDPRT_OK);
  ASSERT_EQ(ddprt_checkpoint_load(context_, path.c_str()), DDPRT_OK)
      << ddprt_last_error(context_);
  TypedArray restored(DDPRT_F32, 4099);
  ASSERT_EQ(cudaMemcpy(restored.data(), q.data, restored.byteSize(),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_TRUE(restored.bitwiseEqual(x));
  std::remove(path.c_str());
}

// On one rank an allgather copies each input into its output, every dtype
// of the list in one call (NCCL's integer types included), in stream order:
// after the cast that writes its f32 input, before the cast that reads its
// f32 output.
TEST_F(Cuda, AllgatherOnOneRankCopiesEveryDtypeInStreamOrder) {
  std::vector<TypedArray> host;
  for (ddprt_dtype dtype : kEveryDtype) {
    TypedArray array(dtype, 1001);
    array.randomize(rng_, 10.0); // in i8 range
    host.push_back(array);
  }
  TypedArray source(DDPRT_F32, 4099), zeros(DDPRT_F32, 4099);
  source.randomize(rng_);
  zeros.fill(0.0);
  std::vector<std::unique_ptr<DeviceArray>> inputs, outputs;
  std::vector<ddprt_buffer> inputBuffers, outputBuffers;
  for (const TypedArray &array : host) {
    TypedArray poison(array.dtype(), array.size());
    poison.fill(-96.0);
    inputs.push_back(std::make_unique<DeviceArray>(array));
    outputs.push_back(std::make_unique<DeviceArray>(poison));
  }
  DeviceArray dSource(source), dStaged(zeros), dGathered(zeros), dBack(zeros);
  for (size_t i = 0; i < host.size(); ++i) {
    inputBuffers.push_back(inputs[i]->buffer());
    outputBuffers.push_back(outputs[i]->buffer());
  }
  inputBuffers.push_back(dStaged.buffer());
  outputBuffers.push_back(dGathered.buffer());
  ddprt_buffer from = dSource.buffer(), staged = dStaged.buffer(),
               gathered = dGathered.buffer(), back = dBack.buffer();
  ASSERT_EQ(ddprt_cast(context_, DDPRT_SCALE_NONE, &from, &staged, 1),
            DDPRT_OK);
  ASSERT_EQ(ddprt_allgather(context_, DDPRT_ROLE_COMPRESSED,
                            inputBuffers.data(), outputBuffers.data(),
                            int(inputBuffers.size())),
            DDPRT_OK)
      << ddprt_last_error(context_);
  ASSERT_EQ(ddprt_cast(context_, DDPRT_SCALE_NONE, &gathered, &back, 1),
            DDPRT_OK);
  sync();
  for (size_t i = 0; i < host.size(); ++i)
    EXPECT_TRUE(outputs[i]->toHost().bitwiseEqual(host[i]))
        << dtypeName(host[i].dtype());
  EXPECT_TRUE(dBack.toHost().bitwiseEqual(source));
}

//===----------------------------------------------------------------------===//
// Kernels of compiled steps (ddprt_launch_kernel)
//===----------------------------------------------------------------------===//

// What ddp-lower-to-llvm{target=cuda} embeds, written by hand: data[i] =
// 2 * data[i] + k for i < n.
const char kTwicePlusPtx[] = ".version 7.8\n"
                             ".target sm_90\n"
                             ".address_size 64\n"
                             "\n"
                             ".visible .entry twice_plus(\n"
                             "\t.param .u64 p_data,\n"
                             "\t.param .u64 p_n,\n"
                             "\t.param .f32 p_k\n"
                             ")\n"
                             "{\n"
                             "\t.reg .pred \t%p<2>;\n"
                             "\t.reg .b32 \t%r<5>;\n"
                             "\t.reg .f32 \t%f<4>;\n"
                             "\t.reg .b64 \t%rd<7>;\n"
                             "\tld.param.u64 \t%rd1, [p_data];\n"
                             "\tld.param.u64 \t%rd2, [p_n];\n"
                             "\tld.param.f32 \t%f1, [p_k];\n"
                             "\tmov.u32 \t%r1, %ctaid.x;\n"
                             "\tmov.u32 \t%r2, %ntid.x;\n"
                             "\tmov.u32 \t%r3, %tid.x;\n"
                             "\tmad.lo.s32 \t%r4, %r1, %r2, %r3;\n"
                             "\tcvt.u64.u32 \t%rd3, %r4;\n"
                             "\tsetp.ge.u64 \t%p1, %rd3, %rd2;\n"
                             "\t@%p1 bra \t$DONE;\n"
                             "\tcvta.to.global.u64 \t%rd4, %rd1;\n"
                             "\tshl.b64 \t%rd5, %rd3, 2;\n"
                             "\tadd.s64 \t%rd6, %rd4, %rd5;\n"
                             "\tld.global.f32 \t%f2, [%rd6];\n"
                             "\tfma.rn.f32 \t%f3, %f2, 0f40000000, %f1;\n"
                             "\tst.global.f32 \t[%rd6], %f3;\n"
                             "$DONE:\n"
                             "\tret;\n"
                             "}\n";

TEST_F(Cuda, CompiledKernelsRunInStreamOrderAndLoadOnce) {
  constexpr int64_t n = 1000;
  void *pointer = nullptr;
  ASSERT_EQ(ddprt_alloc(context_, n * sizeof(float), &pointer), DDPRT_OK)
      << ddprt_last_error(context_);
  auto *values = static_cast<float *>(pointer);
  for (int64_t i = 0; i < n; ++i)
    values[i] = float(i);
  int64_t count = n;
  float k = 1.0f;
  void *params[] = {&pointer, &count, &k};
  // Twice (the image loaded once, the second launch after the first on the
  // compute stream), then one of the runtime's own kernels after them.
  for (int launch = 0; launch < 2; ++launch)
    ASSERT_EQ(ddprt_launch_kernel(context_, kTwicePlusPtx, "twice_plus", 4, 1,
                                  1, 256, 1, 1, 0, params),
              DDPRT_OK)
        << ddprt_last_error(context_);
  ddprt_buffer buffer = {pointer, DDPRT_F32, n};
  ASSERT_EQ(ddprt_scale(context_, DDPRT_SCALE_WORLD_SIZE, &buffer, 1),
            DDPRT_OK);
  // An empty grid launches nothing.
  ASSERT_EQ(ddprt_launch_kernel(context_, kTwicePlusPtx, "twice_plus", 0, 1, 1,
                                256, 1, 1, 0, params),
            DDPRT_OK);
  ASSERT_EQ(ddprt_host_barrier(context_), DDPRT_OK)
      << ddprt_last_error(context_);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(values[i], 4.0f * float(i) + 3.0f) << "element " << i;
  ddprt_free(context_, pointer);
}

TEST_F(Cuda, DeviceMemoryIsStreamOrdered) {
  // Allocated, written by a kernel, copied out, freed: all enqueued, the
  // host waits once; then again, from what the pool kept.
  for (int round = 0; round < 2; ++round) {
    constexpr int64_t n = 300;
    void *device = nullptr;
    ASSERT_EQ(ddprt_device_alloc(context_, n * sizeof(float), &device),
              DDPRT_OK)
        << ddprt_last_error(context_);
    std::vector<float> zeros(n, 0.0f), back(n, -1.0f);
    ddprt_buffer host = {zeros.data(), DDPRT_F32, n};
    ddprt_buffer buffer = {device, DDPRT_F32, n};
    ASSERT_EQ(ddprt_copy(context_, &host, &buffer, 1), DDPRT_OK);
    int64_t count = n;
    float k = float(round + 1);
    void *params[] = {&device, &count, &k};
    ASSERT_EQ(ddprt_launch_kernel(context_, kTwicePlusPtx, "twice_plus", 2, 1,
                                  1, 256, 1, 1, 0, params),
              DDPRT_OK)
        << ddprt_last_error(context_);
    ddprt_buffer out = {back.data(), DDPRT_F32, n};
    ASSERT_EQ(ddprt_copy(context_, &buffer, &out, 1), DDPRT_OK);
    ASSERT_EQ(ddprt_device_free(context_, device), DDPRT_OK)
        << ddprt_last_error(context_);
    sync();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(back[i], k) << "element " << i;
  }
}

TEST_F(Cuda, ABadKernelImageOrNameSaysWhy) {
  void *params[] = {nullptr};
  EXPECT_EQ(ddprt_launch_kernel(context_, "not PTX", "twice_plus", 1, 1, 1, 1,
                                1, 1, 0, params),
            DDPRT_ERROR_BACKEND);
  EXPECT_NE(std::string(ddprt_last_error(context_)).find("cudaLibraryLoadData"),
            std::string::npos)
      << ddprt_last_error(context_);
  EXPECT_EQ(ddprt_launch_kernel(context_, kTwicePlusPtx, "no_such_kernel", 1, 1,
                                1, 1, 1, 1, 0, params),
            DDPRT_ERROR_BACKEND);
  EXPECT_NE(std::string(ddprt_last_error(context_)).find("no_such_kernel"),
            std::string::npos)
      << ddprt_last_error(context_);
}

} // namespace

// What ddp-run does on a GPU: host code and runtime calls share managed
// memory, and a copy moves a host tensor into device state and back.
TEST_F(Cuda, ManagedMemoryIsSharedWithTheHostAndCopiesReachState) {
  void *pointer = nullptr;
  ASSERT_EQ(ddprt_alloc(context_, 1024 * sizeof(float), &pointer), DDPRT_OK)
      << ddprt_last_error(context_);
  auto *values = static_cast<float *>(pointer);
  for (int i = 0; i < 1024; ++i)
    values[i] = float(i);
  ddprt_buffer buffer = {pointer, DDPRT_F32, 1024};
  ASSERT_EQ(ddprt_scale(context_, DDPRT_SCALE_WORLD_SIZE, &buffer, 1),
            DDPRT_OK);
  sync();
  EXPECT_EQ(values[1023], 1023.0f);

  ddprt_state *state = nullptr;
  ASSERT_EQ(ddprt_state_get(context_, "copied", DDPRT_F32, 1024, &state),
            DDPRT_OK);
  ddprt_buffer target = ddprt_state_buffer(state);
  ASSERT_EQ(ddprt_copy(context_, &buffer, &target, 1), DDPRT_OK)
      << ddprt_last_error(context_);
  std::vector<float> back(1024, -1.0f);
  ddprt_buffer host = {back.data(), DDPRT_F32, 1024};
  ASSERT_EQ(ddprt_copy(context_, &target, &host, 1), DDPRT_OK);
  sync();
  EXPECT_EQ(back[7], 7.0f);
  EXPECT_EQ(back[1023], 1023.0f);
  ddprt_free(context_, pointer);
}
