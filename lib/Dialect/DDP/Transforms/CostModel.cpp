//===- CostModel.cpp - predicted cost of a bucket's communication --------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Dialect/DDP/Transforms/CostModel.h"

#include "ddp/Dialect/DDP/Transforms/Utils.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::ddp;

namespace {
/// Reads one profile file; `error` names the file and the first problem.
class ProfileReader {
public:
  ProfileReader(StringRef path, std::string &error)
      : path(path), error(error) {}

  std::optional<llvm::json::Object> read() {
    // A profile is a few kilobytes, nested four deep; anything far larger
    // or deeper is refused before it is read whole or parsed.
    std::string readError;
    FailureOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
        readBoundedFile(path, size_t(16) << 20, "profile", readError);
    if (mlir::failed(buffer)) {
      fail(readError);
      return std::nullopt;
    }
    std::string tooDeep = checkJsonNesting((*buffer)->getBuffer(), 64);
    if (!tooDeep.empty()) {
      fail("not a profile: " + tooDeep);
      return std::nullopt;
    }
    llvm::Expected<llvm::json::Value> value =
        llvm::json::parse((*buffer)->getBuffer());
    if (!value) {
      fail("not JSON: " + llvm::toString(value.takeError()));
      return std::nullopt;
    }
    llvm::json::Object *object = value->getAsObject();
    if (!object) {
      fail("not a JSON object");
      return std::nullopt;
    }
    if (object->getInteger("version") != 1) {
      fail("'version' is not 1 (a profile written by ddprt-calibrate)");
      return std::nullopt;
    }
    return std::move(*object);
  }

  /// A finite number >= `min` (> `min` if `strict`) and <= `max` at `key`
  /// of `object`. The upper bounds are far past any machine (a link of 1
  /// Pb/s, a call of a day) and keep every prediction made from the profile
  /// within what nanoseconds in an int64 hold.
  bool number(const llvm::json::Object &object, StringRef where, StringRef key,
              double &out, double min = 0.0, bool strict = false,
              double max = 1e15) {
    std::optional<double> value = object.getNumber(key);
    if (!value || !std::isfinite(*value) || *value < min ||
        (strict && *value == min) || *value > max) {
      fail(llvm::formatv("{0}: '{1}' is missing or not a number {2} {3} and "
                         "<= {4}",
                         where, key, strict ? ">" : ">=", formatNumber(min),
                         formatNumber(max))
               .str());
      return false;
    }
    out = *value;
    return true;
  }

  /// A collective's link fields: up to 1000 s of latency, from 1 Mb/s to
  /// 1 Pb/s, and the ring factor and worst residual ddprt-calibrate writes.
  bool link(const llvm::json::Object &entry, StringRef where,
            double &latencyUs, double &gbps) {
    return number(entry, where, "latency_us", latencyUs, 0.0, false, 1e9) &&
           number(entry, where, "gbps", gbps, 1e-3, false, 1e6) &&
           optionalNumber(entry, where, "ring_factor", 0.0, true, 1e3) &&
           optionalNumber(entry, where, "max_relative_residual", 0.0, false,
                          1e3);
  }

  /// As number(), for a field that may be absent; present, it must hold.
  bool optionalNumber(const llvm::json::Object &object, StringRef where,
                      StringRef key, double min, bool strict, double max) {
    if (!object.get(key))
      return true;
    double ignored;
    return number(object, where, key, ignored, min, strict, max);
  }

  /// An integer in [min, max] at `key`, or `fallback` if absent; a value of
  /// another type (a string, a fraction) is an error, not the fallback.
  bool integer(const llvm::json::Object &object, StringRef where,
               StringRef key, int64_t &out, int64_t fallback, int64_t min,
               int64_t max) {
    const llvm::json::Value *value = object.get(key);
    if (!value) {
      out = fallback;
      return true;
    }
    std::optional<int64_t> number = value->getAsInteger();
    if (!number || *number < min || *number > max) {
      fail(llvm::formatv("{0}: '{1}' is not an integer from {2} to {3}", where,
                         key, min, max)
               .str());
      return false;
    }
    out = *number;
    return true;
  }

  void fail(const Twine &message) {
    if (error.empty())
      error = ("machine profile '" + path + "': " + message).str();
  }

