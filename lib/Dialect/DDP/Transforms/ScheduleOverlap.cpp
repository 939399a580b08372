//===- ScheduleOverlap.cpp - overlap communication with computation ------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
// Each block is rescheduled on its own, as a list schedule over a
// dependence graph of its top-level ops:
//
//  * nodes are "compute" (the skeleton: everything that is not
//    communication; it keeps its order), "chain" (ddp compression ops and
//    the pure glue that only feeds them), "collective" (allreduce_start, or
//    an op with regions that contains collectives, run as one unit) and
//    "wait";
//  * edges are SSA uses (of the op or of ops nested in it), conflicting
//    effects (per ddp.state symbol, per memory resource; an op of unknown
//    effects orders against every op with effects and every collective) and
//    the collective order: collectives sorted by the skeleton position at
//    which their inputs are ready, then by program order;
//  * the skeleton is emitted in order; before each skeleton op its missing
//    ancestors are placed ("pulled"); a chain op or collective is placed as
//    soon as its predecessors are; a wait only when pulled: by a skeleton op
//    that needs it, or by the next collective that is ready without waiting
//    (the ready point of the next bucket), which must be issued after it.
//
// The schedule is linear in the block's size (plus sorting the
// collectives), so a step with 100k gradients schedules in about the time
// it takes to build the graph.
//
//===----------------------------------------------------------------------===//

#include "ddp/Dialect/DDP/Transforms/CostModel.h"
#include "ddp/Dialect/DDP/Transforms/Passes.h"
#include "ddp/Dialect/DDP/Transforms/Utils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/DenseMap.h"

#include <queue>

namespace mlir::ddp {
#define GEN_PASS_DEF_DDPSCHEDULEOVERLAP
#include "ddp/Dialect/DDP/Transforms/Passes.h.inc"
} // namespace mlir::ddp

using namespace mlir;
using namespace mlir::ddp;

namespace {

/// Pure ops that only reshape, index or compute scalars (a condition, a
/// constant): part of the communication chain when everything that uses
/// them is. Arithmetic on tensors is computation.
bool isGlue(Operation *op) {
  if (op->getNumRegions() != 0 || !isPure(op))
    return false;
  if (isa_and_nonnull<tensor::TensorDialect>(op->getDialect()))
    return true;
  return isa_and_nonnull<arith::ArithDialect>(op->getDialect()) &&
         llvm::none_of(op->getResultTypes(), llvm::IsaPred<ShapedType>);
}

/// An op with regions whose ops are all ddp ops or glue (PowerSGD's
/// re-draw of a collapsed Q, a conditional state store).
bool isChainRegionOp(Operation *op) {
  if (!isa<scf::IfOp>(op))
    return false;
  return !op->walk([&](Operation *nested) {
              if (nested == op || nested->hasTrait<OpTrait::IsTerminator>())
                return WalkResult::advance();
              if (isa_and_nonnull<DDPDialect>(nested->getDialect()) ||
                  isGlue(nested) || isa<scf::IfOp>(nested))
                return WalkResult::advance();
              return WalkResult::interrupt();
            }).wasInterrupted();
}

/// What an op (with what it contains) does besides computing its results.
struct Effects {
  /// An effect the scheduler cannot reason about (no interface).
  bool unknown = false;
  /// A collective (ddp.allreduce, ddp.allreduce_start).
  bool collective = false;
  /// Reads and writes: per ddp.state symbol, or per memory resource.
  SmallVector<std::pair<const void *, bool>> accesses;

