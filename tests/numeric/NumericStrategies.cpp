// The strategies checked on each mesh (see NumericUtil.h): a 2-D strategy
// is a pair of 1-D strategies, one per axis, that compose.
//
//   axis 0: operands [S(0)] -> results [S(0)]     axis 1: operands [S(1)] -> results [P(sum)]
//   2x2:    operands [S(0), S(1)] -> results [S(0), P(sum)]
#include "NumericUtil.h"

#include "sharding/RuleRegistry.h"

namespace spmd::numeric {
namespace {

using sharding::NodeSharding;
using sharding::Placement;
using sharding::ShardingSpec;

/// True when the 1-D strategies `a` (axis 0) and `b` (axis 1) compose into
/// one 2-D strategy: in every tensor, a dim both shard is sharded by the
/// same strategy (one factor) without strided shards, and a tensor pending
/// on both axes is pending with one reduce op.
bool composable(const NodeSharding& a, const NodeSharding& b, bool same) {
  auto ok = [&](const std::vector<ShardingSpec>& x, const std::vector<ShardingSpec>& y) {
    for (size_t i = 0; i < x.size(); ++i) {
      const Placement& p = x[i].placements[0];
      const Placement& q = y[i].placements[0];
      if (p.isShard() && q.isShard() && p.dim == q.dim && (!same || p.isStrided() || q.isStrided()))
        return false;
      if (p.isPartial() && q.isPartial() && p.reduce != q.reduce) return false;
    }
    return true;
  };
  return ok(a.operands, b.operands) && ok(a.results, b.results);
}

}  // namespace

Expected<std::vector<NodeSharding>> strategiesOn(const ir::Node& node, const std::vector<int64_t>& sizes) {
  const sharding::RuleRegistry& registry = sharding::defaultRuleRegistry();
  SPMD_ASSIGN_OR_RETURN(sharding::Mesh first, sharding::Mesh::create({sizes[0]}));
  SPMD_ASSIGN_OR_RETURN(std::vector<NodeSharding> axis0,
                        sharding::enumerateStrategies(node, registry, first));
  if (sizes.size() == 1) return axis0;
  if (sizes.size() != 2) return Status::error("numeric checks: meshes of 1 or 2 axes only");
  SPMD_ASSIGN_OR_RETURN(sharding::Mesh second, sharding::Mesh::create({sizes[1]}));
  SPMD_ASSIGN_OR_RETURN(std::vector<NodeSharding> axis1,
                        sharding::enumerateStrategies(node, registry, second));
  std::vector<NodeSharding> out;
  for (size_t i = 0; i < axis0.size(); ++i)
    for (size_t j = 0; j < axis1.size(); ++j) {
      const NodeSharding& a = axis0[i];
      const NodeSharding& b = axis1[j];
      if (!composable(a, b, a.operands == b.operands && a.results == b.results)) continue;
      NodeSharding ns = a;
      for (size_t k = 0; k < ns.operands.size(); ++k)
        ns.operands[k].placements.push_back(b.operands[k].placements[0]);
      for (size_t k = 0; k < ns.results.size(); ++k)
        ns.results[k].placements.push_back(b.results[k].placements[0]);
      out.push_back(std::move(ns));
    }
  return out;
}

const std::vector<std::vector<int64_t>>& allMeshes() {
  static const std::vector<std::vector<int64_t>> kMeshes = {{2}, {4}, {2, 2}};
  return kMeshes;
}

}  // namespace spmd::numeric
