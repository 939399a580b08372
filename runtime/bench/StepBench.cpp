//===- StepBench.cpp - one DDP gradient sync step through the C ABI -------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Times the communication hook of one data-parallel step over a model's
// parameter shapes, the way PyTorch's DDP hooks see it: DDP-style 25 MiB
// buckets in reverse parameter order, fresh gradients every step, and the
// time from the start of the first bucket to the end of the last (device
// work included: the step ends with ddprt_synchronize). Every buffer is
// runtime-owned state, so the same code runs on the CPU and the CUDA
// backend. bench/cpu/run.sh and bench/gpu/run.sh run it next to PyTorch.
//
//   mpirun -np 2 ddprt-step-bench [resnet50|gpt2-medium] [steps] [rank]
//                                 [cpu|cuda] [timeout-seconds] [--profile]
//                                 [--kinds=allreduce,fp16,powersgd]
//                                 [--simulated-link=GBPS,LATENCY_US]
//
// --profile adds, per kind, the time of each call with a synchronize around
// it; DDPRT_CUDA_PROJECTION=fused|gemm forces the CUDA backend's projector.
// --simulated-link (or DDPRT_SIMULATED_LINK, which overrides it) holds each
// collective as a link of that bandwidth and latency would (ddprt.h); the
// first line then says so.
//
//===----------------------------------------------------------------------===//

#include "ModelShapes.h"
#include "ddprt/ddprt.h"

#if defined(DDPRT_HAVE_MPI)
#include <mpi.h>
#endif
#if defined(DDPRT_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace ddprt::bench;

namespace {

#define CHECK(call)                                                            \
  do {                                                                         \
    ddprt_status status = (call);                                              \
    if (status != DDPRT_OK) {                                                  \
      std::fprintf(stderr, "%s failed: %s (%s)\n", #call,                      \
                   ddprt_status_string(status), ddprt_last_error(context));    \
      std::exit(1);                                                            \
    }                                                                          \
  } while (false)

ddprt_context *context = nullptr;

/// --profile: every call is followed by ddprt_synchronize and its wall time
/// added to its phase, which shows where a step's time goes (the launch
/// gaps that pipelining hides are included, so the sum exceeds the step).
bool profiling = false;
std::map<std::string, double> phaseSeconds;

template <typename Call> void phase(const char *name, Call call) {
  if (!profiling) {
    call();
    return;
  }
  CHECK(ddprt_synchronize(context));
  auto start = std::chrono::steady_clock::now();
  call();
  CHECK(ddprt_synchronize(context));
  phaseSeconds[name] +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
}

/// Every buffer is a runtime state: host memory on the CPU backend, device
/// memory on CUDA.
ddprt_buffer state(const std::string &name, ddprt_dtype dtype, int64_t numel) {
  ddprt_state *handle = nullptr;
  CHECK(ddprt_state_get(context, name.c_str(), dtype, numel, &handle));
  return ddprt_state_buffer(handle);
}

struct Tensor {
  Parameter param;
  ddprt_buffer grad, fresh, narrow;
  bool compressed = false;
  int64_t rank = 0;
  ddprt_buffer p, q, error;

  ddprt_buffer buffer() { return grad; }
  ddprt_buffer narrowBuffer() { return narrow; }
  ddprt_matrix matrix() {
    return {grad.data, DDPRT_F32, param.rows(), param.cols()};
  }
  ddprt_matrix pMatrix() { return {p.data, DDPRT_F32, param.rows(), rank}; }
  ddprt_matrix qMatrix() { return {q.data, DDPRT_F32, param.cols(), rank}; }
  ddprt_matrix errorMatrix() {
    return {error.data, DDPRT_F32, param.rows(), param.cols()};
  }
};

using Bucket = std::vector<Tensor *>;

/// DDP's buckets: parameters in reverse order, closed at 25 MiB.
std::vector<Bucket> makeBuckets(std::vector<Tensor> &tensors) {
  const int64_t cap = 25 * 1024 * 1024;
  std::vector<Bucket> buckets(1);
  int64_t bytes = 0;
  for (auto it = tensors.rbegin(); it != tensors.rend(); ++it) {
    int64_t size = it->param.numel() * 4;
    if (!buckets.back().empty() && bytes + size > cap) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(&*it);
    bytes += size;
  }
  return buckets;
}

void plainStep(std::vector<Bucket> &buckets) {
  for (Bucket &bucket : buckets) {
    std::vector<ddprt_buffer> buffers;
    for (Tensor *t : bucket)
      buffers.push_back(t->buffer());
    phase("allreduce", [&] {
      CHECK(ddprt_allreduce(context, DDPRT_MEAN, DDPRT_ROLE_GRADIENT,
                            buffers.data(), int(buffers.size())));
    });
  }
}

void fp16Step(std::vector<Bucket> &buckets) {
  for (Bucket &bucket : buckets) {
    std::vector<ddprt_buffer> wide, narrow;
    for (Tensor *t : bucket) {
      wide.push_back(t->buffer());
      narrow.push_back(t->narrowBuffer());
    }
    int n = int(wide.size());
    phase("cast", [&] {
      CHECK(ddprt_cast(context, DDPRT_SCALE_INVERSE_WORLD_SIZE, wide.data(),
                       narrow.data(), n));
    });
    phase("allreduce", [&] {
      CHECK(ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_GRADIENT,
                            narrow.data(), n));
    });
    phase("cast", [&] {
      CHECK(
          ddprt_cast(context, DDPRT_SCALE_NONE, narrow.data(), wide.data(), n));
    });
  }
}