  bool failed() const { return !error.empty(); }

private:
  StringRef path;
  std::string &error;
};
} // namespace

FailureOr<MachineProfile> MachineProfile::load(StringRef path,
                                               StringRef kernelsPath,
                                               std::string &error) {
  MachineProfile profile;
  ProfileReader reader(path, error);
  std::optional<llvm::json::Object> top = reader.read();
  if (!top)
    return failure();
  std::optional<int64_t> world = top->getInteger("world_size");
  if (!world || *world < 1 || *world > (int64_t(1) << 24)) {
    reader.fail("'world_size' is missing or not a count from 1 to 16777216");
    return failure();
  }
  profile.worldSize = *world;
  // The descriptive fields are strings (or absent); simulated_link an
  // object or null.
  for (StringRef key : {"mode", "backend", "date"})
    if (const llvm::json::Value *value = top->get(key);
        value && !value->getAsString() && !value->getAsNull()) {
      reader.fail("'" + key + "' is not a string");
      return failure();
    }
  if (const llvm::json::Value *link = top->get("simulated_link");
      link && !link->getAsObject() && !link->getAsNull()) {
    reader.fail("'simulated_link' is neither an object nor null");
    return failure();
  }
  const llvm::json::Value *collectivesValue = top->get("collectives");
  const llvm::json::Object *collectives =
      collectivesValue ? collectivesValue->getAsObject() : nullptr;
  if (!collectives) {
    reader.fail(collectivesValue ? "'collectives' is not an object"
                                 : "'collectives' is missing");
    return failure();
  }
  for (StringRef name : {"allreduce_f32", "allreduce_f16", "allreduce_bf16"}) {
    const llvm::json::Object *entry = collectives->getObject(name);
    if (!entry) {
      reader.fail("'collectives' has no '" + name + "'");
      return failure();
    }
    CollectiveCost cost;
    double latencyUs = 0.0, gbps = 0.0;
    std::string where = ("collectives." + name).str();
    if (!reader.link(*entry, where, latencyUs, gbps))
      return failure();
    cost.latencySeconds = latencyUs * 1e-6;
    cost.bytesPerSecond = gbps * 1e9 / 8.0;
    if (const llvm::json::Value *value = entry->get("points");
        value && !value->getAsArray()) {
      reader.fail(where + ".points is not a list of [bytes, seconds]");
      return failure();
    }
    if (const llvm::json::Array *points = entry->getArray("points")) {
      for (const llvm::json::Value &point : *points) {
        const llvm::json::Array *pair = point.getAsArray();
        std::optional<double> bytes, seconds;
        if (pair && pair->size() == 2) {
          bytes = (*pair)[0].getAsNumber();
          seconds = (*pair)[1].getAsNumber();
        }
        if (!bytes || !seconds || !(*bytes > 0) || !(*seconds > 0) ||
            !(*bytes <= 1e15) || !(*seconds <= 1e5)) {
          reader.fail(where + ".points: each point is [bytes > 0 and <= "
                              "1e15, seconds > 0 and <= 1e5]");
          return failure();
        }
        cost.points.push_back({*bytes, *seconds});
      }
      llvm::sort(cost.points);
    }
    profile.collectives[name] = std::move(cost);
  }
  // Written by ddprt-calibrate (bytes are bytes: any element type's
  // allgather), optional: only schemes that gather need it.
  if (const llvm::json::Value *gather = collectives->get("allgather_i8")) {
    const llvm::json::Object *entry = gather->getAsObject();
    if (!entry) {
      reader.fail("collectives.allgather_i8 is not an object");
      return failure();
    }
    double latencyUs, gbps;
    if (!reader.link(*entry, "collectives.allgather_i8", latencyUs, gbps))
      return failure();
    profile.allgather = CollectiveCost();
    profile.allgather->latencySeconds = latencyUs * 1e-6;
    profile.allgather->bytesPerSecond = gbps * 1e9 / 8.0;
  }

  // The kernels: from the profile or from a second one (a --hand profile
  // has none: kernels belong to the machine that runs them).
  std::optional<llvm::json::Object> kernelTop;
  ProfileReader kernelReader(kernelsPath.empty() ? path : kernelsPath, error);
  const llvm::json::Object *kernels = nullptr;
  if (kernelsPath.empty()) {
    kernels = top->getObject("kernels");
  } else {
    kernelTop = kernelReader.read();
    if (!kernelTop)
      return failure();
    kernels = kernelTop->getObject("kernels");
  }
  if (!kernels) {
    kernelReader.fail("'kernels' is missing");
    return failure();
  }
  for (const auto &[key, value] : *kernels) {
    const llvm::json::Array *entries = value.getAsArray();
    std::string where = "kernels." + key.str();
    if (!entries) {
      kernelReader.fail(where + " is not a list");
      return failure();
    }
    SmallVector<KernelCost> &list = profile.kernels[key.str()];
    for (const llvm::json::Value &item : *entries) {
      const llvm::json::Object *object = item.getAsObject();
      KernelCost cost;
      double elements = 0.0;
      if (!object) {
        kernelReader.fail(where + ": an entry is not an object");
        return failure();
      }
      constexpr int64_t kMaxExtent = int64_t(1) << 40;
      int64_t count = 1;
      if (!kernelReader.number(*object, where, "seconds", cost.seconds, 0.0,
                               true, 1e5) ||
          !kernelReader.number(*object, where, "elements", elements, 0.0,
                               true, 1e15) ||
          !kernelReader.optionalNumber(*object, where, "elements_per_second",
                                       0.0, true, 1e18) ||
          !kernelReader.integer(*object, where, "n", cost.n, 0, 1,
                                kMaxExtent) ||
          !kernelReader.integer(*object, where, "m", cost.m, 0, 1,
                                kMaxExtent) ||
          !kernelReader.integer(*object, where, "r", cost.r, 0, 1,
                                kMaxExtent) ||
          // Several matrices of the shape in one call: the time of one.
          !kernelReader.integer(*object, where, "count", count, 1, 1,
                                kMaxExtent))
        return failure();
      cost.elements = int64_t(elements);
      cost.seconds /= double(count);
      cost.elements /= count;
      if (cost.elements < 1) {
        kernelReader.fail(where + ": 'elements' is less than 'count' (each "
                                  "of the count's calls has no element)");
        return failure();
      }
      list.push_back(cost);
    }
  }
  for (StringRef name : {"project", "backproject", "orthogonalize",
                         "reconstruct", "cast_f32_f16", "scale_f32"}) {
    if (profile.kernels.empty())
      break; // a profile without kernels: checked where they are needed
    auto it = profile.kernels.find(name);
    bool shaped = name != "cast_f32_f16" && name != "scale_f32";
    if (it == profile.kernels.end() || it->second.empty() ||
        (shaped && llvm::any_of(it->second, [](const KernelCost &k) {
           return k.n < 1 || k.m < 1 || k.r < 1;
         }))) {
      kernelReader.fail(("'kernels' has no usable '" + name + "'").str());
      return failure();
    }
  }

  // The line reports print.
  std::string mode = top->getString("mode").value_or("?").str();
  std::string backend = top->getString("backend").value_or("?").str();
  profile.backend = backend;
  std::string link;
  if (const llvm::json::Object *simulated = top->getObject("simulated_link")) {
    double ignored;
    if (!reader.number(*simulated, "simulated_link", "gbps", ignored, 1e-3,
                       false, 1e6) ||
        !reader.number(*simulated, "simulated_link", "latency_us", ignored,
                       0.0, false, 1e9))
      return failure();
  }
  if (const llvm::json::Object *simulated = top->getObject("simulated_link"))
    link = llvm::formatv(", simulated link {0} Gb/s {1} us",
                         simulated->getNumber("gbps").value_or(0),
                         simulated->getNumber("latency_us").value_or(0))
               .str();
  const CollectiveCost &f32 = profile.collectives["allreduce_f32"];
  profile.description =
      llvm::formatv("{0} ({1}, {2}, {3} ranks{4}; allreduce f32 {5:F1} us + "
                    "{6:F3} Gb/s{7})",
                    path, mode, backend, profile.worldSize, link,
                    f32.latencySeconds * 1e6, f32.bytesPerSecond * 8 / 1e9,
                    kernelsPath.empty()
                        ? std::string()
                        : ("; kernels from " + kernelsPath).str())
          .str();
  return profile;
}

