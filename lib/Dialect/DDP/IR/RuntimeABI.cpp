//===- RuntimeABI.cpp - the runtime's ABI as the compiler sees it ---------===//
//
// Part of ddp-opt, under the Apache License v2.0 with LLVM Exceptions.
// See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception

#include "ddp/Dialect/DDP/IR/RuntimeABI.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::ddp;

namespace {
/// DDPRT_FOR_EACH_DTYPE's kind column.
enum class Kind { FLOAT, BFLOAT, INT };

/// Whether an MLIR element type is the runtime's type of `bytes` bytes of
/// `kind`. Verifiers ask this for every operand of every ddp op, so it
/// tests the type in place; typeOf below builds the same types, for
/// messages only.
bool matches(Type type, Kind kind, unsigned bytes) {
  switch (kind) {
  case Kind::FLOAT:
    // The IEEE 754 binary formats (not tf32, not the f8 variants).
    return (bytes == 2 && type.isF16()) || (bytes == 4 && type.isF32()) ||
           (bytes == 8 && type.isF64());
  case Kind::BFLOAT:
    return bytes == 2 && type.isBF16();
  case Kind::INT:
    return type.isSignlessInteger(8 * bytes);
  }
  return false;
}

/// The type a row of the list names, for messages.
Type typeOf(MLIRContext *context, Kind kind, unsigned bytes) {
  Builder b(context);
  switch (kind) {
  case Kind::FLOAT:
    return bytes == 2   ? Type(b.getF16Type())
           : bytes == 4 ? Type(b.getF32Type())
                        : b.getF64Type();
  case Kind::BFLOAT:
    return b.getBF16Type();
  case Kind::INT:
    return b.getIntegerType(8 * bytes);
  }
  return {};
}

struct Row {
  ddprt_dtype dtype;
  Kind kind;
  unsigned bytes;
  bool compute;
};

constexpr Row kRows[] = {
#define DDP_RUNTIME_ROW(NAME, value, bytes, kind, compute)                     \
  {DDPRT_##NAME, Kind::kind, bytes, compute},
    DDPRT_FOR_EACH_DTYPE(DDP_RUNTIME_ROW)
#undef DDP_RUNTIME_ROW
};
} // namespace

std::optional<ddprt_dtype> mlir::ddp::getRuntimeDtype(Type type) {
  for (const Row &row : kRows)
    if (matches(type, row.kind, row.bytes))
      return row.dtype;
  return std::nullopt;
}

bool mlir::ddp::isComputeElementType(Type type) {
  for (const Row &row : kRows)
    if (row.compute && matches(type, row.kind, row.bytes))
      return true;
  return false;
}

bool mlir::ddp::isStateElementType(Type type) {
  return getRuntimeDtype(type).has_value();
}

std::string mlir::ddp::computeElementTypeNames(MLIRContext *context) {
  SmallVector<Type> types;
  for (const Row &row : kRows)
    if (row.compute)
      types.push_back(typeOf(context, row.kind, row.bytes));
  std::string text;
  llvm::raw_string_ostream os(text);
  for (auto [i, type] : llvm::enumerate(types)) {
    if (i > 0)
      os << (i + 1 == types.size() ? " or " : ", ");
    os << type;
  }
  return text;
}

ddprt_reduction mlir::ddp::getRuntimeReduction(ReductionKind kind) {
  switch (kind) {
  case ReductionKind::sum:
    return DDPRT_SUM;
  case ReductionKind::mean:
    return DDPRT_MEAN;
  }
  llvm_unreachable("unknown reduction");
}

ddprt_world_scale mlir::ddp::getRuntimeScale(std::optional<WorldScale> scale) {
  if (!scale)
    return DDPRT_SCALE_NONE;
  switch (*scale) {
  case WorldScale::inverse_world_size:
    return DDPRT_SCALE_INVERSE_WORLD_SIZE;
  case WorldScale::world_size:
    return DDPRT_SCALE_WORLD_SIZE;
  case WorldScale::inverse_node_count:
    return DDPRT_SCALE_INVERSE_NODE_COUNT;
  case WorldScale::node_count:
    return DDPRT_SCALE_NODE_COUNT;
  }
  llvm_unreachable("unknown scale");
}

// The dialect's roles are the runtime's list (DDPRT_FOR_EACH_ROLE), case
// for case: same names, same values, no more and no fewer.
#define DDP_CHECK_ROLE(NAME, value, name)                                      \
  static_assert(static_cast<uint32_t>(CommRole::name) == value &&              \
                    DDPRT_ROLE_##NAME == value,                                \
                "ddp's CommRole '" #name "' is not the runtime's");
DDPRT_FOR_EACH_ROLE(DDP_CHECK_ROLE)
#undef DDP_CHECK_ROLE
static_assert(getMaxEnumValForCommRole() + 1 == DDPRT_ROLE_COUNT,
              "ddp's CommRole has a case the runtime's roles lack");

ddprt_role mlir::ddp::getRuntimeRole(CommRole role) {
  return static_cast<ddprt_role>(static_cast<uint32_t>(role));
}

ddprt_group mlir::ddp::getRuntimeGroup(CommGroup group) {
  switch (group) {
  case CommGroup::world:
    return DDPRT_GROUP_WORLD;
  case CommGroup::node:
    return DDPRT_GROUP_NODE;
  case CommGroup::across_nodes:
    return DDPRT_GROUP_ACROSS_NODES;
  }
  llvm_unreachable("unknown group");
}