/// What insert-powersgd + ddp-fuse-kernels emit for one bucket, steady
/// state (warm start, error feedback).
void powerSGDStep(std::vector<Bucket> &buckets) {
  for (Bucket &bucket : buckets) {
    std::vector<ddprt_buffer> uncompressed;
    std::vector<ddprt_matrix> gs, es, ps, qs;
    for (Tensor *t : bucket) {
      if (!t->compressed) {
        uncompressed.push_back(t->buffer());
        continue;
      }
      gs.push_back(t->matrix());
      es.push_back(t->errorMatrix());
      ps.push_back(t->pMatrix());
      qs.push_back(t->qMatrix());
    }
    ddprt_request *request = nullptr;
    if (!uncompressed.empty())
      phase("allreduce", [&] {
        CHECK(ddprt_allreduce_start(
            context, DDPRT_MEAN, DDPRT_ROLE_UNCOMPRESSED, uncompressed.data(),
            int(uncompressed.size()), &request));
      });
    int n = int(gs.size());
    if (n > 0) {
      phase("orthogonalize",
            [&] { CHECK(ddprt_orthogonalize(context, qs.data(), n, 0.0)); });
      phase("project", [&] {
        CHECK(ddprt_project(context, gs.data(), es.data(), qs.data(), ps.data(),
                            n));
      });
      std::vector<ddprt_buffer> pBuffers, qBuffers;
      for (int i = 0; i < n; ++i) {
        pBuffers.push_back({ps[i].data, DDPRT_F32, ps[i].rows * ps[i].cols});
        qBuffers.push_back({qs[i].data, DDPRT_F32, qs[i].rows * qs[i].cols});
      }
      phase("allreduce", [&] {
        CHECK(ddprt_allreduce(context, DDPRT_SUM, DDPRT_ROLE_COMPRESSED,
                              pBuffers.data(), n));
      });
      phase("orthogonalize",
            [&] { CHECK(ddprt_orthogonalize(context, ps.data(), n, 0.0)); });
      phase("backproject", [&] {
        CHECK(ddprt_backproject(context, gs.data(), es.data(), ps.data(),
                                qs.data(), n));
      });
      phase("allreduce", [&] {
        CHECK(ddprt_allreduce(context, DDPRT_MEAN, DDPRT_ROLE_COMPRESSED,
                              qBuffers.data(), n));
      });
      phase("reconstruct", [&] {
        CHECK(ddprt_reconstruct(context, ps.data(), qs.data(), gs.data(),
                                es.data(), gs.data(), n));
      });
    }
    if (request)
      phase("allreduce", [&] { CHECK(ddprt_wait(context, request)); });
  }
}

void barrier() {
#if defined(DDPRT_HAVE_MPI)
  MPI_Barrier(MPI_COMM_WORLD);
#endif
}

/// The step time of the slowest rank.
double slowestRank(double seconds) {
#if defined(DDPRT_HAVE_MPI)
  double slowest = 0;
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
#else
  return seconds;
#endif
}