  bool any() const { return unknown || collective || !accesses.empty(); }
};

Effects effectsOf(Operation *root) {
  Effects effects;
  root->walk([&](Operation *op) {
    if (isa<AllReduceOp, AllReduceStartOp>(op)) {
      effects.collective = true;
      return;
    }
    // A wait completes a request of this block; the request orders it.
    if (isa<WaitOp>(op))
      return;
    if (auto load = dyn_cast<StateLoadOp>(op)) {
      effects.accesses.push_back(
          {load.getStateAttr().getAttr().getAsOpaquePointer(), false});
      return;
    }
    if (auto store = dyn_cast<StateStoreOp>(op)) {
      effects.accesses.push_back(
          {store.getStateAttr().getAttr().getAsOpaquePointer(), true});
      return;
    }
    auto instances = conflictingEffects(op);
    if (!instances) {
      effects.unknown = true;
      return;
    }
    for (const MemoryEffects::EffectInstance &instance : *instances) {
      effects.accesses.push_back(
          {instance.getResource(),
           !isa<MemoryEffects::Read>(instance.getEffect())});
    }
  });
  return effects;
}

enum class Kind { Compute, Chain, Collective, Wait };

struct Node {
  Operation *op;
  Kind kind = Kind::Compute;
  Effects effects;
  SmallVector<unsigned, 4> preds, succs;
  /// Position in the skeleton (compute nodes).
  int position = -1;
  /// The largest skeleton position among the ancestors (-1: none), and the
  /// skeleton node at it.
  int frontier = -1;
  int frontierNode = -1;
  /// Whether a wait is among the ancestors, through chain nodes.
  bool afterWait = false;
  unsigned missing = 0;
  bool placed = false;
};

class BlockScheduler {
public:
  /// `quiet`: ops with regions that get no remark when they run as one unit
  /// (the versions of an unswitched step).
  BlockScheduler(Block &block, const DenseSet<Operation *> &quiet)
      : block(block), quiet(quiet) {}

  void run();

private:
  void buildNodes();
  void addEdge(unsigned from, unsigned to);
  void addDependences();
  void computeFrontiers();
  void orderCollectives();
  void place(unsigned node);
  void pull(unsigned node);
  void scanReady(int position);
  void emitRemarks();

  Block &block;
  const DenseSet<Operation *> &quiet;
  std::vector<Node> nodes;
  DenseMap<Operation *, unsigned> indexOf;
  /// Collectives in issue order.
  SmallVector<unsigned> collectives;
  unsigned scanned = 0;
  int lastReady = -1;
  /// Chain nodes and collectives whose predecessors are all placed, by
  /// program order.
  std::priority_queue<unsigned, std::vector<unsigned>, std::greater<unsigned>>
      ready;
  SmallVector<Operation *> order;
};

void BlockScheduler::buildNodes() {
  for (Operation &op : block)
    nodes.push_back(Node{&op});
  for (auto [i, node] : llvm::enumerate(nodes))
    indexOf[node.op] = i;
  // Backwards, so that a glue op sees how its users were classified.
  for (Node &node : llvm::reverse(nodes)) {
    Operation *op = node.op;
    node.effects = effectsOf(op);
    if (op->hasTrait<OpTrait::IsTerminator>())
      node.kind = Kind::Compute;
    else if (isa<WaitOp>(op))
      node.kind = Kind::Wait;
    else if (node.effects.collective && !node.effects.unknown)
      node.kind = Kind::Collective;
    else if (isa_and_nonnull<DDPDialect>(op->getDialect()) ||
             isChainRegionOp(op))
      node.kind = Kind::Chain;
    else if (isGlue(op) && !op->use_empty() &&
             llvm::all_of(op->getUsers(), [&](Operation *user) {
               Operation *ancestor = block.findAncestorOpInBlock(*user);
               return ancestor &&
                      nodes[indexOf[ancestor]].kind != Kind::Compute;
             }))
      node.kind = Kind::Chain;
  }
  int position = 0;
  for (Node &node : nodes)
    if (node.kind == Kind::Compute)
      node.position = position++;
}

void BlockScheduler::addEdge(unsigned from, unsigned to) {
  if (from == to)
    return;
  Node &target = nodes[to];
  if (llvm::is_contained(target.preds, from))
    return;
  target.preds.push_back(from);
  nodes[from].succs.push_back(to);
}

void BlockScheduler::addDependences() {
  // Per state symbol or resource: the last writer and the readers since.
  struct Accesses {
    int lastWrite = -1;
    SmallVector<unsigned> reads;
  };
  DenseMap<const void *, Accesses> accesses;
  int lastUnknown = -1;
  SmallVector<unsigned> sinceUnknown;
  for (auto [i, node] : llvm::enumerate(nodes)) {
    node.op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (!def)
          continue;
        Operation *ancestor = block.findAncestorOpInBlock(*def);
        if (ancestor && ancestor != node.op)
          addEdge(indexOf[ancestor], i);
      }
    });
    const Effects &effects = node.effects;
    if (!effects.any())
      continue;
    if (lastUnknown >= 0)
      addEdge(lastUnknown, i);
    if (effects.unknown) {
      for (unsigned before : sinceUnknown)
        addEdge(before, i);
      sinceUnknown.clear();
      lastUnknown = i;
      continue;
    }
    sinceUnknown.push_back(i);
    for (auto [key, write] : effects.accesses) {
      Accesses &seen = accesses[key];
      if (seen.lastWrite >= 0)
        addEdge(seen.lastWrite, i);
      if (!write) {
        seen.reads.push_back(i);
        continue;
      }
      for (unsigned read : seen.reads)
        addEdge(read, i);
      seen.reads.clear();
      seen.lastWrite = i;
    }
  }
}

