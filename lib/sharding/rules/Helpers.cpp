// Shared rule shapes (see Helpers.h).
#include "sharding/rules/Helpers.h"

#include <algorithm>
#include <utility>

namespace spmd::sharding::rules {

void addBroadcastFactors(RuleBuilder& b, int result, const std::vector<int64_t>& replicatedDims) {
  const auto& out = b.resultShape(result);
  int64_t rank = static_cast<int64_t>(out.size());
  for (int64_t d = 0; d < rank; ++d) {
    bool replicated = std::find(replicatedDims.begin(), replicatedDims.end(), d) != replicatedDims.end();
    int f = b.factor(out[static_cast<size_t>(d)],
                     replicated ? FactorKind::NeedReplication : FactorKind::PassThrough);
    for (int i = 0; i < b.numResults(); ++i)
      if (b.resultShape(i).size() == out.size()) b.result(i, d, f);
    for (int i = 0; i < b.numOperands(); ++i) {
      const auto& in = b.operandShape(i);
      int64_t od = d - (rank - static_cast<int64_t>(in.size()));
      if (od >= 0 && in[static_cast<size_t>(od)] == out[static_cast<size_t>(d)] &&
          out[static_cast<size_t>(d)] != 1)
        b.operand(i, od, f);
    }
  }
}

RuleFn pointwise(Linearity lin, const std::vector<int>& linearOperands) {
  return [lin, linearOperands](const ir::Node& node) -> Expected<OpShardingRule> {
    RuleBuilder b(node);
    if (b.numResults() == 0) return Status::error("pointwise rule: op has no tensor result");
    addBroadcastFactors(b);
    // add(x, 2.0) has one tensor operand and is not linear in it.
    bool jointWithScalar = lin == Linearity::Joint && b.numOperands() < 2;
    if (lin != Linearity::None && !jointWithScalar) {
      std::vector<int> ops;
      for (int i : linearOperands)
        if (i < b.numOperands()) ops.push_back(i);
      if (!linearOperands.empty() && ops.empty()) return b.replicateRest().build();
      b.linear(lin, ops);
    }
    return b.replicateRest().build();
  };
}

RuleFn pointwiseExceptDims(const char* dimArg, Linearity lin, const std::vector<int>& linearOperands,
                           std::vector<int64_t> fallback) {
  return [dimArg, lin, linearOperands,
          fallback = std::move(fallback)](const ir::Node& node) -> Expected<OpShardingRule> {
    RuleBuilder b(node);
    if (b.numResults() == 0) return Status::error("rule: op has no tensor result");
    int64_t rank = static_cast<int64_t>(b.resultShape(0).size());
    addBroadcastFactors(b, 0, dimsArg(node, dimArg, rank, fallback));
    if (lin != Linearity::None) b.linear(lin, linearOperands);
    return b.replicateRest().build();
  };
}

std::vector<int64_t> dimsArg(const ir::Node& node, const char* name, int64_t rank,
                             std::vector<int64_t> fallback) {
  const ir::Argument* a = node.input(name);
  std::vector<int64_t> dims;
  if (!a || a->kind == ir::Argument::Kind::None)
    dims = std::move(fallback);
  else
    dims = a->ints;
  for (auto& d : dims) d = normalizeDim(d, rank);
  return dims;
}

int64_t intArg(const ir::Node& node, const char* name, int64_t fallback) {
  const ir::Argument* a = node.input(name);
  if (!a || a->ints.empty() || a->kind == ir::Argument::Kind::None) return fallback;
  return a->ints[0];
}

bool boolArg(const ir::Node& node, const char* name, bool fallback) {
  const ir::Argument* a = node.input(name);
  if (!a || a->kind != ir::Argument::Kind::Bool) return fallback;
  return a->ints[0] != 0;
}

double scalarArg(const ir::Node& node, const char* name, double fallback) {
  const ir::Argument* a = node.input(name);
  if (!a) return fallback;
  if (a->kind == ir::Argument::Kind::Float || a->kind == ir::Argument::Kind::SymFloat)
    return a->floats.empty() ? fallback : a->floats[0];
  if (a->kind == ir::Argument::Kind::Int || a->kind == ir::Argument::Kind::Bool ||
      a->kind == ir::Argument::Kind::SymInt)
    return a->ints.empty() ? fallback : static_cast<double>(a->ints[0]);
  return fallback;
}

bool isFloatingType(ir::ScalarType t) {
  using S = ir::ScalarType;
  switch (t) {
    case S::Half:
    case S::Float:
    case S::Double:
    case S::BFloat16:
    case S::ComplexHalf:
    case S::ComplexFloat:
    case S::ComplexDouble:
    case S::Float8E4M3FN:
    case S::Float8E5M2:
    case S::Float8E4M3FNUZ:
    case S::Float8E5M2FNUZ:
      return true;
    default:
      return false;
  }
}

bool castIsLinear(ir::ScalarType from, ir::ScalarType to) {
  // int(0.6) + int(0.6) != int(1.2); bool(1) + bool(-1) != bool(0).
  return isFloatingType(to) || (!isFloatingType(from) && to != ir::ScalarType::Bool);
}

RuleFn cast(int operand) {
  return [operand](const ir::Node& node) -> Expected<OpShardingRule> {
    RuleBuilder b(node);
    auto ops = tensorOperands(node);
    auto res = tensorResults(node);
    if (res.empty() || static_cast<int>(ops.size()) <= operand)
      return Status::error("cast rule: expected a tensor operand and result");
    addBroadcastFactors(b);
    if (castIsLinear(ops[static_cast<size_t>(operand)]->type().dtype, res[0]->type().dtype))
      b.linear(Linearity::Each, {operand});
    return b.replicateRest().build();
  };
}

void addOwnFactors(RuleBuilder& b, int i) {
  const auto& shape = b.operandShape(i);
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (shape[static_cast<size_t>(d)] != 1) b.operand(i, d, b.factor(shape[static_cast<size_t>(d)]));
}

// Operand index (tensorOperands order) of the first tensor of argument
// `name`; -1 when the argument is absent or None.
int operandIndex(const ir::Node& node, std::string_view name) {
  int i = 0;
  for (const auto& a : node.inputs()) {
    bool match = a.name == name;
    for (ir::Value* v : a.arg.values) {
      if (!v || !v->isTensor()) continue;
      if (match) return i;
      ++i;
    }
    if (match) return -1;
  }
  return -1;
}

// Result index (tensorResults order) of output `k`; -1 when it is None.
int resultIndex(const ir::Node& node, size_t k) {
  int i = 0;
  const auto& outs = node.outputs();
  for (size_t o = 0; o < outs.size(); ++o) {
    for (ir::Value* v : outs[o].values) {
      if (!v || !v->isTensor()) continue;
      if (o == k) return i;
      ++i;
    }
    if (o == k) return -1;
  }
  return -1;
}

}  // namespace spmd::sharding::rules