double MachineProfile::allreduceSeconds(Type element, double bytes,
                                        int64_t world) const {
  if (bytes <= 0.0 || world <= 1)
    return 0.0;
  StringRef name = element.isF16()    ? "allreduce_f16"
                   : element.isBF16() ? "allreduce_bf16"
                                      : "allreduce_f32";
  const CollectiveCost &cost = collectives.find(name)->second;
  double ring = 2.0 * double(world - 1) / double(world);
  double fit = cost.latencySeconds + ring * bytes / cost.bytesPerSecond;
  const auto &points = cost.points;
  if (world != worldSize || points.size() < 2)
    return fit;
  // Measured here: what was measured, between the points on a log-log line.
  if (bytes <= points.front().first)
    return points.front().second;
  if (bytes >= points.back().first)
    return points.back().second +
           ring * (bytes - points.back().first) / cost.bytesPerSecond;
  auto upper = llvm::upper_bound(
      points, bytes, [](double b, const std::pair<double, double> &point) {
        return b < point.first;
      });
  auto lower = std::prev(upper);
  double t = (std::log(bytes) - std::log(lower->first)) /
             (std::log(upper->first) - std::log(lower->first));
  return std::exp(std::log(lower->second) +
                  t * (std::log(upper->second) - std::log(lower->second)));
}

