// The rule registry and the list of families.
#include "sharding/RuleRegistry.h"

namespace spmd::sharding {

void RuleRegistry::add(std::string target, RuleFn fn) {
  SPMD_CHECK(!rules_.count(target));
  rules_.emplace(std::move(target), std::move(fn));
}

void RuleRegistry::add(std::initializer_list<std::string_view> targets, const RuleFn& fn) {
  for (std::string_view t : targets) add(std::string(t), fn);
}

void RuleRegistry::set(std::string target, RuleFn fn) { rules_[std::move(target)] = std::move(fn); }

const RuleFn* RuleRegistry::find(std::string_view target) const {
  auto it = rules_.find(target);
  return it == rules_.end() ? nullptr : &it->second;
}

std::vector<std::string> RuleRegistry::targets() const {
  std::vector<std::string> out;
  out.reserve(rules_.size());
  for (const auto& [t, fn] : rules_) out.push_back(t);
  return out;
}

void registerAllRules(RuleRegistry& r) {
  registerAttentionRules(r);
  registerConvRules(r);
  registerFactoryRules(r);
  registerIndexingRules(r);
  registerLinalgRules(r);
  registerMatmulRules(r);
  registerMetaRules(r);
  registerMoeRules(r);
  registerMovementRules(r);
  registerNormRules(r);
  registerPointwiseRules(r);
  registerReductionRules(r);
  registerRingAttentionRules(r);
  registerViewRules(r);
}

const RuleRegistry& defaultRuleRegistry() {
  static const RuleRegistry kRegistry = [] {
    RuleRegistry r;
    registerAllRules(r);
    return r;
  }();
  return kRegistry;
}

std::string printNodeRules(const ir::Graph& graph, const RuleRegistry& registry) {
  std::string out;
  for (const auto& node : graph.nodes()) {
    out += "%" + node->name() + " " + node->target() + ": ";
    const RuleFn* fn = registry.find(node->target());
    if (!fn) {
      out += "no rule\n";
      continue;
    }
    Expected<OpShardingRule> rule = (*fn)(*node);
    out += rule ? rule->str() : "refused: " + rule.status().message();
    out += "\n";
  }
  return out;
}

}  // namespace spmd::sharding
