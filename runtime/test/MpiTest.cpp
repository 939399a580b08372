//===- MpiTest.cpp - the C ABI across 4 ranks -----------------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Run under mpirun -np 4. main() initializes MPI itself, so that every test
// can create and finalize its own context (ddprt_finalize leaves MPI alone
// when it did not initialize it), runs the tests on every rank, prints the
// report on rank 0 only (other ranks print just their failures) and fails
// on every rank if any rank failed. MPI is initialized as ddprt_init would
// (MPI_THREAD_SERIALIZED: the runtime's communication thread runs the
// collectives), or, with DDPRT_TEST_MPI_THREAD_SINGLE set, with MPI_Init
// (MPI_THREAD_SINGLE: the runtime runs them on the caller's thread).
//
// Every rank runs the same tests in the same order; assertions that end a
// test early come after the collectives, or the other ranks would wait in
// them (until the timeout each context sets).
//
//===----------------------------------------------------------------------===//

#include "TestSupport.h"
#include "ddprt/ddprt.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace ddprt::test;

namespace {

constexpr int kWorld = 4;

int worldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

/// True on every rank iff `bytes` bytes at `data` are the same on all ranks.
bool sameOnAllRanks(const void *data, size_t bytes) {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<char> all(bytes * size_t(world) + 1);
  MPI_Allgather(data, int(bytes), MPI_BYTE, all.data(), int(bytes), MPI_BYTE,
                MPI_COMM_WORLD);
  for (int rank = 1; rank < world; ++rank)
    if (std::memcmp(all.data(), all.data() + size_t(rank) * bytes, bytes) != 0)
      return false;
  return true;
}

/// Every rank's values of `array`, concatenated in rank order.
std::vector<double> gatherValues(const TypedArray &array) {
  std::vector<double> mine = array.values(), all(mine.size() * kWorld + 1);
  MPI_Allgather(mine.data(), int(mine.size()), MPI_DOUBLE, all.data(),
                int(mine.size()), MPI_DOUBLE, MPI_COMM_WORLD);
  all.pop_back();
  return all;
}

class Mpi : public ::testing::Test {
protected:
  void SetUp() override { create(30.0); }
  void TearDown() override {
    if (context) {
      EXPECT_EQ(ddprt_finalize(context), DDPRT_OK);
    }
    context = nullptr;
  }
  /// A context whose collectives give up after `timeout` seconds, so that
  /// a failing test cannot hang the others. The ranks start it together: a
  /// short timeout also bounds the start, and a rank still finalizing the
  /// previous context (slow under the sanitizers on a loaded machine) must
  /// not make the others' start time out.
  void create(double timeout) {
    ddprt_options options;
    ddprt_default_options(&options);
    options.timeout_seconds = timeout;
    create(options);
  }
  void create(const ddprt_options &options) {
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(ddprt_init(&options, &context), DDPRT_OK)
        << ddprt_last_error(context);
    rank = ddprt_rank(context);
    ASSERT_EQ(rank, worldRank());
    ASSERT_EQ(ddprt_world_size(context), kWorld);
  }

  ddprt_context *context = nullptr;
  int rank = -1;
};

/// A small integer, different on every rank: sums and quarters of sums are
/// exact in every dtype.
double smallInteger(int64_t i, int rank) {
  return double((i * 7 + rank * 3) % 11) - 5.0;
}

TEST_F(Mpi, RankAndWorldSize) {
  EXPECT_GE(rank, 0);
  EXPECT_LT(rank, kWorld);
  EXPECT_EQ(ddprt_backend(context), DDPRT_BACKEND_CPU);
  int ranks[kWorld];
  int mine = rank;
  MPI_Allgather(&mine, 1, MPI_INT, ranks, 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 0; r < kWorld; ++r)
    EXPECT_EQ(ranks[r], r);
}

TEST_F(Mpi, SumAndMeanOfSmallIntegersAreExactInEveryDtype) {
  for (ddprt_dtype dtype : kAllDtypes)
    for (ddprt_reduction reduction : {DDPRT_SUM, DDPRT_MEAN}) {
      const int64_t n = 1001;
      TypedArray data(dtype, n);
      for (int64_t i = 0; i < n; ++i)
        data.set(i, smallInteger(i, rank));
      ddprt_buffer buffer = data.buffer();
      ASSERT_EQ(
          ddprt_allreduce(context, reduction, DDPRT_ROLE_GRADIENT, &buffer, 1),
          DDPRT_OK)
          << ddprt_last_error(context);
      std::string what = std::string(dtypeName(dtype)) +
                         (reduction == DDPRT_SUM ? " sum" : " mean");
      int wrong = 0;
      for (int64_t i = 0; i < n; ++i) {
        double expected = 0.0;
        for (int r = 0; r < kWorld; ++r)
          expected += smallInteger(i, r);
        if (reduction == DDPRT_MEAN)
          expected /= kWorld;
        if (data.get(i) != expected && wrong++ < 3)
          ADD_FAILURE() << what << " element " << i << ": " << data.get(i)
                        << " instead of " << expected;
      }
      EXPECT_EQ(wrong, 0) << what;
      EXPECT_TRUE(sameOnAllRanks(data.data(), data.byteSize())) << what;
    }
}

TEST_F(Mpi, RoundedSumsAreBitwiseIdenticalOnAllRanks) {
  std::mt19937 rng(100 + unsigned(rank));
  for (ddprt_dtype dtype : kAllDtypes)
    for (ddprt_reduction reduction : {DDPRT_SUM, DDPRT_MEAN}) {
      const int64_t n = 10007;
      TypedArray data(dtype, n);
      data.randomize(rng);
      std::vector<double> inputs = gatherValues(data);
      ddprt_buffer buffer = data.buffer();
      ASSERT_EQ(
          ddprt_allreduce(context, reduction, DDPRT_ROLE_GRADIENT, &buffer, 1),
          DDPRT_OK)
          << ddprt_last_error(context);
      std::string what = std::string(dtypeName(dtype)) +
                         (reduction == DDPRT_SUM ? " sum" : " mean");
      EXPECT_TRUE(sameOnAllRanks(data.data(), data.byteSize())) << what;
      // Each of the (world - 1) combines and the mean's pre-division round
      // once in the storage type.
      double scale = reduction == DDPRT_MEAN ? 1.0 / kWorld : 1.0;
      int wrong = 0;
      for (int64_t i = 0; i < n; ++i) {
        double expected = 0.0, magnitude = 0.0;
        for (int r = 0; r < kWorld; ++r) {
          expected += inputs[size_t(r * n + i)] * scale;
          magnitude += std::fabs(inputs[size_t(r * n + i)] * scale);
        }
        double bound = 2.0 * kWorld * unitRoundoff(dtype) * magnitude +
                       smallestSubnormal(dtype);
        if (std::fabs(data.get(i) - expected) > bound && wrong++ < 3)
          ADD_FAILURE() << what << " element " << i << ": " << data.get(i)
                        << " instead of " << expected << " +- " << bound;
      }
      EXPECT_EQ(wrong, 0) << what;
    }
}

/// A bucket of tensors of mixed dtypes and sizes (some empty) holding small
/// integers, each followed by guard elements no call may touch.
struct Bucket {
  static constexpr int64_t kGuard = 2;
  static constexpr double kGuardValue = -96.0; // exact in every dtype
  std::vector<TypedArray> storage;
  std::vector<ddprt_buffer> buffers;
  std::vector<int64_t> sizes;

