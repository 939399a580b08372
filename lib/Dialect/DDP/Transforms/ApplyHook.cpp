//===- ApplyHook.cpp - hooks written in MLIR, and noop
//---------------------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// ddp-apply-hook: a user's communication hook, written as a function of the
// module over a flat bucket, inlined at every bucket and specialised to its
// size; the hook's state is instantiated per bucket. insert-noop: PyTorch's
// noop_hook, the bucket as it is.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/BucketCompression.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/SourceMgr.h"

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPAPPLYHOOK
#define GEN_PASS_DEF_INSERTNOOP
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {
/// A hook function of the module as a compression scheme. initialize()
/// takes the function out of the module (its own collectives are not
/// buckets); every bucket gets a copy of its body.
class HookScheme : public CompressionScheme {
public:
  HookScheme(StringRef name, StringRef library, StringRef passName)
      : name(name.str()), library(library.str()), passName(passName.str()) {}

  StringRef getName() const override { return schemeName; }

  LogicalResult initialize(ModuleOp module) override;

  std::string whyNot(const Bucket &bucket) const override {
    int64_t size = argumentType().getDimSize(0);
    if (!ShapedType::isDynamic(size) && size != bucket.getNumElements())
      return "the hook takes " + std::to_string(size) +
             " elements and the bucket has " +
             std::to_string(bucket.getNumElements());
    return "";
  }

  FailureOr<Value> reduce(BucketBuilder &b, Value flat) override;

  /// The state templates the hook used, to remove once no bucket is left.
  SmallVector<StringAttr> getStates() const {
    return llvm::to_vector(llvm::make_first_range(templates));
  }

private:
  RankedTensorType argumentType() const {
    return cast<RankedTensorType>(const_cast<OwningOpRef<func::FuncOp> &>(hook)
                                      ->getFunctionType()
                                      .getInput(0));
  }

  /// Copies the hook and the states it names from `library` into `module`.
  LogicalResult import(ModuleOp module);
  LogicalResult inlineHelpers(func::FuncOp function, ModuleOp module);

  std::string name, library, passName, schemeName;
  OwningOpRef<func::FuncOp> hook;
  /// The states the hook names (the templates), with their types, found
  /// once: a lookup by name in the module is a scan of its body.
  llvm::MapVector<StringAttr, Type> templates;
};
} // namespace

/// Whether the hook contract allows `op` in a hook's body.
static bool allowedInHook(Operation *op) {
  if (isa<AllReduceOp, AllGatherOp, WorldSizeOp, CastOp, ScaleOp, StateLoadOp,
          StateStoreOp, func::ReturnOp>(op))
    return true;
  StringRef dialect = op->getName().getDialectNamespace();
  return dialect == "arith" || dialect == "math" || dialect == "linalg" ||
         dialect == "tensor" || dialect == "scf";
}

