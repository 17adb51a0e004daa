// Ring attention in the expansion (rules/ring_attention.cpp): a ring
// attention node whose queries are split by their length over a mesh axis
// becomes the runtime's ring kernel on that axis:
//
//   spmdc.ring_attention.default(query=%q, key=%k, value=%v, scale=0.35, causal=True)
//     -> spmd.ring_attention(query=%q, key=%k, value=%v, scale=0.35, causal=True, axis="cp")
//
// and spmdc.ring_attention_backward.default likewise. Unsplit nodes stay as
// they are (spmd-run runs them as plain attention on each rank).
#include "passes/Expander.h"
#include "sharding/rules/Helpers.h"

namespace spmd::passes::detail {

Status Expander::ringAttention(const ir::Node& n, const sharding::NodeSharding& ns, std::string& target,
                               std::vector<ir::NamedArgument>& args) {
  bool forward = n.target() == "spmdc.ring_attention.default";
  if (!forward && n.target() != "spmdc.ring_attention_backward.default") return Status::ok();
  int q = sharding::rules::operandIndex(n, "query");
  if (q < 0 || static_cast<size_t>(q) >= ns.operands.size()) return Status::ok();
  const ShardingSpec& spec = ns.operands[static_cast<size_t>(q)];
  int64_t axis = -1;
  for (int64_t a = 0; a < mesh_.numAxes(); ++a)
    if (spec.placements[static_cast<size_t>(a)].isShard(2)) axis = a;
  if (axis < 0) return Status::ok();
  target = forward ? "spmd.ring_attention" : "spmd.ring_attention_backward";
  args.push_back({"axis", stringArg(mesh_.axisNames()[static_cast<size_t>(axis)]), false});
  return Status::ok();
}

}  // namespace spmd::passes::detail