  Bucket(const std::vector<std::pair<ddprt_dtype, int64_t>> &layout, int rank) {
    for (auto [dtype, numel] : layout) {
      TypedArray array(dtype, numel + kGuard);
      for (int64_t i = 0; i < numel; ++i)
        array.set(i, smallInteger(i + int64_t(storage.size()), rank));
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

  /// Expects every tensor to hold the sum (or mean) over ranks and the
  /// guards to be intact.
  void expectReduced(ddprt_reduction reduction, const std::string &what) {
    for (size_t t = 0; t < storage.size(); ++t) {
      for (int64_t i = 0; i < sizes[t]; ++i) {
        double expected = 0.0;
        for (int r = 0; r < kWorld; ++r)
          expected += smallInteger(i + int64_t(t), r);
        if (reduction == DDPRT_MEAN)
          expected /= kWorld;
        EXPECT_EQ(storage[t].get(i), expected)
            << what << " tensor " << t << " element " << i;
      }
      for (int64_t k = 0; k < kGuard; ++k)
        EXPECT_EQ(storage[t].get(sizes[t] + k), kGuardValue)
            << what << " tensor " << t << ": guard overwritten";
      EXPECT_TRUE(sameOnAllRanks(storage[t].data(), storage[t].byteSize()))
          << what << " tensor " << t;
    }
  }
};

const std::vector<std::pair<ddprt_dtype, int64_t>> kMixedLayout = {
    {DDPRT_F32, 5},    {DDPRT_F16, 0},     {DDPRT_F64, 3}, {DDPRT_BF16, 7},
    {DDPRT_F32, 0},    {DDPRT_F32, 11},    {DDPRT_F16, 2}, {DDPRT_BF16, 1},
    {DDPRT_F64, 300},  {DDPRT_F32, 70001}, // large: reduced on its own
    {DDPRT_F16, 40000}};

TEST_F(Mpi, MixedBucketWithEmptyAndLargeTensors) {
  for (ddprt_reduction reduction : {DDPRT_SUM, DDPRT_MEAN}) {
    Bucket bucket(kMixedLayout, rank);
    ASSERT_EQ(ddprt_allreduce(context, reduction, DDPRT_ROLE_UNCOMPRESSED,
                              bucket.buffers.data(), bucket.count()),
              DDPRT_OK)
        << ddprt_last_error(context);
    bucket.expectReduced(reduction, reduction == DDPRT_SUM ? "sum" : "mean");
  }
  EXPECT_EQ(
      ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, nullptr, 0),
      DDPRT_OK)
      << "an empty bucket";
}

TEST_F(Mpi, LargeBuffer) {
  const int64_t n = 3 * 1000 * 1000;
  std::vector<float> data(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    data[size_t(i)] = float(i % 1000 + rank);
  ddprt_buffer buffer{data.data(), DDPRT_F32, n};
  ASSERT_EQ(
      ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, &buffer, 1),
      DDPRT_OK)
      << ddprt_last_error(context);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i)
    wrong += data[size_t(i)] != float(4 * (i % 1000) + 6);
  EXPECT_EQ(wrong, 0);
}

TEST_F(Mpi, LargeBuffersOfEveryDtype) {
  // Hundreds of kilobytes, sizes not divisible by the world size.
  std::mt19937 rng(200 + unsigned(rank));
  for (ddprt_dtype dtype : kAllDtypes)
    for (ddprt_reduction reduction : {DDPRT_SUM, DDPRT_MEAN}) {
      const int64_t n = int64_t(600 * 1024 / ddprt_dtype_size(dtype)) + 3;
      std::string what = std::string(dtypeName(dtype)) +
                         (reduction == DDPRT_SUM ? " sum" : " mean");
      // Small integers: exact.
      TypedArray exact(dtype, n);
      for (int64_t i = 0; i < n; ++i)
        exact.set(i, smallInteger(i, rank));
      ddprt_buffer buffer = exact.buffer();
      ASSERT_EQ(
          ddprt_allreduce(context, reduction, DDPRT_ROLE_GRADIENT, &buffer, 1),
          DDPRT_OK)
          << ddprt_last_error(context);
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) {
        double expected = 0.0;
        for (int r = 0; r < kWorld; ++r)
          expected += smallInteger(i, r);
        if (reduction == DDPRT_MEAN)
          expected /= kWorld;
        wrong += exact.get(i) != expected;
      }
      EXPECT_EQ(wrong, 0) << what;
      // Random: rounded, but the same bits on every rank.
      TypedArray random(dtype, n);
      random.randomize(rng);
      buffer = random.buffer();
      ASSERT_EQ(
          ddprt_allreduce(context, reduction, DDPRT_ROLE_GRADIENT, &buffer, 1),
          DDPRT_OK)
          << ddprt_last_error(context);
      EXPECT_TRUE(sameOnAllRanks(random.data(), random.byteSize())) << what;
    }
}

TEST_F(Mpi, TwoRequestsInFlightCompleteInEitherWaitOrder) {
  for (bool reverse : {false, true}) {
    Bucket first(kMixedLayout, rank),
        second({{DDPRT_F64, 500}, {DDPRT_F32, 20}}, rank);
    ddprt_request *a = nullptr, *b = nullptr;
    ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                                    first.buffers.data(), first.count(), &a),
              DDPRT_OK)
        << ddprt_last_error(context);
    ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_MEAN, DDPRT_ROLE_COMPRESSED,
                                    second.buffers.data(), second.count(), &b),
              DDPRT_OK)
        << ddprt_last_error(context);
    if (reverse)
      std::swap(a, b);
    EXPECT_EQ(ddprt_wait(context, a), DDPRT_OK) << ddprt_last_error(context);
    EXPECT_EQ(ddprt_wait(context, b), DDPRT_OK) << ddprt_last_error(context);
    std::string what = reverse ? "waited in reverse" : "waited in order";
    first.expectReduced(DDPRT_SUM, what + ", first");
    second.expectReduced(DDPRT_MEAN, what + ", second");
  }
}

TEST_F(Mpi, RanksPassingDifferentBucketsAllGetMismatch) {
  float values[8];
  auto reset = [&] {
    for (int i = 0; i < 8; ++i)
      values[i] = float(i + 1);
  };
  struct Case {
    const char *what;
    int oddRank;
    ddprt_buffer odd;
    ddprt_reduction oddReduction;
  };
  const Case cases[] = {
      {"size", 2, {values, DDPRT_F32, 6}, DDPRT_SUM},
      {"dtype", 1, {values, DDPRT_F16, 5}, DDPRT_SUM},
      {"reduction", 0, {values, DDPRT_F32, 5}, DDPRT_MEAN},
  };
  for (const Case &c : cases) {
    reset();
    ddprt_buffer buffer{values, DDPRT_F32, 5};
    ddprt_reduction reduction = DDPRT_SUM;
    if (rank == c.oddRank) {
      buffer = c.odd;
      reduction = c.oddReduction;
    }
    ddprt_status status =
        ddprt_allreduce(context, reduction, DDPRT_ROLE_GRADIENT, &buffer, 1);
    EXPECT_EQ(status, DDPRT_ERROR_MISMATCH)
        << c.what << ": " << ddprt_status_string(status);
    EXPECT_NE(std::string(ddprt_last_error(context)).find("different"),
              std::string::npos)
        << ddprt_last_error(context);
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(values[i], float(i + 1)) << c.what << ": buffer changed";
  }
  // The runtime is still in step: a correct allreduce works.
  reset();
  ddprt_buffer buffer{values, DDPRT_F32, 5};
  ASSERT_EQ(
      ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, &buffer, 1),
      DDPRT_OK)
      << ddprt_last_error(context);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(values[i], float(4 * (i + 1)));
}

// Communicator::checkSameOnAllRanks reduces a signature of 2 + 2 * count
// int64s with one MPI_Iallreduce whose count is the signature's length.
// When ranks pass different numbers of tensors, the ranks call MPI_Iallreduce
// with different counts (erroneous in MPI): here rank 2 got
// DDPRT_ERROR_COMMUNICATION (MPI_ERR_TRUNCATE) and the others waited out
// the timeout (DDPRT_ERROR_TIMEOUT; 300 s by default), and the communicator
// is broken afterwards, instead of every rank getting DDPRT_ERROR_MISMATCH.
TEST_F(Mpi, RanksPassingDifferentNumbersOfTensorsGetMismatch) {
  TearDown();
  create(2.0);
  float values[6] = {1, 2, 3, 4, 5, 6};
  ddprt_buffer buffers[2] = {{values, DDPRT_F32, 3},
                             {values + 3, DDPRT_F32, 3}};
  int count = rank == 3 ? 2 : 1;
  ddprt_status status =
      ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, buffers, count);
  EXPECT_EQ(status, DDPRT_ERROR_MISMATCH)
      << ddprt_status_string(status) << ": " << ddprt_last_error(context);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(values[i], float(i + 1)) << "buffer changed";
  MPI_Barrier(MPI_COMM_WORLD);
}