LogicalResult HookScheme::initialize(ModuleOp module) {
  auto fail = [&](Operation *at) {
    return emitPassError(at ? at : module.getOperation(), passName);
  };
  if (name.empty())
    return fail(nullptr) << "needs hook=<the name of a function of the "
                            "module>, e.g. hook=my_hook";
  if (!library.empty() && failed(import(module)))
    return failure();
  auto function = module.lookupSymbol<func::FuncOp>(name);
  if (!function)
    return fail(nullptr) << "the module has no function @" << name
                         << " to use as a hook";
  FunctionType type = function.getFunctionType();
  auto input = type.getNumInputs() == 1
                   ? dyn_cast<RankedTensorType>(type.getInput(0))
                   : RankedTensorType();
  if (!input || type.getNumResults() != 1 || type.getResult(0) != input ||
      input.getRank() != 1 || !isComputeElementType(input.getElementType()))
    return fail(function)
           << "the hook @" << name
           << " must take the flat bucket and return its average over the "
              "ranks, one 1-D tensor of "
           << computeElementTypeNames(module.getContext())
           << " in and the same type out, e.g. (tensor<?xf32>) -> "
              "tensor<?xf32>; it has type "
           << type;
  if (function.isExternal())
    return fail(function) << "the hook @" << name << " has no body";
  if (!function.getBody().hasOneBlock())
    return fail(function) << "the hook @" << name
                          << " must be one block (use scf for control flow)";
  if (std::optional<SymbolTable::UseRange> uses =
          SymbolTable::getSymbolUses(function, module);
      uses && !uses->empty())
    return fail(uses->begin()->getUser())
           << "the hook @" << name
           << " is called here; a hook is applied to buckets, not called";
  if (failed(inlineHelpers(function, module)))
    return failure();
  // The contract (docs/user-guide.md): a hook is compression arithmetic and
  // collectives. Anything else (llvm.call @system, a memref written behind
  // the bucket's back, a call the inliner did not see) is refused here,
  // with the op's location, rather than run on every rank.
  WalkResult contract = function.walk([&](Operation *op) {
    if (op == function.getOperation() || allowedInHook(op))
      return WalkResult::advance();
    fail(op) << "the hook @" << name << " holds '" << op->getName()
             << "', which a hook may not: its body holds the ddp ops "
                "allreduce, allgather, world_size, cast, scale, state_load "
                "and state_store, and ops of arith, math, linalg, tensor "
                "and scf";
    return WalkResult::interrupt();
  });
  if (contract.wasInterrupted())
    return failure();
  // Every state the hook names must exist and be per bucket.
  WalkResult walk = function.walk([&](Operation *op) {
    FlatSymbolRefAttr symbol;
    if (auto load = dyn_cast<StateLoadOp>(op))
      symbol = load.getStateAttr();
    else if (auto store = dyn_cast<StateStoreOp>(op))
      symbol = store.getStateAttr();
    else
      return WalkResult::advance();
    auto state = module.lookupSymbol<StateOp>(symbol.getAttr());
    if (!state) {
      op->emitError() << "'" << symbol.getValue()
                      << "' does not name a 'ddp.state'";
      return WalkResult::interrupt();
    }
    templates[state.getSymNameAttr()] = state.getType();
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  schemeName = "hook:" + name;
  function->remove();
  hook = function;
  return success();
}

/// Inlines the functions the hook calls (and theirs) into its body, so that
/// the bucket's static size reaches every op: through a call the size stays
/// unknown until run time, and a helper returning another size was found
/// only by an assertion in the compiled step. A helper must be a function
/// of the module with one block; recursion is an error.
LogicalResult HookScheme::inlineHelpers(func::FuncOp function,
                                        ModuleOp module) {
  auto fail = [&](Operation *at) { return emitPassError(at, passName); };
  // Each round inlines one level of calls; a chain deeper than this is
  // recursion (or a program no hook is).
  constexpr unsigned maxDepth = 64;
  llvm::SetVector<func::FuncOp> helpers;
  for (unsigned depth = 0;; ++depth) {
    SmallVector<func::CallOp> calls;
    function.walk([&](func::CallOp call) { calls.push_back(call); });
    if (calls.empty()) {
      // Private helpers nothing else calls are dead now.
      for (func::FuncOp helper : helpers)
        if (helper.isPrivate() &&
            SymbolTable::symbolKnownUseEmpty(helper, module))
          helper.erase();
      return success();
    }
    if (depth == maxDepth)
      return fail(calls.front())
             << "the hook @" << name << " calls @" << calls.front().getCallee()
             << " more than " << maxDepth
             << " calls deep; a hook's helpers cannot be recursive";
    for (func::CallOp call : calls) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCalleeAttr());
      if (!callee || callee.isExternal())
        return fail(call) << "the hook @" << name << " calls @"
                          << call.getCallee()
                          << ", which is not a function with a body in the "
                             "module; a hook's helpers are inlined into it";
      if (!callee.getBody().hasOneBlock())
        return fail(callee)
               << "@" << callee.getSymName() << ", which the hook @" << name
               << " calls, must be one block (use scf for "
                  "control flow)";
      helpers.insert(callee);
      OpBuilder builder(call);
      IRMapping mapping;
      Block &body = callee.getBody().front();
      mapping.map(body.getArguments(), call.getOperands());
      for (Operation &op : body.without_terminator())
        builder.clone(op, mapping);
      auto ret = cast<func::ReturnOp>(body.getTerminator());
      for (auto [result, value] :
           llvm::zip(call.getResults(), ret.getOperands()))
        result.replaceAllUsesWith(mapping.lookupOrDefault(value));
      call.erase();
    }
  }
}

