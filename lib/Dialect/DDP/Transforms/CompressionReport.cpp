//===- CompressionReport.cpp - what each gradient sends -------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Prints what CompressionTrace.cpp finds the module sends, per gradient or
// scheme bucket, with totals, as text or JSON, and the plan ddp-plan left
// in the module (its predictions per bucket and choice).
//
//===----------------------------------------------------------------------===//

#include "CompressionTrace.h"

#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPCOMPRESSIONREPORT
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {
struct Totals {
  int64_t numelBefore = 0, numelAfter = 0, bytesBefore = 0, bytesAfter = 0;
  /// Tensors a scheme compressed (fewer elements, or a bucket scheme's
  /// encoding), and tensors sent narrowed (fp16/bf16: fewer bytes).
  unsigned tensors = 0, compressed = 0, narrowed = 0;
  /// PowerSGD's warm-up: the largest start-iter of the module's step
  /// counters (0: none). Before it every gradient is sent uncompressed.
  int64_t warmupSteps = 0;
};

struct DDPCompressionReportPass
    : public PassWithOptionNames<
          ddp::impl::DDPCompressionReportBase<DDPCompressionReportPass>> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

static double ratio(int64_t before, int64_t after) {
  if (after == 0)
    return before == 0 ? 1.0 : 0.0;
  return double(before) / double(after);
}

/// `text` followed by spaces up to `width` characters (none if longer).
static std::string padRight(StringRef text, size_t width) {
  return (text +
          std::string(width > text.size() ? width - text.size() : 0, ' '))
      .str();
}

static std::string shapeText(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string text;
  for (auto [i, size] : llvm::enumerate(shape))
    text +=
        (i ? "x" : "") +
        (ShapedType::isDynamic(size) ? std::string("?") : std::to_string(size));
  return text;
}

//===----------------------------------------------------------------------===//
// The plan (ddp-plan's module attribute)
//===----------------------------------------------------------------------===//

namespace {
/// One bucket of the plan.
struct PlanRow {
  std::string function, where, choice, reason;
  int64_t tensors = 0, elements = 0;
  /// Microseconds per choice, in the order the planner tried them.
  SmallVector<std::pair<std::string, double>> predicted;

  std::optional<double> predictedFor(StringRef choice) const {
    for (auto &[name, us] : predicted)
      if (name == choice)
        return us;
    return std::nullopt;
  }
};

struct Plan {
  std::string profile;
  int64_t world = 0;
  SmallVector<PlanRow> rows;
  /// Every choice some bucket was predicted under, in order.
  SmallVector<std::string> columns;

  /// Every bucket under `choice` (a bucket not predicted under it, being
  /// fixed by the user, counts what it was planned with).
  double totalFor(StringRef choice) const {
    double total = 0.0;
    for (const PlanRow &row : rows)
      total += row.predictedFor(choice).value_or(
          row.predictedFor(row.choice).value_or(0.0));
    return total;
  }
  /// Every bucket under its own choice.
  double planned() const {
    double total = 0.0;
    for (const PlanRow &row : rows)
      total += row.predictedFor(row.choice).value_or(0.0);
    return total;
  }
};
} // namespace

static std::optional<Plan> readPlan(ModuleOp module) {
  auto *dialect = module.getContext()->getLoadedDialect<DDPDialect>();
  if (!dialect)
    return std::nullopt;
  DictionaryAttr attr = dialect->getPlanAttrHelper().getAttr(module);
  if (!attr)
    return std::nullopt;
  Plan plan;
  if (auto profile = attr.getAs<StringAttr>("profile"))
    plan.profile = profile.str();
  if (auto world = attr.getAs<IntegerAttr>("world"))
    plan.world = world.getInt();
  for (Attribute entry : attr.getAs<ArrayAttr>("buckets")) {
    auto bucket = dyn_cast<DictionaryAttr>(entry);
    if (!bucket)
      continue;
    PlanRow row;
    auto text = [&](StringRef key) {
      auto value = bucket.getAs<StringAttr>(key);
      return value ? value.str() : std::string("?");
    };
    auto count = [&](StringRef key) {
      auto value = bucket.getAs<IntegerAttr>(key);
      return value ? value.getInt() : int64_t(0);
    };
    row.function = text("function");
    row.where = text("where");
    row.choice = text("choice");
    row.reason = text("reason");
    row.tensors = count("tensors");
    row.elements = count("elements");
    if (auto predicted = bucket.getAs<DictionaryAttr>("predicted_ns"))
      for (NamedAttribute named : predicted)
        if (auto ns = dyn_cast<IntegerAttr>(named.getValue())) {
          row.predicted.push_back(
              {named.getName().str(), double(ns.getInt()) / 1e3});
          if (!llvm::is_contained(plan.columns, named.getName().str()))
            plan.columns.push_back(named.getName().str());
        }
    plan.rows.push_back(std::move(row));
  }
  // In the order the planner weighed the choices (a dictionary sorts its
  // keys); a plan without that order keeps the dictionaries'.
  if (auto choices = attr.getAs<ArrayAttr>("choices")) {
    SmallVector<std::string> ordered;
    for (auto name : choices.getAsValueRange<StringAttr>())
      if (llvm::is_contained(plan.columns, name.str()))
        ordered.push_back(name.str());
    for (const std::string &column : plan.columns)
      if (!llvm::is_contained(ordered, column))
        ordered.push_back(column);
    plan.columns = std::move(ordered);
  }
  return plan;
}

static std::string milliseconds(double us) {
  return llvm::formatv("{0:F2}", us / 1e3).str();
}

static void printPlanText(raw_ostream &os, const Plan &plan) {
  os << "ddp plan: predicted time of each bucket's exchange per step (ms), "
     << plan.world << " ranks\n"
     << "  profile: " << plan.profile << "\n"
     << "  the exchange alone (overlap with the backward pass is not "
        "modelled); PowerSGD after its warm-up steps\n";
  size_t width = 24;
  for (const PlanRow &row : plan.rows)
    width = std::max(width, row.where.size());
  // Each column as wide as its name (powersgd-r4+fp16), at least 11.
  auto right = [](StringRef text, StringRef column) {
    size_t to = std::max<size_t>(11, column.size());
    return (std::string(to > text.size() ? to - text.size() : 0, ' ') + text)
        .str();
  };
  size_t chosenWidth = 11;
  for (const PlanRow &row : plan.rows)
    chosenWidth = std::max(chosenWidth, row.choice.size());
  os << llvm::formatv("{0,4}  {1} {2,7} {3,10}", "#", padRight("bucket", width),
                      "tensors", "elements");
  for (const std::string &column : plan.columns)
    os << " " << right(column, column);
  os << "  " << padRight("chosen", chosenWidth) << " reason\n";
  for (auto [i, row] : llvm::enumerate(plan.rows)) {
    os << llvm::formatv("{0,4}  {1} {2,7} {3,10}", i,
                        padRight(row.where, width), row.tensors, row.elements);
    for (const std::string &column : plan.columns) {
      std::optional<double> us = row.predictedFor(column);
      os << " " << right(us ? milliseconds(*us) : "-", column);
    }
    os << "  " << padRight(row.choice, chosenWidth) << " " << row.reason
       << "\n";
  }
  os << llvm::formatv("{0,4}  {1} {2,7} {3,10}", "",
                      padRight("every bucket alike", width), "", "");
  for (const std::string &column : plan.columns)
    os << " " << right(milliseconds(plan.totalFor(column)), column);
  os << "\n";
  double planned = plan.planned(), plain = plan.totalFor("plain");
  std::string best;
  double bestUs = 0.0;
  for (const std::string &column : plan.columns)
    if (best.empty() || plan.totalFor(column) < bestUs) {
      best = column;
      bestUs = plan.totalFor(column);
    }
  os << "planned: " << milliseconds(planned) << " ms per step";
  if (llvm::is_contained(plan.columns, "plain") && planned > 0.0)
    os << llvm::formatv(" ({0:F2}x plain's {1} ms)", plain / planned,
                        milliseconds(plain));
  if (!best.empty())
    os << "; best single choice for every bucket: " << best << " "
       << milliseconds(bestUs) << " ms";
  os << "\n";
}

static void printPlanJson(llvm::json::OStream &json, const Plan &plan) {
  json.attributeObject("plan", [&] {
    json.attribute("profile", plan.profile);
    json.attribute("world", plan.world);
    json.attributeArray("buckets", [&] {
      for (const PlanRow &row : plan.rows)
        json.object([&] {
          json.attribute("function", row.function);
          json.attribute("where", row.where);
          json.attribute("tensors", row.tensors);
          json.attribute("elements", row.elements);
          json.attribute("choice", row.choice);
          json.attribute("reason", row.reason);
          json.attributeObject("predicted_us", [&] {
            for (auto &[name, us] : row.predicted)
              json.attribute(name, us);
          });
        });
    });
    json.attributeObject("total_us", [&] {
      json.attribute("planned", plan.planned());
      for (const std::string &column : plan.columns)
        json.attribute(column, plan.totalFor(column));
    });
  });
}

static void printText(raw_ostream &os, ArrayRef<ReportRow> rows,
                      const Totals &totals, const std::optional<Plan> &plan) {
  // Names are printed whole, the column as wide as the longest: two long
  // names cut to one prefix would read as the same tensor. The other text
  // columns are as wide as their longest entry too (a bucket of several
  // types, "f16+f32"; "powersgd-batched+bf16"), at least their usual width.
  auto widest = [&](size_t least, function_ref<size_t(const ReportRow &)> of) {
    for (const ReportRow &row : rows)
      least = std::max(least, of(row));
    return least;
  };
  size_t width = widest(28, [](const ReportRow &r) { return r.where.size(); });
  size_t shapeWidth =
      widest(16, [](const ReportRow &r) { return shapeText(r.shape).size(); });
  size_t dtypeWidth =
      widest(5, [](const ReportRow &r) { return r.dtype.size(); });
  size_t decisionWidth =
      widest(20, [](const ReportRow &r) { return r.decision.size(); });
  size_t sentAsWidth =
      widest(7, [](const ReportRow &r) { return r.sentAs.size(); });
  os << "ddp compression report: what each gradient sends per step\n";
  if (totals.warmupSteps > 0)
    os << llvm::formatv(
        "  from step {0} on (start-iter): steps 0 to {1} are PowerSGD's "
        "warm-up and send every gradient uncompressed ({2} elements, {3} "
        "bytes per step), so a run of {0} steps or fewer compresses nothing\n",
        totals.warmupSteps, totals.warmupSteps - 1, totals.numelBefore,
        totals.bytesBefore);
  auto line = [&](const Twine &index, StringRef where, StringRef shape,
                  StringRef dtype, StringRef decision, StringRef rank,
                  StringRef sentAs, const Twine &rest) {
    os << llvm::formatv("{0,4}  ", index.str()) << padRight(where, width) << " "
       << padRight(shape, shapeWidth) << " " << padRight(dtype, dtypeWidth)
       << " " << padRight(decision, decisionWidth) << " "
       << llvm::formatv("{0,4}", rank) << " " << padRight(sentAs, sentAsWidth)
       << " " << rest << "\n";
  };
  line("#", "where", "shape", "dtype", "decision", "rank", "sent-as",
       llvm::formatv("{0,12} {1,12} {2,8}", "elements", "sent", "ratio").str());
  for (auto [i, row] : llvm::enumerate(rows))
    line(Twine(i), row.where, shapeText(row.shape), row.dtype, row.decision,
         row.rank ? std::to_string(row.rank) : std::string("-"), row.sentAs,
         llvm::formatv("{0,12} {1,12} {2,7:F2}x", row.numelBefore,
                       row.numelAfter, ratio(row.numelBefore, row.numelAfter))
             .str());
  os << "total: " << totals.tensors << " tensors, " << totals.compressed
     << " compressed";
  if (totals.narrowed > 0)
    os << ", " << totals.narrowed << " narrowed";
  os << llvm::formatv("; elements {0} -> {1} ({2:F2}x); bytes {3} -> {4} "
                      "({5:F2}x)",
                      totals.numelBefore, totals.numelAfter,
                      ratio(totals.numelBefore, totals.numelAfter),
                      totals.bytesBefore, totals.bytesAfter,
                      ratio(totals.bytesBefore, totals.bytesAfter));
  if (totals.warmupSteps > 0)
    os << " from step " << totals.warmupSteps << " on";
  os << "\n";
  if (plan)
    printPlanText(os, *plan);
}

/// A scheme's option as JSON: true/false, a number or a string (another
/// attribute as it prints).
static llvm::json::Value optionValue(Attribute value) {
  if (auto boolean = dyn_cast<BoolAttr>(value))
    return boolean.getValue();
  if (auto integer = dyn_cast<IntegerAttr>(value))
    return integer.getValue().getSExtValue();
  if (auto number = dyn_cast<FloatAttr>(value))
    return number.getValueAsDouble();
  if (auto string = dyn_cast<StringAttr>(value))
    return string.getValue().str();
  std::string text;
  llvm::raw_string_ostream os(text);
  value.print(os);
  return text;
}

static void printJson(raw_ostream &os, ArrayRef<ReportRow> rows,
                      const Totals &totals, const std::optional<Plan> &plan) {
  llvm::json::OStream json(os, /*IndentSize=*/2);
  json.object([&] {
    json.attributeArray("tensors", [&] {
      for (const ReportRow &row : rows)
        json.object([&] {
          json.attribute("loc", row.where);
          json.attributeArray("shape", [&] {
            for (int64_t size : row.shape)
              json.value(ShapedType::isDynamic(size) ? -1 : size);
          });
          json.attribute("dtype", row.dtype);
          json.attribute("compressed", row.compressed);
          json.attribute("rank", row.rank);
          json.attribute("numel_before", row.numelBefore);
          json.attribute("numel_after", row.numelAfter);
          json.attribute("decision", row.decision);
          if (!row.options.empty())
            json.attributeObject("options", [&] {
              for (NamedAttribute option : row.options)
                json.attribute(option.getName().getValue(),
                               optionValue(option.getValue()));
            });
          json.attribute("sent_as", row.sentAs);
          json.attribute("bytes_before", row.bytesBefore);
          json.attribute("bytes_after", row.bytesAfter);
        });
    });
    json.attribute("numel_before", totals.numelBefore);
    json.attribute("numel_after", totals.numelAfter);
    json.attribute("ratio", ratio(totals.numelBefore, totals.numelAfter));
    json.attribute("bytes_before", totals.bytesBefore);
    json.attribute("bytes_after", totals.bytesAfter);
    json.attribute("bytes_ratio", ratio(totals.bytesBefore, totals.bytesAfter));
    // The figures above hold from this step on (PowerSGD's start-iter).
    json.attribute("warmup_steps", totals.warmupSteps);
    if (plan)
      printPlanJson(json, *plan);
  });
  os << "\n";
}

/// Writes `print`'s output to `path` ("-" is stdout).
static LogicalResult writeTo(ModuleOp module, StringRef path,
                             function_ref<void(raw_ostream &)> print) {
  if (path == "-") {
    print(llvm::outs());
    llvm::outs().flush();
    return success();
  }
  std::error_code error;
  llvm::raw_fd_ostream file(path, error, llvm::sys::fs::OF_Text);
  if (error)
    return emitPassError(module, "ddp-compression-report")
           << "cannot write '" << path << "': " << error.message();
  print(file);
  return success();
}

void DDPCompressionReportPass::runOnOperation() {
  ModuleOp module = getOperation();
  SmallVector<ReportRow, 0> byGradient;
  collectReportRows(module, byGradient);
  SmallVector<ReportRow, 0> rows;
  Totals totals;
  // Each tensor's counts fit in int64 (the ops' verifiers check it); their
  // sums may not.
  bool overflow = false;
  for (ReportRow &row : byGradient) {
    overflow |= llvm::AddOverflow(totals.numelBefore, row.numelBefore,
                                  totals.numelBefore);
    overflow |=
        llvm::AddOverflow(totals.numelAfter, row.numelAfter, totals.numelAfter);
    overflow |= llvm::AddOverflow(totals.bytesBefore, row.bytesBefore,
                                  totals.bytesBefore);
    overflow |=
        llvm::AddOverflow(totals.bytesAfter, row.bytesAfter, totals.bytesAfter);
    totals.tensors += row.tensors;
    totals.compressed += row.compressed ? row.tensors : 0;
    totals.narrowed += row.getNarrowedTensors();
    rows.push_back(std::move(row));
  }
  if (overflow) {
    emitPassError(module, "ddp-compression-report")
        << "the module's gradients hold more elements or bytes together than "
           "a 64-bit count holds";
    return signalPassFailure();
  }
  llvm::stable_sort(rows, [](const ReportRow &a, const ReportRow &b) {
    return a.order < b.order;
  });
  auto *ddpDialect = getContext().getLoadedDialect<DDPDialect>();
  for (auto state : module.getOps<StateOp>())
    if (IntegerAttr start = ddpDialect->getStartIterAttrHelper().getAttr(state))
      totals.warmupSteps = std::max(totals.warmupSteps, start.getInt());
  std::optional<Plan> plan = readPlan(module);
  auto text = [&](raw_ostream &os) { printText(os, rows, totals, plan); };
  auto *dialect = getContext().getLoadedDialect<DDPDialect>();
  if (output.empty() && dialect && dialect->getReportHandler()) {
    std::string table;
    llvm::raw_string_ostream stream(table);
    text(stream);
    dialect->getReportHandler()(table);
  } else if (output.empty())
    text(llvm::errs());
  else if (failed(writeTo(module, output, text)))
    return signalPassFailure();
  if (!json.empty() && failed(writeTo(module, json, [&](raw_ostream &os) {
        printJson(os, rows, totals, plan);
      })))
    return signalPassFailure();
  markAllAnalysesPreserved();
}