/// One PowerSGD step through the C API; the mean of the ranks' gradients
/// has rank r, so the step reconstructs it exactly up to rounding.
void powerSgdStep(ddprt_context *context, int rank, ddprt_dtype dtype,
                  int64_t r) {
  const int64_t n = 37, m = 19;
  std::string what = std::string(dtypeName(dtype)) + " r=" + std::to_string(r);
  // G_rank = sum_k c_k(rank) u_k v_k^T with u, v the same on every rank.
  std::mt19937 shared(77);
  std::normal_distribution<double> normal;
  std::vector<std::vector<double>> u(static_cast<size_t>(r)),
      v(static_cast<size_t>(r));
  for (int64_t k = 0; k < r; ++k) {
    for (int64_t i = 0; i < n; ++i)
      u[size_t(k)].push_back(normal(shared));
    for (int64_t j = 0; j < m; ++j)
      v[size_t(k)].push_back(normal(shared));
  }
  auto coefficient = [](int64_t k, int rank) {
    return k == 0 ? double(rank + 1) : double(rank * rank + 1);
  };
  TypedArray g(dtype, n * m);
  std::vector<std::vector<double>> everyG(kWorld);
  for (int who = 0; who < kWorld; ++who) {
    TypedArray gOf(dtype, n * m);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double sum = 0.0;
        for (int64_t k = 0; k < r; ++k)
          sum += coefficient(k, who) * u[size_t(k)][size_t(i)] *
                 v[size_t(k)][size_t(j)];
        gOf.set(i * m + j, sum);
      }
    everyG[size_t(who)] = gOf.values();
    if (who == rank)
      g = gOf;
  }
  std::vector<double> meanG(size_t(n * m), 0.0);
  for (int who = 0; who < kWorld; ++who)
    for (size_t i = 0; i < meanG.size(); ++i)
      meanG[i] += everyG[size_t(who)][i] / kWorld;

  ddprt_state *errorState = nullptr;
  ASSERT_EQ(ddprt_state_get(context, ("error." + what).c_str(), dtype, n * m,
                            &errorState),
            DDPRT_OK);
  ddprt_buffer errorBuffer = ddprt_state_buffer(errorState);
  ddprt_matrix e{errorBuffer.data, dtype, n, m};
  ddprt_matrix gm = g.matrix(n, m);

  // Q from the shared seed: the same on every rank without communication.
  TypedArray q(dtype, m * r), p(dtype, n * r);
  ddprt_buffer qBuffer = q.buffer();
  ASSERT_EQ(ddprt_random_normal(context, &qBuffer, 1234, 5, 0), DDPRT_OK);
  EXPECT_TRUE(sameOnAllRanks(q.data(), q.byteSize())) << what;
  ddprt_matrix qm = q.matrix(m, r), pm = p.matrix(n, r);
  ASSERT_EQ(ddprt_orthogonalize(context, &qm, 1, 0.0), DDPRT_OK);
  ASSERT_EQ(ddprt_reset_counters(context), DDPRT_OK);

  ASSERT_EQ(ddprt_project(context, &gm, &e, &qm, &pm, 1), DDPRT_OK);
  ddprt_buffer pBuffer = p.buffer();
  ASSERT_EQ(
      ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_COMPRESSED, &pBuffer, 1),
      DDPRT_OK)
      << ddprt_last_error(context);
  ASSERT_EQ(ddprt_orthogonalize(context, &pm, 1, 0.0), DDPRT_OK);
  ASSERT_EQ(ddprt_backproject(context, &gm, &e, &pm, &qm, 1), DDPRT_OK);
  ASSERT_EQ(
      ddprt_allreduce(context, DDPRT_MEAN, DDPRT_ROLE_COMPRESSED, &qBuffer, 1),
      DDPRT_OK)
      << ddprt_last_error(context);
  // Decompress in place into G, updating the error in the same pass.
  ASSERT_EQ(ddprt_reconstruct(context, &pm, &qm, &gm, &e, &gm, 1), DDPRT_OK);

  std::vector<double> output = g.values();
  double tolerance = dtype == DDPRT_F64 ? 1e-10 : 1e-5;
  double error = 0.0, norm = 0.0;
  for (size_t i = 0; i < output.size(); ++i) {
    error += (output[i] - meanG[i]) * (output[i] - meanG[i]);
    norm += meanG[i] * meanG[i];
  }
  EXPECT_LE(std::sqrt(error / norm), tolerance) << what << ": M_hat";
  EXPECT_TRUE(sameOnAllRanks(g.data(), g.byteSize())) << what;
  EXPECT_TRUE(sameOnAllRanks(p.data(), p.byteSize())) << what;

  // E = G_rank - M_hat: this rank's share of what the mean left out.
  TypedArray residual(dtype, n * m);
  std::memcpy(residual.data(), errorBuffer.data, residual.byteSize());
  double residualError = 0.0;
  for (int64_t i = 0; i < n * m; ++i) {
    double expected = everyG[size_t(rank)][size_t(i)] - output[size_t(i)];
    residualError +=
        (residual.get(i) - expected) * (residual.get(i) - expected);
  }
  EXPECT_LE(std::sqrt(residualError / norm), tolerance) << what << ": E";

  ddprt_counters counters = DDPRT_COUNTERS_INITIALIZER;
  ASSERT_EQ(ddprt_get_counters(context, &counters), DDPRT_OK);
  EXPECT_EQ(counters.elements_before_compression, uint64_t(n * m)) << what;
  EXPECT_EQ(counters.elements_after_compression, uint64_t((n + m) * r)) << what;
  EXPECT_EQ(counters.collectives[DDPRT_ROLE_COMPRESSED], 2u) << what;
}

TEST_F(Mpi, PowerSgdStepReconstructsALowRankMeanOnEveryRank) {
  for (ddprt_dtype dtype : {DDPRT_F64, DDPRT_F32})
    for (int64_t r : {1, 2})
      powerSgdStep(context, rank, dtype, r);
}

//===----------------------------------------------------------------------===//
// Allgathers
//===----------------------------------------------------------------------===//

/// Element i of rank `rank`'s input to tensor `t` of an allgather: exact in
/// its dtype, different on every rank; i8 runs through every byte value
/// and i64 through values beyond 32 bits.
double gatheredValue(ddprt_dtype dtype, int64_t t, int rank, int64_t i) {
  if (dtype == DDPRT_I8)
    return double((i * 37 + rank * 101 + t) % 256 - 128);
  if (dtype == DDPRT_I64)
    return double((int64_t(rank + 1) << 40) - i * 1000003 - t);
  return smallInteger(i + t, rank);
}

/// An allgather's inputs (this rank's values) and outputs (world size times
/// as many elements, holding guards until written), each output followed by
/// guard elements no call may touch.
struct Gather {
  static constexpr int64_t kGuard = 2;
  static constexpr double kGuardValue = -96.0; // exact in every dtype
  std::vector<std::pair<ddprt_dtype, int64_t>> layout;
  std::vector<TypedArray> in, out;
  std::vector<ddprt_buffer> inputs, outputs;

  Gather(std::vector<std::pair<ddprt_dtype, int64_t>> layoutOf, int rank)
      : layout(std::move(layoutOf)) {
    for (size_t t = 0; t < layout.size(); ++t) {
      auto [dtype, numel] = layout[t];
      TypedArray input(dtype, numel), output(dtype, kWorld * numel + kGuard);
      for (int64_t i = 0; i < numel; ++i)
        input.set(i, gatheredValue(dtype, int64_t(t), rank, i));
      output.fill(kGuardValue);
      in.push_back(input);
      out.push_back(output);
    }
    for (size_t t = 0; t < layout.size(); ++t) {
      int64_t numel = layout[t].second;
      inputs.push_back(
          {numel ? in[t].data() : nullptr, layout[t].first, numel});
      outputs.push_back(
          {numel ? out[t].data() : nullptr, layout[t].first, kWorld * numel});
    }
  }
  int count() const { return int(layout.size()); }

