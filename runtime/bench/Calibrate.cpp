//===- Calibrate.cpp - a machine profile for planning compression ---------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Measures what a planner needs to choose a compression per bucket on the
// machine at hand, through the C ABI alone, and writes it as one JSON
// profile (docs/runtime.md, "A machine profile"):
//  - collectives: ddprt_allreduce (mean) of f32, f16 and bf16 and
//    ddprt_allgather of i8 over a geometric range of sizes, the median of a
//    few repetitions of the slowest rank, fitted to
//        time = latency + factor * bytes / bandwidth
//    where `factor` is what the ring sends per byte of payload (allreduce:
//    2 (W - 1) / W; allgather of B bytes from each rank: W - 1), so that
//    the bandwidth reported is the link's, reusable for any world size;
//  - kernels: ddprt_project, ddprt_backproject (with error feedback, the
//    fused M = G + E path), ddprt_orthogonalize and ddprt_reconstruct for
//    a few (n, m, r) shapes, ddprt_cast f32 -> f16 and ddprt_scale f32.
//
//   ddprt-calibrate --np=W [--backend=cpu|cuda] [--out=PATH]
//       [--min-bytes=N] [--max-bytes=N] [--reps=N] [--world=W]
//       [--kernel-shapes=NxMxR,...] [--kernel-elements=N]
//       [--kernel-working-set=N] [--kernels-only]
//       [--simulated-link=GBPS,LATENCY_US]
//   ddprt-calibrate --hand --link-gbps=X --latency-us=Y --world=W --out=PATH
//
// --np=W starts the W ranks under mpirun itself (as ddp-run does); under a
// hand-written `mpirun -np W` it is not needed. --hand writes a profile from
// given link figures without measuring (no MPI, no runtime context): for
// planning a cluster one is not on. The run ends with a verdict: whether
// the fits describe the measured times well enough for ddp-plan to order
// its choices, and what to do if not (also in the profile, "verdict").
//
//===----------------------------------------------------------------------===//

#include "CalibrationProfile.h"
#include "Launch.h"
#include "ddprt/ddprt.h"

#if defined(DDPRT_HAVE_MPI)
#include <mpi.h>
#endif

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using namespace ddprt::bench;

constexpr const char *kUsage =
    "usage: ddprt-calibrate --np=W [--hostfile=FILE] [--backend=cpu|cuda]\n"
    "         [--out=PATH]\n"
    "         [--min-bytes=N] [--max-bytes=N] [--reps=N] [--world=W]\n"
    "         [--kernel-shapes=NxMxR,...] [--kernel-elements=N]\n"
    "         [--kernel-working-set=N] [--kernels-only]\n"
    "         [--simulated-link=GBPS,LATENCY_US]\n"
    "       ddprt-calibrate --hand --link-gbps=X --latency-us=Y --world=W\n"
    "         --out=PATH\n"
    "Measures the machine profile ddp-plan reads: the collectives over\n"
    "--min-bytes..--max-bytes (4..16M), fitted to latency + bytes /\n"
    "bandwidth, and the compression kernels on a --kernel-working-set\n"
    "(256M) of matrices of each --kernel-shapes (4096x1024x{1,2,4,8}),\n"
    "each the median of --reps (5) timed calls of the slowest rank. --np=W\n"
    "starts W ranks under mpirun (or run it under mpirun -np W yourself),\n"
    "on the hosts of mpirun's --hostfile when one is given.\n"
    "It ends with a verdict on whether the profile is fit for planning.\n"
    "Sizes take a K, M or G suffix (KiB, MiB, GiB).\n";

ddprt_context *context = nullptr;

/// Stops every rank the same way: each parses the same arguments and sees
/// the same failures, so no rank waits in a collective for one that left.
[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "ddprt-calibrate: %s\n", message.c_str());
  if (context)
    ddprt_finalize(context);
#if defined(DDPRT_HAVE_MPI)
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    MPI_Finalize();
#endif
  std::exit(2);
}

void check(ddprt_status status, const char *what) {
  if (status != DDPRT_OK)
    fail(std::string(what) + " failed: " + ddprt_status_string(status) + " (" +
         ddprt_last_error(context) + ")");
}