/// Device memory in use on this process's GPU (0 without CUDA): the
/// runtime's scratch is what grows between two readings around the steps.
double deviceBytesUsed() {
#if defined(DDPRT_HAVE_CUDA)
  size_t freeBytes = 0, totalBytes = 0;
  if (ddprt_backend(context) == DDPRT_BACKEND_CUDA &&
      cudaMemGetInfo(&freeBytes, &totalBytes) == cudaSuccess)
    return double(totalBytes - freeBytes);
#endif
  return 0.0;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
#if defined(DDPRT_HAVE_MPI)
  // As ddprt_init would: the runtime's communication thread calls MPI.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
#endif
  std::vector<std::string> args;
  bool wantProfile = false;
  std::string onlyKinds; // comma-separated; empty: all
  double linkGbps = 0.0, linkLatencyUs = 0.0; // 0: no simulated link
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--profile") == 0)
      wantProfile = true;
    else if (std::strncmp(argv[i], "--kinds=", 8) == 0)
      onlyKinds = argv[i] + 8;
    else if (std::strncmp(argv[i], "--simulated-link=", 17) == 0) {
      const char *why = nullptr;
      if (ddprt_parse_simulated_link(argv[i] + 17, &linkGbps, &linkLatencyUs,
                                     &why) != DDPRT_OK) {
        std::fprintf(stderr, "ddprt-step-bench: --simulated-link: %s\n",
                     why ? why : argv[i] + 17);
        return 2;
      }
    } else
      args.push_back(argv[i]);
  }
  std::string model = args.size() > 0 ? args[0] : "resnet50";
  int steps = args.size() > 1 ? std::atoi(args[1].c_str()) : 10;
  int rank = args.size() > 2 ? std::atoi(args[2].c_str()) : 2;
  std::string backend = args.size() > 3 ? args[3] : "cpu";
  if ((model != "resnet50" && model != "gpt2-medium") || steps < 1 ||
      rank < 1 || (backend != "cpu" && backend != "cuda")) {
    std::fprintf(stderr, "usage: ddprt-step-bench [resnet50|gpt2-medium] "
                         "[steps >= 1] [rank >= 1] [cpu|cuda] "
                         "[timeout-seconds] [--profile] "
                         "[--kinds=allreduce,fp16,powersgd] "
                         "[--simulated-link=GBPS,LATENCY_US]\n");
    return 2;
  }
  std::vector<Parameter> params =
      model == "gpt2-medium" ? gpt2Medium() : resnet50();

  ddprt_options options;
  ddprt_default_options(&options);
  options.backend = backend == "cuda" ? DDPRT_BACKEND_CUDA : DDPRT_BACKEND_CPU;
  if (args.size() > 4)
    options.timeout_seconds = std::atof(args[4].c_str());
  options.simulated_link_gbps = linkGbps;
  options.simulated_link_latency_us = linkLatencyUs;
  CHECK(ddprt_init(&options, &context));
  int me = ddprt_rank(context);
  // The link the runtime models (DDPRT_SIMULATED_LINK applied).
  CHECK(ddprt_get_options(context, &options));

  std::vector<Tensor> tensors(params.size());
  int64_t total = 0, totalAfter = 0, persistentBytes = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor &t = tensors[i];
    t.param = params[i];
    int64_t numel = t.param.numel();
    t.grad = state("grad." + t.param.name, DDPRT_F32, numel);
    t.fresh = state("fresh." + t.param.name, DDPRT_F32, numel);
    t.narrow = state("narrow." + t.param.name, DDPRT_F16, numel);
    CHECK(ddprt_random_normal(context, &t.fresh, 1234 + me, i, 0));
    int64_t n = t.param.rows(), m = t.param.cols();
    t.rank = std::min({n, m, int64_t(rank)});
    t.compressed = double((n + m) * t.rank) * 2.0 < double(n * m);
    total += n * m;
    totalAfter += t.compressed ? (n + m) * t.rank : n * m;
    if (t.compressed) {
      t.p = state("p." + t.param.name, DDPRT_F32, n * t.rank);
      t.q = state("q." + t.param.name, DDPRT_F32, m * t.rank);
      t.error = state("error." + t.param.name, DDPRT_F32, n * m);
      // Kept between steps: the error and Q (warm start); P lives for one
      // step (a state here only so that the same code runs on both
      // backends).
      persistentBytes += 4 * (m * t.rank + n * m);
      CHECK(ddprt_random_normal(context, &t.q, 0, i, 0));
    }
  }
  CHECK(ddprt_synchronize(context));
  std::vector<Bucket> buckets = makeBuckets(tensors);
  int64_t compressedElements = 0;
  for (Tensor &t : tensors)
    if (t.compressed)
      compressedElements += t.param.numel();
  double usedBeforeSteps = deviceBytesUsed();

  // Bytes the local passes move per step (reads + writes), to set against
  // a device-to-device copy: fp16 casts f32 -> f16 and back (12 bytes per
  // element); PowerSGD reads G and E in project, backproject and
  // reconstruct, and writes E and G once (32 bytes per compressed element).
  struct Kind {
    const char *name;
    void (*step)(std::vector<Bucket> &);
    double bytesMoved;
  } kinds[] = {{"allreduce", plainStep, 0.0},
               {"fp16", fp16Step, 12.0 * double(total)},
               {"powersgd", powerSGDStep, 32.0 * double(compressedElements)}};
  if (me == 0)
    std::printf("model %s: %zu tensors, %lld elements, %zu buckets, %d ranks, "
                "%s backend; PowerSGD rank %d sends %lld elements (%.1fx) and "
                "keeps %.1f MB of state (error, Q: %.3fx the compressed "
                "gradients)\n",
                model.c_str(), params.size(), (long long)total, buckets.size(),
                ddprt_world_size(context), backend.c_str(), rank,
                (long long)totalAfter, double(total) / double(totalAfter),
                persistentBytes / 1e6,
                double(persistentBytes) / (4.0 * double(compressedElements)));
  if (me == 0 && options.simulated_link_gbps > 0)
    std::printf("simulated link %g Gb/s, %g us: every figure below includes "
                "it (collectives held to latency + bytes / bandwidth)\n",
                options.simulated_link_gbps, options.simulated_link_latency_us);
  auto freshGradients = [&] {
    // A same-type cast is a copy; outside the clock.
    std::vector<ddprt_buffer> from, to;
    for (Tensor &t : tensors) {
      from.push_back(t.fresh);
      to.push_back(t.grad);
    }
    CHECK(ddprt_cast(context, DDPRT_SCALE_NONE, from.data(), to.data(),
                     int(from.size())));
    CHECK(ddprt_synchronize(context));
  };
  for (Kind &kind : kinds) {
    if (!onlyKinds.empty() &&
        ("," + onlyKinds + ",").find("," + std::string(kind.name) + ",") ==
            std::string::npos)
      continue;
    std::vector<double> times;
    ddprt_reset_counters(context);
    for (int s = 0; s < steps + 2; ++s) {
      freshGradients();
      barrier();
      auto start = std::chrono::steady_clock::now();
      kind.step(buckets);
      CHECK(ddprt_synchronize(context));
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      double slowest = slowestRank(seconds);
      if (s >= 2) // two warm-up steps
        times.push_back(slowest);
    }
    ddprt_counters counters = DDPRT_COUNTERS_INITIALIZER;
    ddprt_get_counters(context, &counters);
    uint64_t bytes = 0;
    for (int role = 0; role < DDPRT_ROLE_COUNT; ++role)
      bytes += counters.bytes_sent[role];
    if (me == 0)
      std::printf("ddprt %-10s median %8.2f ms  min %8.2f ms  sent %7.2f "
                  "MB/step  local passes %.2f GB, %.1f GB/s\n",
                  kind.name, 1e3 * median(times),
                  1e3 * *std::min_element(times.begin(), times.end()),
                  double(bytes) / (steps + 2) / 1e6, kind.bytesMoved / 1e9,
                  kind.bytesMoved / median(times) / 1e9);
    if (wantProfile) {
      constexpr int kProfiledSteps = 3;
      profiling = true;
      phaseSeconds.clear();
      for (int s = 0; s < kProfiledSteps; ++s) {
        freshGradients();
        kind.step(buckets);
      }
      profiling = false;
      if (me == 0) {
        std::printf("ddprt %-10s profile (each call synchronized), ms/step:",
                    kind.name);
        for (auto &[name, seconds] : phaseSeconds)
          std::printf("  %s %.3f", name.c_str(),
                      1e3 * seconds / kProfiledSteps);
        std::printf("\n");
      }
    }
  }
  if (me == 0 && backend == "cuda")
    std::printf("ddprt device memory beyond the gradients and states: %.1f MB "
                "(the runtime's scratch after every kind ran)\n",
                (deviceBytesUsed() - usedBeforeSteps) / 1e6);
  ddprt_finalize(context);
#if defined(DDPRT_HAVE_MPI)
  MPI_Finalize();
#endif
  return 0;
}