  /// Expects every output to hold every rank's input, rank-major, the
  /// guards to be intact and the inputs unchanged.
  void expectGathered(const std::string &what) const {
    for (size_t t = 0; t < layout.size(); ++t) {
      auto [dtype, numel] = layout[t];
      std::string tensor =
          what + " tensor " + std::to_string(t) + " (" + dtypeName(dtype) + ")";
      int wrong = 0;
      for (int r = 0; r < kWorld; ++r)
        for (int64_t i = 0; i < numel; ++i) {
          double expected = gatheredValue(dtype, int64_t(t), r, i);
          if (out[t].get(r * numel + i) != expected && wrong++ < 3)
            ADD_FAILURE() << tensor << " rank " << r << " element " << i << ": "
                          << out[t].get(r * numel + i) << " instead of "
                          << expected;
        }
      EXPECT_EQ(wrong, 0) << tensor;
      for (int64_t k = 0; k < kGuard; ++k)
        EXPECT_EQ(out[t].get(kWorld * numel + k), kGuardValue)
            << tensor << ": guard overwritten";
      EXPECT_TRUE(sameOnAllRanks(out[t].data(), out[t].byteSize())) << tensor;
      for (int64_t i = 0; i < numel; ++i)
        if (in[t].get(i) != gatheredValue(dtype, int64_t(t), worldRank(), i)) {
          ADD_FAILURE() << tensor << ": input changed at " << i;
          break;
        }
    }
  }
  /// Whether every output still holds only guards.
  bool untouched() const {
    for (const TypedArray &output : out)
      for (int64_t i = 0; i < output.size(); ++i)
        if (output.get(i) != kGuardValue)
          return false;
    return true;
  }
};

/// Floats and integers of every width, empty tensors, and one of 1 MB.
const std::vector<std::pair<ddprt_dtype, int64_t>> kGatherLayout = {
    {DDPRT_F32, 5}, {DDPRT_I8, 1001}, {DDPRT_I64, 3},     {DDPRT_I32, 0},
    {DDPRT_F16, 7}, {DDPRT_BF16, 2},  {DDPRT_F64, 4},     {DDPRT_I32, 9},
    {DDPRT_I8, 0},  {DDPRT_I8, 3},    {DDPRT_F32, 250001}};

TEST_F(Mpi, AllgatherOfMixedDtypesIsRankMajorOnEveryRank) {
  Gather gather(kGatherLayout, rank);
  ASSERT_EQ(ddprt_allgather(context, DDPRT_ROLE_COMPRESSED,
                            gather.inputs.data(), gather.outputs.data(),
                            gather.count()),
            DDPRT_OK)
      << ddprt_last_error(context);
  gather.expectGathered("mixed");
  ddprt_counters counters = DDPRT_COUNTERS_INITIALIZER;
  ASSERT_EQ(ddprt_get_counters(context, &counters), DDPRT_OK);
  EXPECT_EQ(counters.collectives[DDPRT_ROLE_COMPRESSED], 1u);
  EXPECT_EQ(counters.elements_sent[DDPRT_ROLE_COMPRESSED],
            5u + 1001 + 3 + 7 + 2 + 4 + 9 + 3 + 250001);
  EXPECT_EQ(counters.bytes_sent[DDPRT_ROLE_COMPRESSED],
            4u * 5 + 1001 + 8 * 3 + 2 * 7 + 2 * 2 + 8 * 4 + 4 * 9 + 3 +
                4 * 250001);
  EXPECT_EQ(
      ddprt_allgather(context, DDPRT_ROLE_COMPRESSED, nullptr, nullptr, 0),
      DDPRT_OK)
      << "no tensors";
}

// An input may be this rank's slice of its own output (NCCL's in place).
TEST_F(Mpi, AllgatherInPlace) {
  const int64_t n = 1000;
  std::vector<int32_t> data(size_t(kWorld * n), -1);
  for (int64_t i = 0; i < n; ++i)
    data[size_t(rank * n + i)] = int32_t(rank * 100000 + i);
  ddprt_buffer input{data.data() + rank * n, DDPRT_I32, n},
      output{data.data(), DDPRT_I32, kWorld * n};
  ASSERT_EQ(ddprt_allgather(context, DDPRT_ROLE_COMPRESSED, &input, &output, 1),
            DDPRT_OK)
      << ddprt_last_error(context);
  int64_t wrong = 0;
  for (int r = 0; r < kWorld; ++r)
    for (int64_t i = 0; i < n; ++i)
      wrong += data[size_t(r * n + i)] != int32_t(r * 100000 + i);
  EXPECT_EQ(wrong, 0);
}

/// A context that sees the 4 ranks as 2 nodes of 2 (ranks 0, 1 and 2, 3).
void createTwoNodes(ddprt_options &options) {
  ddprt_default_options(&options);
  options.timeout_seconds = 30.0;
  options.ranks_per_node = 2;
}

TEST_F(Mpi, TwoLevelAllreduceEqualsTheWorldsOnTwoNodesOfTwo) {
  ASSERT_EQ(ddprt_finalize(context), DDPRT_OK);
  context = nullptr;
  ddprt_options options;
  createTwoNodes(options);
  create(options);
  int nodes = 0, onNode = 0;
  ASSERT_EQ(ddprt_node_layout(context, &nodes, &onNode), DDPRT_OK);
  EXPECT_EQ(nodes, 2);
  EXPECT_EQ(onNode, 2);
  // Small (one staged collective) and large (a ring of its own) tensors.
  for (int64_t numel : {int64_t(37), int64_t(300000)}) {
    TypedArray a(DDPRT_F32, numel), b(DDPRT_F64, 5);
    for (int64_t i = 0; i < numel; ++i)
      a.set(i, smallInteger(i, rank));
    for (int64_t i = 0; i < 5; ++i)
      b.set(i, smallInteger(i + 3, rank));
    ddprt_buffer buffers[] = {a.buffer(), b.buffer()};
    ddprt_counters before = DDPRT_COUNTERS_INITIALIZER;
    ASSERT_EQ(ddprt_get_counters(context, &before), DDPRT_OK);
    ASSERT_EQ(ddprt_allreduce_group(context, DDPRT_GROUP_NODE, DDPRT_MEAN,
                                    DDPRT_ROLE_GRADIENT, buffers, 2),
              DDPRT_OK)
        << ddprt_last_error(context);
    ddprt_counters within = DDPRT_COUNTERS_INITIALIZER;
    ASSERT_EQ(ddprt_get_counters(context, &within), DDPRT_OK);
    // Nothing crossed the network.
    EXPECT_EQ(within.bytes_sent[DDPRT_ROLE_GRADIENT],
              before.bytes_sent[DDPRT_ROLE_GRADIENT]);
    int first = rank / 2 * 2;
    for (int64_t i = 0; i < numel; i += 997)
      ASSERT_EQ(a.get(i),
                (smallInteger(i, first) + smallInteger(i, first + 1)) / 2)
          << "rank " << rank << " element " << i;
    ddprt_request *request = nullptr;
    ASSERT_EQ(ddprt_allreduce_group_start(context, DDPRT_GROUP_ACROSS_NODES,
                                          DDPRT_MEAN, DDPRT_ROLE_GRADIENT,
                                          buffers, 2, &request),
              DDPRT_OK)
        << ddprt_last_error(context);
    ASSERT_EQ(ddprt_wait(context, request), DDPRT_OK)
        << ddprt_last_error(context);
    ddprt_counters across = DDPRT_COUNTERS_INITIALIZER;
    ASSERT_EQ(ddprt_get_counters(context, &across), DDPRT_OK);
    EXPECT_EQ(across.bytes_sent[DDPRT_ROLE_GRADIENT] -
                  within.bytes_sent[DDPRT_ROLE_GRADIENT],
              uint64_t(numel * 4 + 5 * 8));
    for (int64_t i = 0; i < numel; i += 997) {
      double mean = 0.0;
      for (int r = 0; r < kWorld; ++r)
        mean += smallInteger(i, r);
      ASSERT_EQ(a.get(i), mean / kWorld) << "rank " << rank << " element " << i;
    }
    for (int64_t i = 0; i < 5; ++i) {
      double mean = 0.0;
      for (int r = 0; r < kWorld; ++r)
        mean += smallInteger(i + 3, r);
      EXPECT_EQ(b.get(i), mean / kWorld);
    }
    EXPECT_TRUE(sameOnAllRanks(a.data(), size_t(numel) * 4));
  }
}