void BlockScheduler::computeFrontiers() {
  // Predecessors come first in the block.
  for (Node &node : nodes) {
    for (unsigned pred : node.preds) {
      const Node &before = nodes[pred];
      int frontier =
          before.kind == Kind::Compute ? before.position : before.frontier;
      int at = before.kind == Kind::Compute ? int(pred) : before.frontierNode;
      if (frontier > node.frontier) {
        node.frontier = frontier;
        node.frontierNode = at;
      }
      if (before.kind == Kind::Wait ||
          (before.kind != Kind::Compute && before.afterWait))
        node.afterWait = true;
    }
  }
}

void BlockScheduler::orderCollectives() {
  for (auto [i, node] : llvm::enumerate(nodes))
    if (node.kind == Kind::Collective)
      collectives.push_back(i);
  llvm::stable_sort(collectives, [&](unsigned a, unsigned b) {
    return nodes[a].frontier < nodes[b].frontier;
  });
  for (unsigned i = 1; i < collectives.size(); ++i)
    addEdge(collectives[i - 1], collectives[i]);
}

void BlockScheduler::place(unsigned index) {
  Node &node = nodes[index];
  assert(!node.placed && node.missing == 0 && "placed out of order");
  node.placed = true;
  order.push_back(node.op);
  for (unsigned succ : node.succs) {
    Node &after = nodes[succ];
    if (--after.missing == 0 &&
        (after.kind == Kind::Chain || after.kind == Kind::Collective))
      ready.push(succ);
  }
}

void BlockScheduler::pull(unsigned index) {
  if (nodes[index].placed)
    return;
  // Post-order over the unplaced ancestors; then the ones that became
  // ready on the way.
  SmallVector<std::pair<unsigned, unsigned>> stack{{index, 0}};
  DenseSet<unsigned> visiting{index};
  while (!stack.empty()) {
    auto &[current, next] = stack.back();
    Node &node = nodes[current];
    if (next < node.preds.size()) {
      unsigned pred = node.preds[next++];
      if (!nodes[pred].placed && visiting.insert(pred).second)
        stack.push_back({pred, 0});
      continue;
    }
    unsigned done = current;
    stack.pop_back();
    if (!nodes[done].placed)
      place(done);
  }
}

void BlockScheduler::scanReady(int position) {
  while (scanned < collectives.size() &&
         nodes[collectives[scanned]].frontier <= position) {
    if (!nodes[collectives[scanned]].afterWait)
      lastReady = scanned;
    ++scanned;
  }
  if (lastReady >= 0)
    pull(collectives[lastReady]);
}