std::optional<double> MachineProfile::allgatherSeconds(double bytes,
                                                       int64_t world) const {
  if (!allgather)
    return std::nullopt;
  if (bytes <= 0.0 || world <= 1)
    return 0.0;
  // The ring: each rank receives the other W - 1 ranks' bytes.
  return allgather->latencySeconds +
         double(world - 1) * bytes / allgather->bytesPerSecond;
}

std::optional<double>
MachineProfile::measuredElementwiseSeconds(StringRef kernel,
                                           double elements) const {
  auto it = kernels.find(kernel);
  if (it == kernels.end() || it->second.empty())
    return std::nullopt;
  return elementwiseSeconds(kernel, elements);
}

double MachineProfile::narrowCastSeconds(Type narrow, double elements) const {
  if (narrow && narrow.isBF16())
    if (std::optional<double> seconds =
            measuredElementwiseSeconds("cast_f32_bf16", elements))
      return *seconds;
  return elementwiseSeconds("cast_f32_f16", elements);
}

double MachineProfile::bucketAllreduceSeconds(Type element,
                                              ArrayRef<double> bytes,
                                              int64_t world) const {
  if (backend != "cpu") {
    double total = 0.0;
    for (double b : bytes)
      total += b;
    return allreduceSeconds(element, total, world);
  }
  // runtime/lib/cpu/CpuBackend.cpp, reduce(): kSmallBytes.
  const double kSmallBytes = 64 * 1024;
  double seconds = 0.0, small = 0.0;
  for (double b : bytes) {
    if (b < kSmallBytes)
      small += b;
    else
      seconds += allreduceSeconds(element, b, world);
  }
  return seconds + allreduceSeconds(element, small, world);
}