TEST_F(Mpi, AcrossNodesEachNodeSendsItsFirstRanksCopy) {
  ASSERT_EQ(ddprt_finalize(context), DDPRT_OK);
  context = nullptr;
  ddprt_options options;
  createTwoNodes(options);
  create(options);
  // The second rank of each node holds something else: what it gets back
  // is the sum of the first ranks' copies.
  TypedArray a(DDPRT_F32, 8);
  for (int64_t i = 0; i < 8; ++i)
    a.set(i, rank % 2 == 0 ? double(rank + i) : 1000.0);
  ddprt_buffer buffer = a.buffer();
  ASSERT_EQ(ddprt_allreduce_group(context, DDPRT_GROUP_ACROSS_NODES, DDPRT_SUM,
                                  DDPRT_ROLE_GRADIENT, &buffer, 1),
            DDPRT_OK)
      << ddprt_last_error(context);
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_EQ(a.get(i), double(0 + i) + double(2 + i));
}

TEST_F(Mpi, AMeanAcrossNodesOfDifferentSizesIsRefused) {
  ASSERT_EQ(ddprt_finalize(context), DDPRT_OK);
  context = nullptr;
  ddprt_options options;
  createTwoNodes(options);
  options.ranks_per_node = 3; // ranks 0, 1, 2 and rank 3
  create(options);
  int nodes = 0, onNode = 0;
  ASSERT_EQ(ddprt_node_layout(context, &nodes, &onNode), DDPRT_OK);
  EXPECT_EQ(nodes, 2);
  EXPECT_EQ(onNode, rank < 3 ? 3 : 1);
  TypedArray a(DDPRT_F32, 4);
  for (int64_t i = 0; i < 4; ++i)
    a.set(i, smallInteger(i, rank));
  ddprt_buffer buffer = a.buffer();
  EXPECT_EQ(ddprt_allreduce_group(context, DDPRT_GROUP_ACROSS_NODES, DDPRT_MEAN,
                                  DDPRT_ROLE_GRADIENT, &buffer, 1),
            DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ddprt_last_error(context)).find("different sizes"),
            std::string::npos)
      << ddprt_last_error(context);
  // A sum within each node, then across them, is the world's sum.
  ASSERT_EQ(ddprt_allreduce_group(context, DDPRT_GROUP_NODE, DDPRT_SUM,
                                  DDPRT_ROLE_GRADIENT, &buffer, 1),
            DDPRT_OK)
      << ddprt_last_error(context);
  ASSERT_EQ(ddprt_allreduce_group(context, DDPRT_GROUP_ACROSS_NODES, DDPRT_SUM,
                                  DDPRT_ROLE_GRADIENT, &buffer, 1),
            DDPRT_OK)
      << ddprt_last_error(context);
  for (int64_t i = 0; i < 4; ++i) {
    double sum = 0.0;
    for (int r = 0; r < kWorld; ++r)
      sum += smallInteger(i, r);
    EXPECT_EQ(a.get(i), sum);
  }
}

TEST_F(Mpi, GroupsOfOneNode) {
  // By processor name the 4 ranks share this machine: one node of 4.
  int nodes = 0, onNode = 0;
  ASSERT_EQ(ddprt_node_layout(context, &nodes, &onNode), DDPRT_OK);
  EXPECT_EQ(nodes, 1);
  EXPECT_EQ(onNode, kWorld);
  TypedArray a(DDPRT_F32, 3);
  for (int64_t i = 0; i < 3; ++i)
    a.set(i, smallInteger(i, rank));
  ddprt_buffer buffer = a.buffer();
  EXPECT_EQ(ddprt_allreduce_group(context, ddprt_group(7), DDPRT_SUM,
                                  DDPRT_ROLE_GRADIENT, &buffer, 1),
            DDPRT_ERROR_INVALID_ARGUMENT);
  // One node: within it is the world; across the one node is a no-op.
  ASSERT_EQ(ddprt_allreduce_group(context, DDPRT_GROUP_NODE, DDPRT_MEAN,
                                  DDPRT_ROLE_GRADIENT, &buffer, 1),
            DDPRT_OK)
      << ddprt_last_error(context);
  ASSERT_EQ(ddprt_allreduce_group(context, DDPRT_GROUP_ACROSS_NODES, DDPRT_MEAN,
                                  DDPRT_ROLE_GRADIENT, &buffer, 1),
            DDPRT_OK)
      << ddprt_last_error(context);
  for (int64_t i = 0; i < 3; ++i) {
    double sum = 0.0;
    for (int r = 0; r < kWorld; ++r)
      sum += smallInteger(i, r);
    EXPECT_EQ(a.get(i), sum / kWorld);
  }
  // One node: scaling by the node count changes nothing.
  std::vector<double> before = a.values();
  ASSERT_EQ(ddprt_scale(context, DDPRT_SCALE_NODE_COUNT, &buffer, 1), DDPRT_OK)
      << ddprt_last_error(context);
  EXPECT_EQ(a.values(), before);
}

TEST_F(Mpi, RanksPerNodeFromTheEnvironment) {
  ASSERT_EQ(ddprt_finalize(context), DDPRT_OK);
  context = nullptr;
  setenv("DDPRT_RANKS_PER_NODE", "two", 1);
  ddprt_options options;
  ddprt_default_options(&options);
  EXPECT_EQ(ddprt_init(&options, &context), DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ddprt_last_error(context)).find("DDPRT_RANKS_PER_NODE"),
            std::string::npos);
  ddprt_finalize(context);
  context = nullptr;
  setenv("DDPRT_RANKS_PER_NODE", "1", 1);
  options.timeout_seconds = 30.0;
  create(options);
  unsetenv("DDPRT_RANKS_PER_NODE");
  int nodes = 0, onNode = 0;
  ASSERT_EQ(ddprt_node_layout(context, &nodes, &onNode), DDPRT_OK);
  EXPECT_EQ(nodes, kWorld);
  EXPECT_EQ(onNode, 1);
}

TEST_F(Mpi, RanksPassingDifferentAllgathersAllGetMismatch) {
  struct Case {
    const char *what;
    int oddRank;
    std::vector<std::pair<ddprt_dtype, int64_t>> odd;
  };
  const std::vector<std::pair<ddprt_dtype, int64_t>> usual = {{DDPRT_F32, 5},
                                                              {DDPRT_I8, 8}};
  const Case cases[] = {
      {"size", 2, {{DDPRT_F32, 5}, {DDPRT_I8, 9}}},
      // The same bytes: only the dtype tells them apart.
      {"dtype", 1, {{DDPRT_I32, 5}, {DDPRT_I8, 8}}},
      {"count", 3, {{DDPRT_F32, 5}, {DDPRT_I8, 8}, {DDPRT_I8, 1}}},
      {"order", 0, {{DDPRT_I8, 8}, {DDPRT_F32, 5}}},
  };
  for (const Case &c : cases) {
    Gather gather(rank == c.oddRank ? c.odd : usual, rank);
    ddprt_status status =
        ddprt_allgather(context, DDPRT_ROLE_COMPRESSED, gather.inputs.data(),
                        gather.outputs.data(), gather.count());
    EXPECT_EQ(status, DDPRT_ERROR_MISMATCH)
        << c.what << ": " << ddprt_status_string(status);
    std::string message = ddprt_last_error(context);
    EXPECT_NE(message.find("allgather: ranks passed different"),
              std::string::npos)
        << c.what << ": " << message;
    EXPECT_TRUE(gather.untouched()) << c.what << ": an output changed";
  }
  // A rank that allreduces where the others allgather tensors of the same
  // sizes and dtypes.
  float values[5] = {1, 2, 3, 4, 5};
  Gather gather({{DDPRT_F32, 5}}, rank);
  ddprt_buffer buffer{values, DDPRT_F32, 5};
  ddprt_status status =
      rank == 0
          ? ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, &buffer, 1)
          : ddprt_allgather(context, DDPRT_ROLE_COMPRESSED,
                            gather.inputs.data(), gather.outputs.data(), 1);
  EXPECT_EQ(status, DDPRT_ERROR_MISMATCH) << ddprt_status_string(status);
  EXPECT_TRUE(gather.untouched());
  EXPECT_EQ(values[4], 5.0f);
  // Still in step: a correct allgather works.
  Gather correct(usual, rank);
  ASSERT_EQ(ddprt_allgather(context, DDPRT_ROLE_COMPRESSED,
                            correct.inputs.data(), correct.outputs.data(),
                            correct.count()),
            DDPRT_OK)
      << ddprt_last_error(context);
  correct.expectGathered("after the mismatches");
}