void BlockScheduler::emitRemarks() {
  for (Node &node : nodes)
    if (node.kind == Kind::Compute && node.effects.collective)
      node.op->emitRemark()
          << "ddp-schedule-overlap: this '" << node.op->getName()
          << "' contains collectives and ops whose side effects the "
             "scheduler cannot reason about: it stays where it is, and "
             "nothing overlaps its collectives";
  for (unsigned index : collectives) {
    Node &node = nodes[index];
    if (!isa<AllReduceStartOp>(node.op) && !quiet.contains(node.op))
      node.op->emitRemark()
          << "ddp-schedule-overlap: the collectives inside this '"
          << node.op->getName()
          << "' run as one unit, waiting for their results inside it: "
             "nothing outside it overlaps them";
    if (node.frontierNode < 0)
      continue;
    Operation *barrier = nodes[node.frontierNode].op;
    if (!nodes[node.frontierNode].effects.unknown)
      continue;
    node.op->emitRemark()
        << "ddp-schedule-overlap: this collective cannot start before '"
        << barrier->getName() << "' at " << describeLocation(barrier->getLoc())
        << ": that op has side effects the scheduler cannot reason about";
  }
}

void BlockScheduler::run() {
  if (block.empty() || !block.back().hasTrait<OpTrait::IsTerminator>())
    return;
  buildNodes();
  if (llvm::none_of(nodes, [](const Node &node) {
        return node.kind == Kind::Collective;
      }))
    return;
  addDependences();
  computeFrontiers();
  orderCollectives();
  emitRemarks();
  for (auto [i, node] : llvm::enumerate(nodes)) {
    node.missing = node.preds.size();
    if (node.missing == 0 &&
        (node.kind == Kind::Chain || node.kind == Kind::Collective))
      ready.push(i);
  }
  auto drain = [&] {
    while (!ready.empty()) {
      unsigned next = ready.top();
      ready.pop();
      if (!nodes[next].placed)
        place(next);
    }
  };
  drain();
  scanReady(-1);
  drain();
  unsigned terminator = nodes.size() - 1;
  for (auto [i, node] : llvm::enumerate(nodes)) {
    if (node.kind != Kind::Compute || i == terminator)
      continue;
    pull(i);
    drain();
    scanReady(node.position);
    drain();
  }
  // Chain ops that nothing needed (a state store after the last wait) and
  // what they need: before the terminator, in program order.
  for (unsigned i = 0; i < terminator; ++i) {
    pull(i);
    drain();
  }
  place(terminator);
  for (Operation *op : order)
    op->moveBefore(&block, block.end());
}