/// A number of bytes or elements >= 1, with an optional K, M or G suffix
/// (powers of 1024).
bool parseCount(const std::string &text, int64_t &value) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
    return false;
  char *end = nullptr;
  unsigned long long number = std::strtoull(text.c_str(), &end, 10);
  std::string suffix(end);
  int shift = suffix.empty()  ? 0
              : suffix == "K" ? 10
              : suffix == "M" ? 20
              : suffix == "G" ? 30
                              : -1;
  if (shift < 0 || number == 0 || number > (1ull << 40) >> shift)
    return false;
  value = int64_t(number << shift);
  return true;
}

bool parseNumber(const std::string &text, double &value) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])))
    return false;
  char *end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(value);
}

struct Options {
  std::string backend = "cpu";
  std::string out;
  int64_t minBytes = 4;
  int64_t maxBytes = 16 << 20;
  int64_t reps = 5;
  int64_t world = 0; // 0: whatever mpirun started
  // Ranks 1 to 8 at one size, each call over --kernel-working-set: time is
  // not proportional to r (the kernels read the whole matrix whatever r
  // is), so a planner needs several ranks; it scales the size.
  std::vector<Shape> shapes = {
      {4096, 1024, 1}, {4096, 1024, 2}, {4096, 1024, 4}, {4096, 1024, 8}};
  int64_t kernelElements = 1 << 22;
  /// Bytes each timed kernel call works on: as many matrices of a shape
  /// (gradient and error) as fit, in one multi-tensor call, as a step
  /// streams a model's gradients, far larger than the caches, through each
  /// kernel (8x the caches of a 32 MiB-L3 server, a quarter of the time
  /// of a GiB).
  int64_t workingSet = int64_t(256) << 20;
  bool kernelsOnly = false;
  double linkGbps = 0.0, linkLatencyUs = 0.0; // --simulated-link; 0: off
  bool hand = false;
  double handGbps = 0.0, handLatencyUs = -1.0;
};

std::vector<Shape> parseShapes(const std::string &text) {
  std::vector<Shape> shapes;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t comma = text.find(',', begin);
    std::string item = text.substr(begin, comma - begin);
    size_t x1 = item.find('x'), x2 = item.find('x', x1 + 1);
    Shape shape{};
    if (x1 == std::string::npos || x2 == std::string::npos ||
        !parseCount(item.substr(0, x1), shape.n) ||
        !parseCount(item.substr(x1 + 1, x2 - x1 - 1), shape.m) ||
        !parseCount(item.substr(x2 + 1), shape.r) ||
        shape.r > std::min(shape.n, shape.m))
      fail("--kernel-shapes: '" + item +
           "' is not NxMxR with 1 <= R <= min(N, M)");
    shapes.push_back(shape);
    if (comma == std::string::npos)
      break;
    begin = comma + 1;
  }
  return shapes;
}