//===----------------------------------------------------------------------===//
// Started allreduces: the communication thread and its queue
//===----------------------------------------------------------------------===//

/// Whether MPI lets the runtime's communication thread call it (else the
/// runtime runs collectives on the caller's thread).
bool runtimeHasACommunicationThread() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided >= MPI_THREAD_SERIALIZED;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

/// Large enough to go around the ring in several steps.
const std::vector<std::pair<ddprt_dtype, int64_t>> kLargeLayout = {
    {DDPRT_F32, 3 * 1000 * 1000}, {DDPRT_F32, 7}, {DDPRT_F16, 9}};

TEST_F(Mpi, AStartedAllreduceCompletesWhileTheCallerComputes) {
  if (!runtimeHasACommunicationThread())
    GTEST_SKIP() << "MPI below MPI_THREAD_SERIALIZED: collectives run on "
                    "the caller's thread";
  Bucket bucket(kLargeLayout, rank);
  ddprt_request *request = nullptr;
  ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                                  bucket.buffers.data(), bucket.count(),
                                  &request),
            DDPRT_OK)
      << ddprt_last_error(context);
  // The caller computes (sleeps) and only asks whether the request is done,
  // which makes no progress: the thread must finish it on its own. 20 s
  // only bounds a failing test.
  int32_t completed = 0;
  auto start = std::chrono::steady_clock::now();
  while (!completed && secondsSince(start) < 20.0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_EQ(ddprt_request_completed(context, request, &completed), DDPRT_OK)
        << ddprt_last_error(context);
  }
  EXPECT_EQ(completed, 1) << "not done before its wait";
  EXPECT_EQ(ddprt_wait(context, request), DDPRT_OK)
      << ddprt_last_error(context);
  bucket.expectReduced(DDPRT_SUM, "reduced in the background");
}

TEST_F(Mpi, SeveralStartsWaitedInReverseOrder) {
  std::vector<Bucket> buckets;
  buckets.emplace_back(kLargeLayout, rank);
  buckets.emplace_back(kMixedLayout, rank);
  buckets.emplace_back(
      std::vector<std::pair<ddprt_dtype, int64_t>>{{DDPRT_F64, 200000},
                                                   {DDPRT_BF16, 33}},
      rank);
  buckets.emplace_back(
      std::vector<std::pair<ddprt_dtype, int64_t>>{{DDPRT_F32, 1}}, rank);
  auto reductionOf = [](size_t i) { return i % 2 ? DDPRT_MEAN : DDPRT_SUM; };
  std::vector<ddprt_request *> requests(buckets.size());
  for (size_t i = 0; i < buckets.size(); ++i)
    ASSERT_EQ(ddprt_allreduce_start(
                  context, reductionOf(i), DDPRT_ROLE_GRADIENT,
                  buckets[i].buffers.data(), buckets[i].count(), &requests[i]),
              DDPRT_OK)
        << ddprt_last_error(context);
  for (size_t i = buckets.size(); i-- > 0;)
    EXPECT_EQ(ddprt_wait(context, requests[i]), DDPRT_OK)
        << "bucket " << i << ": " << ddprt_last_error(context);
  for (size_t i = 0; i < buckets.size(); ++i)
    buckets[i].expectReduced(reductionOf(i), "bucket " + std::to_string(i));
}

TEST_F(Mpi, ABlockingAllreduceKeepsItsPlaceAmongStartedOnes) {
  Bucket first(kMixedLayout, rank), second(kLargeLayout, rank),
      third({{DDPRT_F64, 300}}, rank);
  ddprt_request *a = nullptr, *c = nullptr;
  ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_MEAN, DDPRT_ROLE_GRADIENT,
                                  first.buffers.data(), first.count(), &a),
            DDPRT_OK)
      << ddprt_last_error(context);
  ASSERT_EQ(ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                            second.buffers.data(), second.count()),
            DDPRT_OK)
      << ddprt_last_error(context);
  // The blocking one completed, so the one started before it did too.
  int32_t completed = 0;
  ASSERT_EQ(ddprt_request_completed(context, a, &completed), DDPRT_OK);
  EXPECT_EQ(completed, 1);
  ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                                  third.buffers.data(), third.count(), &c),
            DDPRT_OK)
      << ddprt_last_error(context);
  EXPECT_EQ(ddprt_wait(context, c), DDPRT_OK) << ddprt_last_error(context);
  EXPECT_EQ(ddprt_wait(context, a), DDPRT_OK) << ddprt_last_error(context);
  first.expectReduced(DDPRT_MEAN, "started first");
  second.expectReduced(DDPRT_SUM, "blocking");
  third.expectReduced(DDPRT_SUM, "started last");
}

// The allgather runs in the same queue as started allreduces (on the
// caller's thread where MPI is below MPI_THREAD_SERIALIZED), after them.
TEST_F(Mpi, AnAllgatherKeepsItsPlaceAfterStartedAllreduces) {
  Bucket first(kLargeLayout, rank), second(kMixedLayout, rank);
  Gather gather(kGatherLayout, rank);
  ddprt_request *a = nullptr, *b = nullptr;
  ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                                  first.buffers.data(), first.count(), &a),
            DDPRT_OK)
      << ddprt_last_error(context);
  ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_MEAN, DDPRT_ROLE_GRADIENT,
                                  second.buffers.data(), second.count(), &b),
            DDPRT_OK)
      << ddprt_last_error(context);
  ASSERT_EQ(ddprt_allgather(context, DDPRT_ROLE_COMPRESSED,
                            gather.inputs.data(), gather.outputs.data(),
                            gather.count()),
            DDPRT_OK)
      << ddprt_last_error(context);
  // The allgather completed, so the allreduces started before it did too.
  for (ddprt_request *request : {a, b}) {
    int32_t completed = 0;
    ASSERT_EQ(ddprt_request_completed(context, request, &completed), DDPRT_OK);
    EXPECT_EQ(completed, 1);
  }
  EXPECT_EQ(ddprt_wait(context, b), DDPRT_OK) << ddprt_last_error(context);
  EXPECT_EQ(ddprt_wait(context, a), DDPRT_OK) << ddprt_last_error(context);
  first.expectReduced(DDPRT_SUM, "started first");
  second.expectReduced(DDPRT_MEAN, "started second");
  gather.expectGathered("gathered after them");
}