LogicalResult HookScheme::import(ModuleOp module) {
  auto fail = [&]() { return emitPassError(module, passName); };
  ParserConfig config(module.getContext());
  // A hook library is source text; a file past 64 MiB (or /dev/zero) is
  // refused before it is read whole.
  std::string readError;
  FailureOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      readBoundedFile(library, size_t(64) << 20, "hook library", readError);
  if (failed(buffer))
    return fail() << "hook library '" << library << "': " << readError;
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  OwningOpRef<ModuleOp> file = parseSourceFile<ModuleOp>(sourceMgr, config);
  if (!file)
    return fail() << "cannot read the hook library '" << library
                  << "' (see the error above)";
  auto function = file->lookupSymbol<func::FuncOp>(name);
  if (!function)
    return fail() << "the hook library '" << library << "' has no function @"
                  << name;
  if (module.lookupSymbol(name))
    return fail() << "the module already has a symbol @" << name
                  << "; the hook comes from '" << library << "'";
  OpBuilder builder(module.getContext());
  builder.setInsertionPointToEnd(module.getBody());
  // What the hook names, transitively: its states and the functions it
  // calls (and theirs), unless the module declares the same.
  SmallVector<Operation *> worklist{function};
  llvm::SmallPtrSet<Operation *, 8> copied{function};
  while (!worklist.empty()) {
    Operation *from = worklist.pop_back_val();
    std::optional<SymbolTable::UseRange> uses =
        SymbolTable::getSymbolUses(from);
    if (!uses)
      continue;
    for (const SymbolTable::SymbolUse &use : *uses) {
      StringAttr symbol = use.getSymbolRef().getRootReference();
      Operation *definition = file->lookupSymbol(symbol);
      if (!definition || !copied.insert(definition).second)
        continue; // undefined ones are reported with the hook's errors
      if (Operation *existing = module.lookupSymbol(symbol)) {
        auto state = dyn_cast<StateOp>(definition);
        auto same = dyn_cast<StateOp>(existing);
        if (state && same && state.getType() == same.getType())
          continue;
        return fail() << "the module's @" << symbol.getValue()
                      << " differs from the hook library's ('" << library
                      << "'), which the hook uses";
      }
      builder.clone(*definition);
      worklist.push_back(definition);
    }
  }
  builder.clone(*function);
  return success();
}

/// The static type of a per-bucket state: the template's dynamic
/// dimensions are the bucket's element count.
static Type instanceType(Type type, int64_t elements) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || tensor.hasStaticShape())
    return type;
  SmallVector<int64_t> shape(tensor.getShape());
  for (int64_t &dim : shape)
    if (ShapedType::isDynamic(dim))
      dim = elements;
  return tensor.clone(shape);
}

