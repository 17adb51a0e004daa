// The one registry of op sharding rules, keyed by "aten.op.overload".
//
//   RuleRegistry r;
//   registerAllRules(r);                     // every family, explicitly
//   const RuleFn* fn = r.find("aten.mm.default");
//   OpShardingRule rule = *(*fn)(node);      // ([i, j], [j, k]) -> ([i, k]) ...
//
// Families live in rules/<family>.cpp, each exposing register<Family>Rules;
// registerAllRules calls them all (no static self-registration: the linker
// would drop it). Within a family, entries are alphabetical.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sharding/Rule.h"

namespace spmd::sharding {

/// Maps op targets to rule functions.
class RuleRegistry {
 public:
  /// Registers `fn` for `target`; registering a target twice aborts.
  void add(std::string target, RuleFn fn);
  /// Registers the same rule for several targets.
  void add(std::initializer_list<std::string_view> targets, const RuleFn& fn);
  /// Registers `fn` for `target`, replacing a rule it had (a schema's rules).
  void set(std::string target, RuleFn fn);
  /// The rule of `target`, or null.
  const RuleFn* find(std::string_view target) const;
  /// Every registered target, sorted.
  std::vector<std::string> targets() const;

 private:
  std::map<std::string, RuleFn, std::less<>> rules_;
};

void registerAttentionRules(RuleRegistry& r);
void registerConvRules(RuleRegistry& r);
void registerFactoryRules(RuleRegistry& r);
void registerIndexingRules(RuleRegistry& r);
void registerLinalgRules(RuleRegistry& r);
void registerMatmulRules(RuleRegistry& r);
void registerMetaRules(RuleRegistry& r);
void registerMoeRules(RuleRegistry& r);
void registerRingAttentionRules(RuleRegistry& r);
void registerMovementRules(RuleRegistry& r);
void registerNormRules(RuleRegistry& r);
void registerPointwiseRules(RuleRegistry& r);
void registerReductionRules(RuleRegistry& r);
void registerViewRules(RuleRegistry& r);

/// Registers every family.
void registerAllRules(RuleRegistry& r);
/// A registry with every family registered (built once).
const RuleRegistry& defaultRuleRegistry();

/// Each node's rule under `registry` in the factor notation, one line per
/// node, for `spmdc rules` and the lit rule tests:
///
///   %mm aten.mm.default: ([i, j], [j, k]) -> ([i, k]) {j reduction(sum)} linear-each(0, 1)
///   %foo my.op.default: no rule
///
/// A rule that refuses the node prints "refused: <its message>".
std::string printNodeRules(const ir::Graph& graph, const RuleRegistry& registry);

}  // namespace spmd::sharding
