// Matrix products: batch, row and column factors pass through, the
// contracted factor is a reduction (sharding it leaves the result pending).
//
//   aten.mm.default(a[32, 64], b[64, 256])   -> ([i, j], [j, k]) -> ([i, k]) {i=32, j=64 reduction(sum),
//   k=256} aten.addmm.default(bias[256], a, b)      -> ([k], [i, j], [j, k]) -> ([i, k]) ..., bias additive
//   aten.bmm.default(a[8, 16, 8], b[8, 8, 16]) -> ([h, i, j], [h, j, k]) -> ([h, i, k])
#include "sharding/rules/Helpers.h"

namespace spmd::sharding {
namespace {

// mm/bmm with operands at `a`, `b`; `batch` leading dims shared.
void addProductFactors(RuleBuilder& b, int a, int bo, int64_t batch) {
  const auto& as = b.operandShape(a);
  const auto& bs = b.operandShape(bo);
  std::vector<int64_t> none(static_cast<size_t>(b.numOperands()), -1);
  auto dims = [&](std::initializer_list<std::pair<int, int64_t>> entries) {
    std::vector<int64_t> d = none;
    for (auto [op, dim] : entries) d[static_cast<size_t>(op)] = dim;
    return d;
  };
  for (int64_t d = 0; d < batch; ++d) b.addFactor(dims({{a, d}, {bo, d}}), {d}, as[static_cast<size_t>(d)]);
  b.addFactor(dims({{a, batch}}), {batch}, as[static_cast<size_t>(batch)]);
  b.addFactor(dims({{a, batch + 1}, {bo, batch}}), {-1}, as[static_cast<size_t>(batch + 1)],
              FactorKind::Reduction);
  b.addFactor(dims({{bo, batch + 1}}), {batch + 1}, bs[static_cast<size_t>(batch + 1)]);
}

Expected<OpShardingRule> productRule(const ir::Node& node, int64_t batch) {
  RuleBuilder b(node);
  if (b.numOperands() != 2 || b.numResults() != 1)
    return Status::error("matmul rule: expected two tensor operands");
  addProductFactors(b, 0, 1, batch);
  return b.linear(Linearity::Each, {0, 1}).replicateRest().build();
}

// addmm(bias, a, b): the bias broadcasts against the [m, n] result.
Expected<OpShardingRule> addmmRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 3) return Status::error("addmm rule: expected three tensor operands");
  addProductFactors(b, 1, 2, 0);
  const auto& bias = b.operandShape(0);
  const auto& out = b.resultShape(0);
  // Factor ids from addProductFactors: 0 = m, 1 = k (reduction), 2 = n.
  for (int64_t d = 0; d < static_cast<int64_t>(bias.size()); ++d) {
    int64_t od = d + static_cast<int64_t>(out.size() - bias.size());
    if (bias[static_cast<size_t>(d)] == out[static_cast<size_t>(od)] && out[static_cast<size_t>(od)] != 1)
      b.operand(0, d, od == 0 ? 0 : 2);
  }
  return b.additive(0).linear(Linearity::Joint, {0, 1}).replicateRest().build();
}

// linear(input[..., in], weight[out, in], bias[out]?) -> [..., out].
Expected<OpShardingRule> linearRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() < 2) return Status::error("linear rule: expected input and weight");
  const auto& in = b.operandShape(0);
  int64_t r = static_cast<int64_t>(in.size());
  std::vector<int64_t> none(static_cast<size_t>(b.numOperands()), -1);
  for (int64_t d = 0; d + 1 < r; ++d) {
    std::vector<int64_t> ops = none;
    ops[0] = d;
    b.addFactor(ops, {d}, in[static_cast<size_t>(d)]);
  }
  std::vector<int64_t> k = none, n = none;
  k[0] = r - 1;
  k[1] = 1;
  n[1] = 0;
  if (b.numOperands() > 2) n[2] = 0;
  b.addFactor(k, {-1}, in[static_cast<size_t>(r - 1)], FactorKind::Reduction);
  b.addFactor(n, {r - 1}, b.operandShape(1)[0]);
  // With a bias, pending sums flow through input and bias together (as in
  // addmm); without one, through either operand.
  if (b.numOperands() > 2) return b.additive(2).linear(Linearity::Joint, {0, 2}).replicateRest().build();
  return b.linear(Linearity::Each, {0, 1}).replicateRest().build();
}

}  // namespace

void registerMatmulRules(RuleRegistry& r) {
  r.add("aten.addmm.default", addmmRule);
  r.add("aten.bmm.default", [](const ir::Node& n) { return productRule(n, 1); });
  r.add("aten.linear.default", linearRule);
  r.add("aten.mm.default", [](const ir::Node& n) { return productRule(n, 0); });
}

}  // namespace spmd::sharding