FailureOr<Value> HookScheme::reduce(BucketBuilder &b, Value flat) {
  const Bucket &bucket = b.getBucket();
  RankedTensorType argType = argumentType();
  int64_t n = bucket.getNumElements();
  // In the hook's element type (bf16_compress_wrapper), at its shape.
  auto hookFlat = RankedTensorType::get({n}, argType.getElementType());
  Value input = flat;
  if (hookFlat != bucket.flatType)
    input = CastOp::create(b, TypeRange{hookFlat}, ValueRange{flat},
                           WorldScaleAttr())
                .getResult(0);
  if (input.getType() != argType)
    input = tensor::CastOp::create(b, argType, input);

  IRMapping mapping;
  Block &body = hook->getBody().front();
  mapping.map(body.getArgument(0), input);
  SmallVector<Operation *> cloned;
  for (Operation &op : body.without_terminator())
    cloned.push_back(b.clone(op, mapping));

  // Each state the hook names becomes this bucket's own, statically shaped.
  auto instance = [&](FlatSymbolRefAttr symbol) {
    Type type = instanceType(templates.lookup(symbol.getAttr()), n);
    return std::make_pair(b.getState(symbol.getValue(), type), type);
  };
  // (Casts are built with `b`, so that the shape refinement sees them.)
  SmallVector<Operation *> stateOps;
  for (Operation *top : cloned)
    top->walk([&](Operation *op) {
      if (isa<StateLoadOp, StateStoreOp>(op))
        stateOps.push_back(op);
    });
  for (Operation *op : stateOps) {
    OpBuilder::InsertionGuard guard(b);
    if (auto load = dyn_cast<StateLoadOp>(op)) {
      auto [symbol, type] = instance(load.getStateAttr());
      load.setStateAttr(symbol);
      Type old = load.getType();
      if (old != type) {
        b.setInsertionPointAfter(load);
        load.getResult().setType(type);
        auto back = tensor::CastOp::create(b, load.getLoc(), old, load);
        load.getResult().replaceAllUsesExcept(back, back);
      }
    } else if (auto store = dyn_cast<StateStoreOp>(op)) {
      auto [symbol, type] = instance(store.getStateAttr());
      store.setStateAttr(symbol);
      if (store.getValue().getType() != type) {
        b.setInsertionPoint(store);
        store.getValueMutable().assign(
            tensor::CastOp::create(b, store.getLoc(), type, store.getValue()));
      }
    }
  }

  Value result = mapping.lookup(body.getTerminator()->getOperand(0));
  if (result.getType() != hookFlat) {
    // A hook must return the bucket's size. Where that is not known until
    // the shapes are refined, an assertion says it; refined to a constant,
    // a false one is an error of the pass (applyCompressionScheme).
    auto resultType = cast<RankedTensorType>(result.getType());
    if (!resultType.isDynamicDim(0) && resultType.getDimSize(0) != n)
      return AllReduceOp(bucket.allreduce).emitError()
             << passName << ": the hook @" << name << " returns " << resultType
             << " for a bucket of " << n << " elements";
    if (resultType.isDynamicDim(0)) {
      Value size = tensor::DimOp::create(b, result, 0);
      Value expected = arith::ConstantIndexOp::create(b, n);
      Value same =
          arith::CmpIOp::create(b, arith::CmpIPredicate::eq, size, expected);
      cf::AssertOp::create(b, same,
                           "the hook @" + name +
                               " returns a tensor of another size than the "
                               "bucket's " +
                               std::to_string(n) + " elements");
    }
    result = tensor::CastOp::create(b, hookFlat, result);
  }
  if (hookFlat != bucket.flatType)
    result = CastOp::create(b, TypeRange{bucket.flatType}, ValueRange{result},
                            WorldScaleAttr())
                 .getResult(0);
  return result;
}

namespace {
/// noop_hook: the bucket as it is, nothing sent.
class NoopScheme : public CompressionScheme {
public:
  StringRef getName() const override { return "noop"; }
  FailureOr<Value> reduce(BucketBuilder &, Value flat) override { return flat; }
};

struct DDPApplyHookPass : public PassWithOptionNames<
                              ddp::impl::DDPApplyHookBase<DDPApplyHookPass>> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    HookScheme scheme(hook, from, getArgument());
    if (failed(applyCompressionScheme(module, scheme, BucketFilter{buckets},
                                      getArgument(), numBuckets)))
      return signalPassFailure();
    // The templates go with the hook, unless something else uses them.
    for (StringAttr name : scheme.getStates()) {
      auto state = module.lookupSymbol<StateOp>(name);
      if (!state)
        continue;
      std::optional<SymbolTable::UseRange> uses =
          SymbolTable::getSymbolUses(state, module);
      if (uses && uses->empty())
        state.erase();
    }
  }
};

struct InsertNoopPass
    : public PassWithOptionNames<ddp::impl::InsertNoopBase<InsertNoopPass>> {
  using Base::Base;
  void runOnOperation() override {
    NoopScheme scheme;
    if (failed(applyCompressionScheme(getOperation(), scheme,
                                      BucketFilter{buckets}, getArgument(),
                                      numBuckets)))
      return signalPassFailure();
  }
};
} // namespace