/// Whether `op` contains a collective.
bool containsCollective(Operation *op) {
  return op
      ->walk([](Operation *nested) {
        return isa<AllReduceOp, AllReduceStartOp>(nested)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Versions a single-block function on the one condition that all its
/// top-level scf.if ops around collectives test (for example a scheme's
/// warm-up, PowerSGD's step < start-iter): the pure ops computing the
/// condition move up to where their operands are; everything after the
/// condition (but the terminator) becomes one scf.if whose branches are
/// copies of it with each such scf.if replaced by the branch it takes. Returns
/// the new scf.if, or null (with a remark where versioning was wanted but is
/// not possible).
scf::IfOp unswitchOnSharedCondition(func::FuncOp function,
                                    bool &alreadyVersioned) {
  Region &body = function.getBody();
  if (!body.hasOneBlock())
    return {};
  Block &block = body.front();
  SmallVector<scf::IfOp> branches;
  for (Operation &op : block)
    if (auto ifOp = dyn_cast<scf::IfOp>(op);
        ifOp && ifOp.elseBlock() && containsCollective(ifOp))
      branches.push_back(ifOp);
  if (branches.empty())
    return {};
  // Already versioned (by an earlier run), or nothing to gain: the one
  // branch is the last op before the terminator.
  if (branches.size() == 1 &&
      branches.front()->getNextNode() == block.getTerminator()) {
    alreadyVersioned = true;
    return branches.front();
  }
  // The same value, or the same pure op on the same operands (PowerSGD
  // computes the condition once per bucket).
  Value condition = branches.front().getCondition();
  auto sameCondition = [&](Value other) {
    if (other == condition)
      return true;
    Operation *a = condition.getDefiningOp(), *b = other.getDefiningOp();
    return a && b && isPure(a) &&
           OperationEquivalence::isEquivalentTo(
               a, b, OperationEquivalence::IgnoreLocations);
  };
  for (scf::IfOp branch : branches)
    if (!sameCondition(branch.getCondition())) {
      branch->emitRemark()
          << "ddp-schedule-overlap: not versioning @" << function.getSymName()
          << ": its branches around collectives test different conditions; "
             "each runs as one unit";
      return {};
    }
  // A collective started before the first branch and waited for after it
  // would be waited for in both versions: leave such a function alone
  // (checked before anything moves).
  DenseSet<Operation *> fromFirstBranch;
  for (Operation *op = branches.front(); op != block.getTerminator();
       op = op->getNextNode())
    fromFirstBranch.insert(op);
  for (Operation *op : fromFirstBranch) {
    WalkResult crossing = op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands()) {
        if (!isa<RequestType>(operand.getType()))
          continue;
        Operation *def = operand.getDefiningOp();
        Operation *ancestor = def ? block.findAncestorOpInBlock(*def) : nullptr;
        if (!ancestor || !fromFirstBranch.contains(ancestor))
          return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (crossing.wasInterrupted()) {
      op->emitRemark() << "ddp-schedule-overlap: not versioning @"
                       << function.getSymName()
                       << " on its branches' condition: this op waits for a "
                          "collective started before the branches; they run "
                          "as one unit each";
      return {};
    }
  }
  // Hoist the pure ops the condition is computed with.
  Operation *conditionOp = condition.getDefiningOp();
  if (conditionOp) {
    SmallVector<Operation *> slice;
    SmallVector<Operation *> worklist{conditionOp};
    DenseSet<Operation *> seen{conditionOp};
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!isPure(op) || op->getNumRegions() != 0)
        continue;
      slice.push_back(op);
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && def->getBlock() == &block && seen.insert(def).second)
          worklist.push_back(def);
    }
    if (!isPure(conditionOp) && !isa<StateLoadOp>(conditionOp))
      return {};
    llvm::sort(slice, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    // Ops with no operand from this block go first, in their order (so
    // that scheduling again moves nothing).
    Operation *first = nullptr;
    for (Operation *op : slice) {
      Operation *after = nullptr;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && def->getBlock() == &block &&
            (!after || after->isBeforeInBlock(def)))
          after = def;
      if (!after && first)
        after = first;
      if (after)
        op->moveAfter(after);
      else
        op->moveBefore(&block, block.begin());
      if (!first || first == after)
        first = op;
    }
  }
  // The ops to version, and the values the terminator takes from them.
  Operation *terminator = block.getTerminator();
  SmallVector<Operation *> versioned;
  for (auto it = conditionOp ? std::next(conditionOp->getIterator())
                             : block.begin();
       &*it != terminator; ++it)
    versioned.push_back(&*it);
  DenseSet<Operation *> inRange(versioned.begin(), versioned.end());
  SmallVector<unsigned> forwarded;
  for (OpOperand &operand : terminator->getOpOperands())
    if (Operation *def = operand.get().getDefiningOp();
        def && inRange.contains(def))
      forwarded.push_back(operand.getOperandNumber());
  SmallVector<Type> types;
  for (unsigned i : forwarded)
    types.push_back(terminator->getOperand(i).getType());
  DenseSet<Operation *> isBranch;
  for (scf::IfOp branch : branches)
    isBranch.insert(branch);

  OpBuilder builder(terminator);
  auto version = scf::IfOp::create(builder, function.getLoc(), types, condition,
                                   /*withElseRegion=*/true);
  auto fill = [&](Block *into, bool warm) {
    OpBuilder b = OpBuilder::atBlockEnd(into);
    IRMapping mapping;
    for (Operation *op : versioned) {
      if (!isBranch.contains(op)) {
        b.clone(*op, mapping);
        continue;
      }
      auto branch = cast<scf::IfOp>(op);
      Block *taken = warm ? branch.thenBlock() : branch.elseBlock();
      for (Operation &inner : taken->without_terminator())
        b.clone(inner, mapping);
      for (auto [result, yielded] : llvm::zip(
               branch.getResults(), taken->getTerminator()->getOperands()))
        mapping.map(result, mapping.lookupOrDefault(yielded));
    }
    SmallVector<Value> results;
    for (unsigned i : forwarded)
      results.push_back(mapping.lookupOrDefault(terminator->getOperand(i)));
    scf::YieldOp::create(b, function.getLoc(), results);
  };
  // fill adds the terminators (the builder adds them only without results).
  for (Block *branch : {version.thenBlock(), version.elseBlock()})
    if (!branch->empty())
      branch->back().erase();
  fill(version.thenBlock(), true);
  fill(version.elseBlock(), false);
  for (auto [k, i] : llvm::enumerate(forwarded))
    terminator->setOperand(i, version.getResult(k));
  for (Operation *op : llvm::reverse(versioned)) {
    op->dropAllUses();
    op->erase();
  }
  // The other branches' copies of the condition are dead now.
  for (Block *branch : {version.thenBlock(), version.elseBlock()})
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*branch)))
      if (op.use_empty() && op.getNumRegions() == 0 &&
          !op.hasTrait<OpTrait::IsTerminator>() && isPure(&op))
        op.erase();
  return version;
}