TEST_F(Mpi, AStartedAllreduceReportsAMismatchAtItsWait) {
  float values[6] = {1, 2, 3, 4, 5, 6};
  ddprt_buffer buffer{values, DDPRT_F32, rank == 2 ? 6 : 5};
  ddprt_request *request = nullptr;
  ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                                  &buffer, 1, &request),
            DDPRT_OK)
      << ddprt_last_error(context);
  ddprt_status status = ddprt_wait(context, request);
  EXPECT_EQ(status, DDPRT_ERROR_MISMATCH) << ddprt_status_string(status);
  EXPECT_NE(std::string(ddprt_last_error(context)).find("different"),
            std::string::npos)
      << ddprt_last_error(context);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(values[i], float(i + 1)) << "buffer changed";
  // Still in step.
  buffer.numel = 5;
  ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                                  &buffer, 1, &request),
            DDPRT_OK);
  EXPECT_EQ(ddprt_wait(context, request), DDPRT_OK)
      << ddprt_last_error(context);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(values[i], float(4 * (i + 1)));
}

TEST_F(Mpi, FinalizeCompletesRequestsNotWaitedFor) {
  std::vector<Bucket> buckets;
  buckets.emplace_back(kLargeLayout, rank);
  buckets.emplace_back(kMixedLayout, rank);
  for (Bucket &bucket : buckets) {
    ddprt_request *request = nullptr;
    ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                                    bucket.buffers.data(), bucket.count(),
                                    &request),
              DDPRT_OK)
        << ddprt_last_error(context);
  }
  // ddprt_finalize frees the requests too.
  EXPECT_EQ(ddprt_finalize(context), DDPRT_OK);
  context = nullptr;
  buckets[0].expectReduced(DDPRT_SUM, "first, not waited for");
  buckets[1].expectReduced(DDPRT_SUM, "second, not waited for");
}

//===----------------------------------------------------------------------===//
// The simulated link (SimulatedLink.h)
//===----------------------------------------------------------------------===//

TEST_F(Mpi, NoSimulatedLinkByDefault) {
  ddprt_options options;
  ddprt_default_options(&options);
  EXPECT_EQ(options.simulated_link_gbps, 0.0);
  EXPECT_EQ(options.simulated_link_latency_us, 0.0);
  ddprt_options running;
  ddprt_default_options(&running);
  ASSERT_EQ(ddprt_get_options(context, &running), DDPRT_OK);
  if (!std::getenv("DDPRT_SIMULATED_LINK")) {
    EXPECT_EQ(running.simulated_link_gbps, 0.0);
    EXPECT_EQ(running.simulated_link_latency_us, 0.0);
  }
}

/// Seconds an allreduce of `bytes` takes at least on a link of `gbps` and
/// `latencyUs` (SimulatedLink.h): this rank sends 2 (W - 1) / W of them.
double linkSeconds(double bytes, double gbps, double latencyUs) {
  return latencyUs * 1e-6 +
         2.0 * (kWorld - 1) / kWorld * bytes * 8.0 / (gbps * 1e9);
}

TEST_F(Mpi, ASimulatedLinkHoldsEachCollectiveForLatencyPlusBytesOverBandwidth) {
  TearDown();
  ddprt_options options;
  ddprt_default_options(&options);
  options.timeout_seconds = 30.0;
  options.check_shapes = 0; // one collective per bucket
  options.simulated_link_gbps = 1.0;
  options.simulated_link_latency_us = 40000.0;
  create(options);
  ddprt_options running;
  ddprt_default_options(&running);
  ASSERT_EQ(ddprt_get_options(context, &running), DDPRT_OK);
  if (std::getenv("DDPRT_SIMULATED_LINK"))
    GTEST_SKIP() << "DDPRT_SIMULATED_LINK overrides the link this test sets";
  EXPECT_EQ(running.simulated_link_gbps, 1.0);
  EXPECT_EQ(running.simulated_link_latency_us, 40000.0);
  // 4 MB (ring) and 40 bytes (MPI's allreduce), blocking and started.
  for (int64_t numel : {int64_t(1) << 20, int64_t(10)})
    for (bool started : {false, true}) {
      std::vector<float> data(static_cast<size_t>(numel), float(rank));
      ddprt_buffer buffer{data.data(), DDPRT_F32, numel};
      double expected = linkSeconds(double(numel) * 4, 1.0, 40000.0);
      auto start = std::chrono::steady_clock::now();
      if (started) {
        ddprt_request *request = nullptr;
        ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                                        &buffer, 1, &request),
                  DDPRT_OK);
        ASSERT_EQ(ddprt_wait(context, request), DDPRT_OK)
            << ddprt_last_error(context);
      } else {
        ASSERT_EQ(ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                                  &buffer, 1),
                  DDPRT_OK)
            << ddprt_last_error(context);
      }
      double seconds = secondsSince(start);
      std::string what = std::to_string(numel * 4) + " bytes, " +
                         (started ? "started" : "blocking");
      EXPECT_GE(seconds, expected) << what;
      EXPECT_EQ(data[0], 6.0f) << what;
    }
}

// An allgather where each rank contributes B bytes is held for latency +
// (W - 1) B / bandwidth: what each rank sends in a ring allgather.
TEST_F(Mpi, ASimulatedLinkHoldsAnAllgatherForWhatEachRankSends) {
  TearDown();
  ddprt_options options;
  ddprt_default_options(&options);
  options.timeout_seconds = 30.0;
  options.check_shapes = 0; // one collective per call
  options.simulated_link_gbps = 1.0;
  options.simulated_link_latency_us = 40000.0;
  create(options);
  if (std::getenv("DDPRT_SIMULATED_LINK"))
    GTEST_SKIP() << "DDPRT_SIMULATED_LINK overrides the link this test sets";
  // 1 MiB of i8 and 4 bytes of f32 from each rank.
  Gather gather({{DDPRT_I8, int64_t(1) << 20}, {DDPRT_F32, 1}}, rank);
  double bytes = double((int64_t(1) << 20) + 4);
  double expected = 40000.0 * 1e-6 + (kWorld - 1) * bytes * 8.0 / 1e9;
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(ddprt_allgather(context, DDPRT_ROLE_COMPRESSED,
                            gather.inputs.data(), gather.outputs.data(),
                            gather.count()),
            DDPRT_OK)
      << ddprt_last_error(context);
  EXPECT_GE(secondsSince(start), expected);
  gather.expectGathered("over the link");
}

//===----------------------------------------------------------------------===//
// Timeouts: last, since a timed-out communicator stays out of step
//===----------------------------------------------------------------------===//

/// Ranks 0-2 call an allreduce that rank 3 skips; returns its status on
/// ranks 0-2 (DDPRT_OK on rank 3) and the seconds it took.
std::pair<ddprt_status, double> allreduceThatRank3Skips(ddprt_context *context,
                                                        int rank) {
  float value = 1.0f;
  ddprt_buffer buffer{&value, DDPRT_F32, 1};
  if (rank == 3)
    return {DDPRT_OK, 0.0};
  auto start = std::chrono::steady_clock::now();
  ddprt_status status =
      ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, &buffer, 1);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return {status, seconds};
}

