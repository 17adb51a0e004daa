// The per-node planner of sharding propagation (internal to spmd_sharding):
// for one node with a rule, the cheapest candidate per mesh axis given its
// operands' current layouts. Propagation.h has the worked example and the
// invariants; propagate() runs this once per node and pass.
//
//   mm(%x [S(0)], %w [R]) on mesh 4: candidates per axis: replicate (gather
//   %x: one all_gather), i (keep S(0): free), k (slice %w: local), j (pending
//   sum: slice both, result P(sum), priced with its later all_reduce) -> i
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/Graph.h"
#include "sharding/CostModel.h"
#include "sharding/Propagation.h"
#include "sharding/Rule.h"
#include "support/Hash.h"

namespace spmd::sharding::detail {

/// Estimated cost of turning placement `cur` into `req` along mesh axis
/// `axis` of size `n`, for a local tensor of `bytes`.
double transitionCost(const Placement& cur, const Placement& req, int64_t axis, int64_t n, int64_t bytes,
                      const CostModel& cm);

/// The node's layouts: per mesh axis the cheapest candidate of `rule` given
/// the operands' `current` layouts and the layouts each operand was already
/// redistributed into (`available`, one list per operand, may be null).
/// `resultsSink`: the results reach only outputs and anchors.
NodeSharding planNodeLayouts(const std::vector<ir::Value*>& operands, const std::vector<ir::Value*>& results,
                             const OpShardingRule& rule, const std::vector<ShardingSpec>& current,
                             const std::vector<const std::vector<ShardingSpec>*>& available, const Mesh& mesh,
                             const CostModel& cm, bool resultsSink);

/// Every candidate on the 1-D `mesh`, whatever its cost (rule text included).
std::vector<NodeSharding> allNodeLayouts(const std::vector<ir::Value*>& operands,
                                         const std::vector<ir::Value*>& results, const OpShardingRule& rule,
                                         const std::vector<ShardingSpec>& current,
                                         const std::vector<const std::vector<ShardingSpec>*>& available,
                                         const Mesh& mesh, const CostModel& cm);

/// Plans of nodes that plan alike, so repeated layers plan once: the same
/// rule (its text and additive operands), operand and result types, current
/// and available operand layouts and sink flag give the same plan on one
/// mesh and cost model (the owner clears it when those change).
class PlanMemo {
 public:
  /// The interned class of a node with `rule` (whose str() is `ruleText`)
  /// over these values.
  int classOf(const std::string& ruleText, const OpShardingRule& rule,
              const std::vector<ir::Value*>& operands, const std::vector<ir::Value*>& results);
  /// planNodeLayouts(...) for a node of class `cls`, from the memo when an
  /// alike node was planned before.
  const NodeSharding& plan(int cls, const std::vector<ir::Value*>& operands,
                           const std::vector<ir::Value*>& results, const OpShardingRule& rule,
                           const std::vector<ShardingSpec>& current,
                           const std::vector<const std::vector<ShardingSpec>*>& available, const Mesh& mesh,
                           const CostModel& cm, bool resultsSink);
  /// Forgets the plans (not the classes).
  void clearPlans() { plans_.clear(); }

 private:
  std::unordered_map<std::string, int> classes_;
  std::unordered_map<std::vector<uint64_t>, NodeSharding, WordsHash> plans_;
  std::vector<uint64_t> key_;  // reused buffer
};

}  // namespace spmd::sharding::detail