/// A number as the user would write it (%g).
std::string formatValue(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

Options parseOptions(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    size_t equals = arg.find('=');
    std::string key = arg.substr(0, equals);
    std::string value =
        equals == std::string::npos ? "" : arg.substr(equals + 1);
    auto count = [&](int64_t &field) {
      if (!parseCount(value, field))
        fail(key + ": '" + value + "' is not a count >= 1 (K, M, G suffixes)");
    };
    auto number = [&](double &field) {
      if (!parseNumber(value, field))
        fail(key + ": '" + value + "' is not a number");
    };
    std::string error;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--version") {
      std::printf("ddprt-calibrate (ddp-opt %s)\n", DDP_VERSION_STRING);
      std::exit(0);
    } else if (key == "--backend")
      options.backend = value;
    else if (key == "--out")
      options.out = value;
    else if (key == "--min-bytes")
      count(options.minBytes);
    else if (key == "--max-bytes")
      count(options.maxBytes);
    else if (key == "--reps")
      count(options.reps);
    else if (key == "--world")
      count(options.world);
    else if (key == "--kernel-shapes")
      options.shapes = parseShapes(value);
    else if (key == "--kernel-elements")
      count(options.kernelElements);
    else if (key == "--kernel-working-set")
      count(options.workingSet);
    else if (arg == "--kernels-only")
      options.kernelsOnly = true;
    else if (key == "--simulated-link") {
      const char *why = nullptr;
      if (ddprt_parse_simulated_link(value.c_str(), &options.linkGbps,
                                     &options.linkLatencyUs, &why) != DDPRT_OK)
        fail("--simulated-link: " + std::string(why ? why : value));
    } else if (arg == "--hand")
      options.hand = true;
    else if (key == "--np" || key == "-np" || key == "--hostfile" ||
             key == "-hostfile") {
      // Read by parseLaunchOptions in main; `--np W` takes the next
      // argument.
      if (equals == std::string::npos)
        ++i;
    } else if (key == "--link-gbps")
      number(options.handGbps);
    else if (key == "--latency-us")
      number(options.handLatencyUs);
    else
      fail("unknown argument '" + arg + "'\n" + kUsage);
  }
  if (options.backend != "cpu" && options.backend != "cuda")
    fail("--backend: unknown backend '" + options.backend + "' (cpu or cuda)");
  if (options.minBytes % 4 != 0 || options.maxBytes % 4 != 0 ||
      options.minBytes >= options.maxBytes)
    fail("--min-bytes and --max-bytes must be multiples of 4 (whole elements "
         "of every dtype), with min < max (a fit needs two sizes)");
  if (options.hand) {
    if (options.handGbps <= 0.0 || options.handLatencyUs < 0.0 ||
        options.world < 2 || options.out.empty())
      fail("--hand needs --link-gbps=X (> 0), --latency-us=Y (>= 0), "
           "--world=W (>= 2) and --out=PATH");
    // The ranges a simulated link has (1e308 Gb/s would be written as inf,
    // not JSON, and 1e-320 as 0): what ddp-opt --ddp-plan reads back.
    // Checked as the runtime checks a simulated link, through its parser.
    char text[64];
    std::snprintf(text, sizeof text, "%.17g,%.17g", options.handGbps,
                  options.handLatencyUs);
    double gbps = 0.0, latencyUs = 0.0;
    const char *why = nullptr;
    if (ddprt_parse_simulated_link(text, &gbps, &latencyUs, &why) != DDPRT_OK) {
      // The parser names the text it was given; ours is the two options.
      std::string reason = why ? why : "not a link";
      std::string quoted = "'" + std::string(text) + "': ";
      if (reason.compare(0, quoted.size(), quoted) == 0)
        reason.erase(0, quoted.size());
      fail("--hand: --link-gbps=" + formatValue(options.handGbps) +
           ", --latency-us=" + formatValue(options.handLatencyUs) + ": " +
           reason);
    }
  }
  return options;
}

double seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