TEST_F(Mpi, ZZ_TimeoutWhenARankSkipsACollective) {
  TearDown();
  create(1.0);
  auto [status, seconds] = allreduceThatRank3Skips(context, rank);
  if (rank != 3) {
    EXPECT_EQ(status, DDPRT_ERROR_TIMEOUT) << ddprt_status_string(status);
    EXPECT_GE(seconds, 0.9);
    EXPECT_LT(seconds, 10.0);
    EXPECT_NE(std::string(ddprt_last_error(context)).find("did not complete"),
              std::string::npos)
        << ddprt_last_error(context);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Communicator.h: "After a timeout or an MPI failure the communicator may be
// out of step with the other ranks; every later call fails": at once, with
// DDPRT_ERROR_STATE, without posting another collective (which could match
// another rank's unrelated one) or waiting out the timeout again.
TEST_F(Mpi, ZZ_CallAfterTimeoutFailsFast) {
  TearDown();
  create(1.0);
  allreduceThatRank3Skips(context, rank);
  if (rank != 3) {
    auto [status, seconds] = allreduceThatRank3Skips(context, rank);
    EXPECT_EQ(status, DDPRT_ERROR_STATE) << ddprt_status_string(status);
    EXPECT_LT(seconds, 0.5);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A started allreduce that rank 3 never joins fails at its wait, within the
// timeout; the one queued behind it fails too (at once, with the reason),
// and so does every later call.
TEST_F(Mpi, ZZ_AStartedAllreduceARankNeverJoinsTimesOutAtItsWait) {
  TearDown();
  create(1.0);
  if (rank != 3) {
    float first = 1.0f, second = 2.0f;
    ddprt_buffer a{&first, DDPRT_F32, 1}, b{&second, DDPRT_F32, 1};
    ddprt_request *requestA = nullptr, *requestB = nullptr;
    auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, &a,
                                    1, &requestA),
              DDPRT_OK);
    ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, &b,
                                    1, &requestB),
              DDPRT_OK);
    // The later one first: it must not hang behind the failed one.
    ddprt_status status = ddprt_wait(context, requestB);
    EXPECT_EQ(status, DDPRT_ERROR_STATE) << ddprt_status_string(status);
    EXPECT_NE(std::string(ddprt_last_error(context)).find("did not complete"),
              std::string::npos)
        << "the reason: " << ddprt_last_error(context);
    status = ddprt_wait(context, requestA);
    double seconds = secondsSince(start);
    EXPECT_EQ(status, DDPRT_ERROR_TIMEOUT) << ddprt_status_string(status);
    EXPECT_GE(seconds, 0.9);
    EXPECT_LT(seconds, 10.0);
    EXPECT_NE(std::string(ddprt_last_error(context)).find("did not complete"),
              std::string::npos)
        << ddprt_last_error(context);
    EXPECT_EQ(second, 2.0f) << "a failed request's buffer changed";
    status = ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, &a, 1);
    EXPECT_EQ(status, DDPRT_ERROR_STATE) << ddprt_status_string(status);
    EXPECT_EQ(ddprt_synchronize(context), DDPRT_ERROR_STATE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Without the shape check the allgather itself waits for the rank that
// skips it: a timeout, after which every call fails at once.
TEST_F(Mpi, ZZ_AnAllgatherARankSkipsTimesOut) {
  TearDown();
  ddprt_options options;
  ddprt_default_options(&options);
  options.timeout_seconds = 1.0;
  options.check_shapes = 0;
  create(options);
  Gather gather({{DDPRT_I8, 100}, {DDPRT_F32, 3}}, rank);
  if (rank != 3) {
    auto start = std::chrono::steady_clock::now();
    ddprt_status status =
        ddprt_allgather(context, DDPRT_ROLE_COMPRESSED, gather.inputs.data(),
                        gather.outputs.data(), gather.count());
    double seconds = secondsSince(start);
    EXPECT_EQ(status, DDPRT_ERROR_TIMEOUT) << ddprt_status_string(status);
    EXPECT_GE(seconds, 0.9);
    EXPECT_LT(seconds, 10.0);
    EXPECT_NE(std::string(ddprt_last_error(context)).find("did not complete"),
              std::string::npos)
        << ddprt_last_error(context);
    start = std::chrono::steady_clock::now();
    status =
        ddprt_allgather(context, DDPRT_ROLE_COMPRESSED, gather.inputs.data(),
                        gather.outputs.data(), gather.count());
    EXPECT_EQ(status, DDPRT_ERROR_STATE) << ddprt_status_string(status);
    EXPECT_LT(secondsSince(start), 0.5);
    float value = 1.0f;
    ddprt_buffer buffer{&value, DDPRT_F32, 1};
    EXPECT_EQ(
        ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT, &buffer, 1),
        DDPRT_ERROR_STATE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Finalizing with a collective that cannot complete (rank 3 never joins)
// ends, once the timeout breaks it.
TEST_F(Mpi, ZZ_FinalizeWithAStuckRequestEnds) {
  TearDown();
  create(1.0);
  float values[2] = {1.0f, 2.0f};
  if (rank != 3)
    for (float &value : values) {
      ddprt_buffer buffer{&value, DDPRT_F32, 1};
      ddprt_request *request = nullptr;
      ASSERT_EQ(ddprt_allreduce_start(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                                      &buffer, 1, &request),
                DDPRT_OK);
    }
  EXPECT_EQ(ddprt_finalize(context), DDPRT_OK);
  context = nullptr;
  MPI_Barrier(MPI_COMM_WORLD);
}

/// On ranks other than 0: prints only failures, prefixed with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult &result) override {
    if (result.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                   result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.summary());
  }
  void OnTestEnd(const ::testing::TestInfo &info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_,
                   info.test_suite_name(), info.name());
  }

private:
  int rank_;
};

TEST(MpiJoin, AContextJoinsTheCallersCommunicatorAndLeavesItAlone) {
  // Two jobs of 2 in one of 4: the even and the odd ranks, each with a
  // context on its half (DDPRT_JOIN_MPI), as a framework that made its own
  // communicator would (mpi4py, Horovod).
  int world = worldRank();
  MPI_Comm half = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, world % 2, world, &half),
            MPI_SUCCESS);
  MPI_Errhandler before = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(half, &before);
  ddprt_options options;
  ddprt_default_options(&options);
  options.timeout_seconds = 30.0;
  options.join = DDPRT_JOIN_MPI;
  options.join_handle = &half;
  ddprt_context *context = nullptr;
  MPI_Barrier(MPI_COMM_WORLD);
  ASSERT_EQ(ddprt_init(&options, &context), DDPRT_OK)
      << ddprt_last_error(context);
  EXPECT_EQ(ddprt_world_size(context), 2);
  EXPECT_EQ(ddprt_rank(context), world / 2);
  float value = float(world);
  ddprt_buffer buffer{&value, DDPRT_F32, 1};
  ASSERT_EQ(
      ddprt_allreduce(context, DDPRT_MEAN, DDPRT_ROLE_GRADIENT, &buffer, 1),
      DDPRT_OK)
      << ddprt_last_error(context);
  // Even: (0 + 2) / 2; odd: (1 + 3) / 2.
  EXPECT_EQ(value, world % 2 == 0 ? 1.0f : 2.0f);
  EXPECT_EQ(ddprt_finalize(context), DDPRT_OK);
  // The caller's communicator is as it was: its error handler untouched,
  // still usable after the runtime is gone, and MPI still running.
  MPI_Errhandler after = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(half, &after);
  EXPECT_EQ(after, before);
  int sum = 0, one = 1;
  ASSERT_EQ(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, half), MPI_SUCCESS);
  EXPECT_EQ(sum, 2);
  int finalized = 1;
  MPI_Finalized(&finalized);
  EXPECT_EQ(finalized, 0);
  MPI_Errhandler_free(&before);
  MPI_Errhandler_free(&after);
  MPI_Comm_free(&half);
  // A null communicator is refused with a message, not a crash.
  MPI_Comm null = MPI_COMM_NULL;
  options.join_handle = &null;
  EXPECT_EQ(ddprt_init(&options, &context), DDPRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ddprt_last_error(context)).find("MPI_COMM_NULL"),
            std::string::npos)
      << ddprt_last_error(context);
  ddprt_finalize(context);
}

} // namespace

int main(int argc, char **argv) {
  if (std::getenv("DDPRT_TEST_MPI_THREAD_SINGLE")) {
    MPI_Init(&argc, &argv);
  } else {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  }
  int rank = worldRank(), world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    ::testing::TestEventListeners &listeners =
        ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int failed = 0;
  if (world != kWorld && !GTEST_FLAG_GET(list_tests)) {
    if (rank == 0)
      std::fprintf(stderr, "run with mpirun -np %d (got %d ranks)\n", kWorld,
                   world);
    failed = 1;
  } else {
    failed = RUN_ALL_TESTS() != 0;
  }
  std::vector<int> failures(static_cast<size_t>(world));
  MPI_Gather(&failed, 1, MPI_INT, failures.data(), 1, MPI_INT, 0,
             MPI_COMM_WORLD);
  int anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && anyFailed) {
    std::fprintf(stderr, "FAILED on rank(s):");
    for (int r = 0; r < world; ++r)
      if (failures[size_t(r)])
        std::fprintf(stderr, " %d", r);
    std::fprintf(stderr, "\n");
  }
  MPI_Finalize();
  return anyFailed;
}
