// Factories: no tensor operands; every result dim is a pass-through factor
// (a sharded result is built locally at its local size). Propagation keeps
// them replicated unless sharding is free, so rank-dependent values (arange
// offsets) never arise here: consumers slice replicated tensors locally.
//
//   aten.full.default([16, 16], -inf)       -> () -> ([i, j]) {i=16, j=16}
//   aten.arange.start_step(0, 16)           -> () -> ([i]) {i=16 replicated}
//   aten.new_zeros.default(x[8, 4], [16])   -> ([i, j]) -> ([k]) {i=8, j=4, k=16} value-independent(0)
#include "sharding/rules/Helpers.h"

namespace spmd::sharding {
namespace {

Expected<OpShardingRule> factoryRule(const ir::Node& node) {
  RuleBuilder b(node);
  for (int r = 0; r < b.numResults(); ++r) {
    const auto& shape = b.resultShape(r);
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      if (shape[static_cast<size_t>(d)] != 1) b.result(r, d, b.factor(shape[static_cast<size_t>(d)]));
  }
  return b.replicateRest().build();
}

// new_ones(self, size) and the like: a factory whose `self` gives only the
// dtype and device, so it may be in any layout, pending too.
Expected<OpShardingRule> newFactoryRule(const ir::Node& node) {
  RuleBuilder b(node);
  if (b.numOperands() != 1) return Status::error("new_* rule: expected self");
  rules::addOwnFactors(b, 0);
  for (int r = 0; r < b.numResults(); ++r) {
    const auto& shape = b.resultShape(r);
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      if (shape[static_cast<size_t>(d)] != 1) b.result(r, d, b.factor(shape[static_cast<size_t>(d)]));
  }
  return b.linear(Linearity::ValueIndependent, {0}).replicateRest().build();
}

// Values depend on the position (arange) or on a random stream (rand,
// randperm): replicated.
Expected<OpShardingRule> replicatedFactory(const ir::Node& node) {
  RuleBuilder b(node);
  return b.replicateRest().build();
}

}  // namespace

void registerFactoryRules(RuleRegistry& r) {
  r.add("aten.arange.default", replicatedFactory);
  r.add("aten.arange.start", replicatedFactory);
  r.add("aten.arange.start_step", replicatedFactory);
  r.add("aten.empty.memory_format", factoryRule);
  r.add("aten.empty_permuted.default", factoryRule);
  // The expander makes size local and stride the local sizes' row-major strides.
  r.add("aten.empty_strided.default", factoryRule);
  r.add("aten.full.default", factoryRule);
  r.add({"aten.new_empty.default", "aten.new_empty_strided.default", "aten.new_ones.default",
         "aten.new_zeros.default"},
        newFactoryRule);
  r.add("aten.ones.default", factoryRule);
  r.add("aten.rand.default", replicatedFactory);
  r.add("aten.randn.default", replicatedFactory);
  r.add("aten.randperm.default", replicatedFactory);
  r.add("aten.scalar_tensor.default", factoryRule);
  r.add("aten.zeros.default", factoryRule);
}

}  // namespace spmd::sharding