/// The slowest rank's time: a collective is over when it is over everywhere.
double slowestRank(double value) {
#if defined(DDPRT_HAVE_MPI)
  double slowest = 0;
  MPI_Allreduce(&value, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
#else
  return value;
#endif
}

/// Lines up the ranks before a timed call. The runtime makes no MPI call
/// after ddprt_synchronize until the next collective, so the tool may.
void barrier() {
  check(ddprt_synchronize(context), "ddprt_synchronize");
#if defined(DDPRT_HAVE_MPI)
  MPI_Barrier(MPI_COMM_WORLD);
#endif
}

/// The median over `reps` timed calls (after one warm-up) of the slowest
/// rank, each call lined up by a barrier and ended by ddprt_synchronize.
template <typename Call> double timeCall(int64_t reps, Call call) {
  std::vector<double> times;
  for (int64_t i = 0; i <= reps; ++i) {
    barrier();
    auto start = std::chrono::steady_clock::now();
    call();
    check(ddprt_synchronize(context), "ddprt_synchronize");
    double slowest = slowestRank(seconds(start));
    if (i > 0)
      times.push_back(slowest);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Memory the runtime and the host both address (device memory on CUDA),
/// filled with standard normal samples so that no kernel meets a NaN.
void *randomBuffer(ddprt_dtype dtype, int64_t numel, uint64_t stream) {
  int bytes = dtype == DDPRT_F32 ? 4 : dtype == DDPRT_I8 ? 1 : 2;
  void *data = nullptr;
  check(ddprt_alloc(context, size_t(numel * bytes), &data), "ddprt_alloc");
  if (dtype == DDPRT_I8) {
    std::memset(data, 1, size_t(numel)); // managed memory on CUDA
    return data;
  }
  ddprt_buffer buffer{data, dtype, numel};
  check(ddprt_random_normal(context, &buffer, 7, stream, 0),
        "ddprt_random_normal");
  return data;
}

/// What a ring sends per byte of payload: allreduce of B bytes,
/// 2 (W - 1) / W * B; allgather of B bytes from each rank, (W - 1) B.
std::vector<int64_t> geometricSizes(const Options &options) {
  std::vector<int64_t> sizes;
  for (int64_t bytes = options.minBytes; bytes < options.maxBytes; bytes *= 4)
    sizes.push_back(bytes);
  sizes.push_back(options.maxBytes);
  return sizes;
}

CollectiveResult measureCollective(const Options &options, const char *name,
                                   ddprt_dtype dtype, int elementBytes,
                                   bool allgather, int world) {
  CollectiveResult result;
  result.name = name;
  result.factor = ringFactor(allgather, world);
  int64_t maxElements = options.maxBytes / elementBytes;
  void *input = randomBuffer(dtype, maxElements, 1);
  void *output = nullptr;
  if (allgather)
    check(
        ddprt_alloc(context, size_t(options.maxBytes) * size_t(world), &output),
        "ddprt_alloc");
  // f32 as a plain bucket is sent (mean); f16 and bf16 as the compression
  // passes send them: divided by W when cast, then summed.
  ddprt_reduction reduction = dtype == DDPRT_F32 ? DDPRT_MEAN : DDPRT_SUM;
  for (int64_t bytes : geometricSizes(options)) {
    int64_t numel = bytes / elementBytes;
    ddprt_buffer in{input, dtype, numel};
    ddprt_buffer out{output, dtype, numel * world};
    double median = timeCall(options.reps, [&] {
      if (allgather)
        check(ddprt_allgather(context, DDPRT_ROLE_COMPRESSED, &in, &out, 1),
              "ddprt_allgather");
      else
        check(ddprt_allreduce(context, reduction, DDPRT_ROLE_GRADIENT, &in, 1),
              "ddprt_allreduce");
    });
    result.points.push_back({double(bytes), median});
  }
  result.fit = fitLine(result.points);
  ddprt_free(context, input);
  if (output)
    ddprt_free(context, output);
  return result;
}

std::vector<KernelResult> measureKernels(const Options &options) {
  std::vector<KernelResult> results;
  for (const Shape &s : options.shapes) {
    // As many gradient/error pairs as the working set holds, in one call.
    int64_t count = std::max<int64_t>(1, options.workingSet / (8 * s.n * s.m));
    std::vector<ddprt_matrix> g, e, p, q;
    for (int64_t i = 0; i < count; ++i) {
      uint64_t stream = 4 * uint64_t(i);
      g.push_back({randomBuffer(DDPRT_F32, s.n * s.m, stream + 2), DDPRT_F32,
                   s.n, s.m});
      e.push_back({randomBuffer(DDPRT_F32, s.n * s.m, stream + 3), DDPRT_F32,
                   s.n, s.m});
      p.push_back({randomBuffer(DDPRT_F32, s.n * s.r, stream + 4), DDPRT_F32,
                   s.n, s.r});
      q.push_back({randomBuffer(DDPRT_F32, s.m * s.r, stream + 5), DDPRT_F32,
                   s.m, s.r});
    }
    int k = int(count);
    auto add = [&](const char *name, int64_t elements, auto call) {
      results.push_back(
          {name, s, count, elements * count, timeCall(options.reps, call)});
    };
    // The error-feedback path PowerSGD runs: M = G + E read in the pass.
    add("project", s.n * s.m, [&] {
      check(ddprt_project(context, g.data(), e.data(), q.data(), p.data(), k),
            "ddprt_project");
    });
    add("orthogonalize", s.n * s.r, [&] {
      check(ddprt_orthogonalize(context, p.data(), k, 0.0),
            "ddprt_orthogonalize");
    });
    add("backproject", s.n * s.m, [&] {
      check(
          ddprt_backproject(context, g.data(), e.data(), p.data(), q.data(), k),
          "ddprt_backproject");
    });
    // In place, as compiled steps decompress: G = P Q^T, E = G + E - P Q^T.
    add("reconstruct", s.n * s.m, [&] {
      check(ddprt_reconstruct(context, p.data(), q.data(), g.data(), e.data(),
                              g.data(), k),
            "ddprt_reconstruct");
    });
    for (auto *list : {&g, &e, &p, &q})
      for (ddprt_matrix &matrix : *list)
        ddprt_free(context, matrix.data);
  }
  // The element-wise kernels over the working set too (f32 in, f16 out).
  int64_t n = std::max(options.kernelElements, options.workingSet / 6);
  ddprt_buffer wide{randomBuffer(DDPRT_F32, n, 6), DDPRT_F32, n};
  ddprt_buffer narrow{randomBuffer(DDPRT_F16, n, 7), DDPRT_F16, n};
  results.push_back(
      {"cast_f32_f16", {}, 1, n, timeCall(options.reps, [&] {
         check(ddprt_cast(context, DDPRT_SCALE_NONE, &wide, &narrow, 1),
               "ddprt_cast");
       })});
  // bf16 on its own: where the CPU has F16C but no bf16 conversion, it
  // converts slower than f16 (ddp-plan's bf16 choices use it).
  ddprt_buffer brain{randomBuffer(DDPRT_BF16, n, 9), DDPRT_BF16, n};
  results.push_back(
      {"cast_f32_bf16", {}, 1, n, timeCall(options.reps, [&] {
         check(ddprt_cast(context, DDPRT_SCALE_NONE, &wide, &brain, 1),
               "ddprt_cast");
       })});
  // Alternately by 1/W and W, so that the values stay where they were.
  int turn = 0;
  results.push_back({"scale_f32", {}, 1, n, timeCall(options.reps, [&] {
                       check(ddprt_scale(context,
                                         turn++ % 2
                                             ? DDPRT_SCALE_WORLD_SIZE
                                             : DDPRT_SCALE_INVERSE_WORLD_SIZE,
                                         &wide, 1),
                             "ddprt_scale");
                     })});
  // Top-k selection (insert-topk) of 1% of the working set, i32 indices:
  // ddp-plan's cost of the top-k scheme's kernel.
  int64_t k = std::max<int64_t>(1, n / 100);
  ddprt_buffer values{randomBuffer(DDPRT_F32, k, 8), DDPRT_F32, k};
  ddprt_buffer indices{nullptr, DDPRT_I32, k};
  check(ddprt_alloc(context, size_t(k) * 4, &indices.data), "ddprt_alloc");
  results.push_back({"top_k_f32", {}, 1, n, timeCall(options.reps, [&] {
                       check(ddprt_top_k(context, &wide, &values, &indices),
                             "ddprt_top_k");
                     })});
  for (void *data :
       {wide.data, narrow.data, brain.data, values.data, indices.data})
    ddprt_free(context, data);
  return results;
}

std::FILE *openOut(const std::string &path) {
  if (path.empty())
    return nullptr;
  return std::fopen(path.c_str(), "w");
}

void finish(std::FILE *file, const Options &options, Profile &profile) {
  profile.verdict = judge(profile);
  printSummary(profile);
  std::printf("verdict: %s\n", profile.verdict.text.c_str());
  if (!file)
    return;
  writeProfile(file, profile);
  if (std::fclose(file) != 0)
    fail("--out: cannot write '" + options.out + "'");
  std::printf("wrote %s\n", options.out.c_str());
}

/// A profile from given link figures: every collective with the same link,
/// no points, no kernels (those belong to the target machine's own
/// measured profile: --kernels-only there).
int handProfile(const Options &options) {
  std::FILE *file = openOut(options.out);
  if (!file)
    fail("--out: cannot open '" + options.out +
         "' for writing: " + std::strerror(errno));
  Profile profile;
  profile.mode = "hand";
  profile.world = int(options.world);
  for (const char *name :
       {"allreduce_f32", "allreduce_f16", "allreduce_bf16", "allgather_i8"}) {
    CollectiveResult c;
    c.name = name;
    c.factor =
        ringFactor(std::strncmp(name, "allgather", 9) == 0, profile.world);
    c.fit.latency = options.handLatencyUs * 1e-6;
    c.fit.slope = c.factor * 8.0 / (options.handGbps * 1e9);
    profile.collectives.push_back(c);
  }
  finish(file, options, profile);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options options = parseOptions(argc, argv);
  // Its ranks report no errors to the launcher: no deadline after one.
  stephost::LaunchOptions launch;
  std::string launchError;
  if (!stephost::parseLaunchOptions(argc, argv, launch, launchError))
    fail(launchError);
  if (options.hand)
    return handProfile(options);
  if (launch.ranks > 0 && !stephost::insideMpiJob())
    return stephost::launchUnderMpirun("ddprt-calibrate", argc, argv, launch);
#if defined(DDPRT_HAVE_MPI)
  // As ddprt_init would: the runtime's communication thread calls MPI.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
#else
  int rank = 0, world = 1;
#endif
  if (world == 1 && !options.kernelsOnly)
    fail("measuring collectives needs 2 or more ranks: give --np=W (W >= 2) "
         "or run under mpirun -np W, or pass --kernels-only or --hand");
  if (options.world && options.world != world)
    fail("--world=" + std::to_string(options.world) + " but this job has " +
         std::to_string(world) + " ranks (give --np=" +
         std::to_string(options.world) + ")");
  // Rank 0 writes the profile: find out before measuring that it can.
  std::FILE *file = rank == 0 ? openOut(options.out) : nullptr;
  int outFailed = rank == 0 && !options.out.empty() && !file;
  std::string why = outFailed ? std::strerror(errno) : "";
#if defined(DDPRT_HAVE_MPI)
  MPI_Bcast(&outFailed, 1, MPI_INT, 0, MPI_COMM_WORLD);
#endif
  if (outFailed)
    fail("--out: cannot open '" + options.out + "' for writing" +
         (why.empty() ? "" : ": " + why));

  ddprt_options runtimeOptions;
  ddprt_default_options(&runtimeOptions);
  runtimeOptions.backend =
      options.backend == "cuda" ? DDPRT_BACKEND_CUDA : DDPRT_BACKEND_CPU;
  // Only the collective itself: the shape check would add a second
  // collective (and a second latency) to each.
  runtimeOptions.check_shapes = 0;
  runtimeOptions.simulated_link_gbps = options.linkGbps;
  runtimeOptions.simulated_link_latency_us = options.linkLatencyUs;
  check(ddprt_init(&runtimeOptions, &context), "ddprt_init");
  // The link the runtime models (DDPRT_SIMULATED_LINK applied).
  check(ddprt_get_options(context, &runtimeOptions), "ddprt_get_options");

  Profile profile;
  profile.mode = "measured";
  profile.backend = options.backend;
  profile.world = world;
  profile.linkGbps = runtimeOptions.simulated_link_gbps;
  profile.linkLatencyUs = runtimeOptions.simulated_link_latency_us;
  if (!options.kernelsOnly) {
    profile.collectives.push_back(measureCollective(
        options, "allreduce_f32", DDPRT_F32, 4, false, world));
    profile.collectives.push_back(measureCollective(
        options, "allreduce_f16", DDPRT_F16, 2, false, world));
    profile.collectives.push_back(measureCollective(
        options, "allreduce_bf16", DDPRT_BF16, 2, false, world));
    profile.collectives.push_back(
        measureCollective(options, "allgather_i8", DDPRT_I8, 1, true, world));
  }
  profile.workingSet = options.workingSet;
  profile.kernels = measureKernels(options);
  groupKernels(profile.kernels);
  if (rank == 0)
    finish(file, options, profile);
  check(ddprt_finalize(context), "ddprt_finalize");
  context = nullptr;
#if defined(DDPRT_HAVE_MPI)
  MPI_Finalize();
#endif
  return 0;
}