double MachineProfile::kernelSeconds(StringRef kernel, int64_t n, int64_t m,
                                     int64_t r) const {
  auto it = kernels.find(kernel);
  if (it == kernels.end() || it->second.empty())
    return 0.0;
  // The matrix part of the work: n m (n for orthogonalize, which works on
  // the n x r P). In a step each matrix is streamed from memory once per
  // kernel (a model's gradients are far larger than the caches), so the
  // rate per element is that of the largest measured shape, whose buffers
  // do not fit in cache; smaller shapes are measured hot and would
  // flatter the kernels.
  bool orthogonalize = kernel == "orthogonalize";
  auto size = [&](double rows, double cols) {
    return orthogonalize ? rows : rows * cols;
  };
  double wanted = size(n, m);
  double largest = 0.0;
  for (const KernelCost &k : it->second)
    largest = std::max(largest, size(k.n, k.m));
  double best = 0.0;
  // Among them, time against rank: the kernels read the whole n x m matrix
  // whatever r is (at small r they are memory-bound), so time is not
  // proportional to r. Linear in r through the two measured ranks nearest
  // to r (inter- or extrapolated); one measured rank: proportional to r
  // (orthogonalize: r^2).
  SmallVector<std::pair<double, double>> byRank; // (r, seconds per size)
  for (const KernelCost &k : it->second)
    if (std::fabs(std::log(size(k.n, k.m) / largest)) <= best + 1e-9)
      byRank.push_back({double(k.r), k.seconds / size(k.n, k.m)});
  if (byRank.empty())
    return 0.0; // not reached: the nearest shape is always among them
  llvm::sort(byRank);
  double rank = double(r);
  double perSize;
  if (byRank.size() == 1 || byRank.front().first == byRank.back().first) {
    double measured = byRank.front().first;
    double factor =
        orthogonalize ? (rank * rank) / (measured * measured) : rank / measured;
    perSize = byRank.front().second * factor;
  } else {
    // The two nearest ranks (ties to the lower).
    llvm::stable_sort(byRank, [&](const auto &a, const auto &b) {
      return std::fabs(a.first - rank) < std::fabs(b.first - rank);
    });
    auto first = byRank[0];
    auto second = byRank[1];
    for (auto &candidate : byRank)
      if (candidate.first != first.first) {
        second = candidate;
        break;
      }
    double slope =
        (second.second - first.second) / (second.first - first.first);
    perSize = first.second + slope * (rank - first.first);
    // Never below a tenth of the nearest measurement: an extrapolation
    // through noisy points must not predict a free kernel.
    perSize = std::max(perSize, 0.1 * first.second);
  }
  return perSize * wanted;
}

double MachineProfile::elementwiseSeconds(StringRef kernel,
                                          double elements) const {
  auto it = kernels.find(kernel);
  if (it == kernels.end() || it->second.empty())
    return 0.0;
  const KernelCost &k = it->second.front();
  return k.seconds * elements / double(k.elements);
}

PlanChoice::~PlanChoice() = default;

CompressionAttr mlir::ddp::plannedDecision(Operation *op) {
  return op->getAttrOfType<CompressionAttr>(
      DDPDialect::PlannedAttrHelper::getNameStr());
}

StringRef mlir::ddp::plannedStagesAdvice() {
  return "compress with ddp-compress{plan=...} in place of ddp-plan, or "
         "follow ddp-plan with the stages that honour its decisions: "
         "insert-powersgd{planned}, ddp-apply-planned-schemes, "
         "insert-fp16-compression{planned}, "
         "insert-bf16-compression{planned}";
}

LogicalResult mlir::ddp::refusePlannedBuckets(Operation *root,
                                              StringRef passName,
                                              StringRef would) {
  WalkResult walked = root->walk([&](AllReduceOp op) {
    CompressionAttr decision = plannedDecision(op);
    if (!decision)
      return WalkResult::advance();
    op.emitError() << passName << " " << would
                   << ", but this bucket is planned as " << decision
                   << " by ddp-plan: " << plannedStagesAdvice();
    return WalkResult::interrupt();
  });
  return failure(walked.wasInterrupted());
}

SmallVector<std::pair<AllReduceOp, CompressionAttr>>
mlir::ddp::takePlannedBuckets(Operation *root,
                              function_ref<bool(CompressionAttr)> mine) {
  SmallVector<std::pair<AllReduceOp, CompressionAttr>> taken;
  root->walk([&](AllReduceOp op) {
    CompressionAttr decision = plannedDecision(op);
    if (!decision || !mine(decision))
      return;
    op->removeAttr(DDPDialect::PlannedAttrHelper::getNameStr());
    taken.push_back({op, decision});
  });
  return taken;
}

double mlir::ddp::bytesAsDouble(RankedTensorType type) {
  return double(type.getNumElements()) * double(type.getElementTypeBitWidth()) /
         8.0;
}

PlanCost mlir::ddp::predictPlain(const MachineProfile &profile,
                                 const BucketShape &bucket, int64_t world,
                                 bool compressesNothing) {
  PlanCost cost;
  cost.compressesNothing = compressesNothing;
  if (bucket.tensors.empty())
    return cost;
  SmallVector<double> tensorBytes;
  for (RankedTensorType type : bucket.tensors) {
    tensorBytes.push_back(bytesAsDouble(type));
    cost.bytes += tensorBytes.back();
  }
  cost.linkSeconds = profile.bucketAllreduceSeconds(
      bucket.tensors.front().getElementType(), tensorBytes, world);
  cost.seconds = cost.linkSeconds;
  return cost;
}
