// Expert parallelism in the expansion (rules/moe.cpp): a MoE experts node
// whose layout splits tokens and experts over a mesh axis becomes the
// runtime's exchanging kernel on that axis, given the global expert count
// (the local expert i of rank r is global expert r * E / n + i):
//
//   spmdc.moe_experts.default(x=%x, indices=%i, weights=%w, w1=%a, w2=%b, w3=%c)
//     -> spmd.moe_experts(x=%x, indices=%i, weights=%w, w1=%a, w2=%b, w3=%c, axis="ep", experts=8)
//
// and spmdc.moe_experts_backward.default likewise. Unsharded nodes stay as
// they are (spmd-run runs them on each rank's whole token set). Experts
// whose FFN dim is split over another axis (tp inside the experts) need
// nothing here: the kernels run on the local slice, their token results
// pending sums over that axis (rules/moe.cpp). A forward node whose tokens
// are replicated over some axes (tp) names them, so that only one rank of
// each replica set counts its tokens in spmd-run's tokens per expert:
//
//   spmd.moe_experts(..., axis="ep", experts=8, replicas=["tp"])
#include "passes/Expander.h"

namespace spmd::passes::detail {

Status Expander::countOnce(const ShardingSpec& tokens, std::vector<ir::NamedArgument>& args) const {
  Argument replicas;
  replicas.kind = Argument::Kind::Strings;
  for (int64_t a = 0; a < mesh_.numAxes(); ++a)
    if (mesh_.size(a) > 1 && !tokens.placements[static_cast<size_t>(a)].isShard())
      replicas.strings.push_back(mesh_.axisNames()[static_cast<size_t>(a)]);
  if (!replicas.strings.empty()) args.push_back({"replicas", std::move(replicas), false});
  return Status::ok();
}

Status Expander::expertParallel(const ir::Node& n, const sharding::NodeSharding& ns, std::string& target,
                                std::vector<ir::NamedArgument>& args) {
  bool forward = n.target() == "spmdc.moe_experts.default";
  if (!forward && n.target() != "spmdc.moe_experts_backward.default") return Status::ok();
  size_t w1 = forward ? 3 : 4;  // the stacked w1 among the tensor operands
  auto operands = sharding::tensorOperands(n);
  if (ns.operands.size() <= w1 || operands.size() <= w1) return Status::ok();
  const ShardingSpec& spec = ns.operands[w1];
  int64_t axis = -1;
  for (int64_t a = 0; a < mesh_.numAxes(); ++a)
    if (spec.placements[static_cast<size_t>(a)].isShard(0)) axis = a;
  if (axis < 0) return forward ? countOnce(ns.operands[0], args) : Status::ok();
  const ir::Dim& e = operands[w1]->type().sizes[0];
  // The planner splits the exchange factor evenly only; a layout that
  // reached here otherwise is a compiler bug, not the user's.
  SPMD_CHECK(e.isStatic() && e.value() % mesh_.size(axis) == 0);
  const std::string& name = mesh_.axisNames()[static_cast<size_t>(axis)];
  std::string ffn;  // expert TP: the axes splitting w1's FFN dim
  for (int64_t a = 0; a < mesh_.numAxes(); ++a)
    if (spec.placements[static_cast<size_t>(a)].isShard(1))
      ffn += (ffn.empty() ? "" : ", ") + mesh_.axisNames()[static_cast<size_t>(a)];
  if (in_.notes && forward)
    in_.notes->push_back("%" + n.name() + ": expert parallel over " + name + " (" +
                         std::to_string(e.value() / mesh_.size(axis)) +
                         " experts per rank): tokens and results exchanged by all-to-all with run-time "
                         "splits, forward and backward (not in the collective counts: the bytes depend on "
                         "the routing; spmd-run reports tokens per expert)" +
                         (ffn.empty() ? ""
                                      : "; the experts' FFN dim split over " + ffn +
                                            " (expert TP: their output a pending sum there)"));
  target = forward ? "spmd.moe_experts" : "spmd.moe_experts_backward";
  args.push_back({"axis", stringArg(name), false});
  args.push_back({"experts", Argument::integer(e.value()), false});
  return forward ? countOnce(ns.operands[0], args) : Status::ok();
}

}  // namespace spmd::passes::detail