/// Splits every ddp.allreduce under `root` into a start and a wait.
unsigned splitAllReduces(Operation *root) {
  SmallVector<AllReduceOp> ops;
  root->walk([&](AllReduceOp op) { ops.push_back(op); });
  IRRewriter rewriter(root->getContext());
  for (AllReduceOp op : ops) {
    rewriter.setInsertionPoint(op);
    auto start =
        AllReduceStartOp::create(rewriter, op.getLoc(), op.getKind(),
                                 op.getInputs(), op.getRole(), op.getGroup());
    auto wait = WaitOp::create(rewriter, op.getLoc(), start.getRequest());
    rewriter.replaceOp(op, wait.getResults());
  }
  return ops.size();
}

struct DDPScheduleOverlapPass
    : public PassWithOptionNames<ddp::impl::DDPScheduleOverlapBase<DDPScheduleOverlapPass>> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (function.isExternal())
      return;
    // A bucket still to be compressed as ddp-plan chose would lose its
    // decision in the started allreduce, and be sent plain.
    if (failed(refusePlannedBuckets(function, getArgument(),
                                    "would start this allreduce as it is")))
      return signalPassFailure();
    DenseSet<Operation *> quiet;
    bool alreadyVersioned = false;
    if (unswitch)
      if (scf::IfOp version =
              unswitchOnSharedCondition(function, alreadyVersioned)) {
        quiet.insert(version);
        if (!alreadyVersioned)
          ++numUnswitched;
      }
    numStarted += splitAllReduces(function);
    // Inner blocks first: an op with regions is one node outside, whatever
    // its blocks' order.
    SmallVector<Block *> blocks;
    function->walk<WalkOrder::PostOrder>(
        [&](Block *block) { blocks.push_back(block); });
    for (Block *block : blocks)
      BlockScheduler(*block, quiet).run();
  }
};

} // namespace
