// Layout anchors (see Anchors.h).
#include "passes/Anchors.h"

#include <unordered_map>
#include <unordered_set>

#include "passes/Pass.h"
#include "sharding/Propagation.h"
#include "sharding/RuleText.h"

namespace spmd::passes {

Status insertLayoutAnchors(ir::Graph& g,
                           const std::vector<std::pair<ir::Value*, sharding::ShardingSpec>>& pins,
                           const std::string& suffix, const std::string& marker) {
  std::unordered_map<ir::Value*, ir::Value*> readThrough;
  std::unordered_set<const ir::Node*> anchors;
  std::unordered_map<const ir::Node*, std::vector<ir::Node*>> after;
  std::vector<ir::Node*> order;
  for (const auto& [value, spec] : pins) {
    std::string name = freshName(g, value->name() + suffix);
    SPMD_ASSIGN_OR_RETURN(ir::Value * v, g.addValue(name, ir::ValueKind::Tensor));
    v->mutableType() = value->type();
    SPMD_ASSIGN_OR_RETURN(
        ir::Node * n, g.addNode(name, "aten.alias.default", {{"self", ir::Argument::tensor(value), false}},
                                {ir::Argument::tensor(v)}));
    if (const ir::Node* p = value->producer()) {
      n->mutableMetadata().stackTrace = p->metadata().stackTrace;
      n->mutableMetadata().nnModuleStack = p->metadata().nnModuleStack;
      after[p].push_back(n);
    } else {
      order.push_back(n);
    }
    n->mutableMetadata().other[std::string(sharding::kLayoutKey)] = spec.str();
    n->mutableMetadata().other[marker] = "1";
    readThrough[value] = v;
    anchors.insert(n);
  }
  g.replaceUses(readThrough, [&](const ir::Node& n) { return anchors.count(&n) != 0; });
  for (const auto& n : g.nodes()) {
    if (anchors.count(n.get())) continue;
    order.push_back(n.get());
    auto it = after.find(n.get());
    if (it != after.end()) order.insert(order.end(), it->second.begin(), it->second.end());
  }
  g.setNodeOrder(order);
  return g.verify();
}

Expected<std::vector<sharding::ShardingSpec>> baseLayouts(const ir::ExportedProgram& program,
                                                          const schema::PlacementSchema& schema,
                                                          const schema::ResolvedPlacements& placements,
                                                          const CompileOptions& options,
                                                          const std::vector<ir::Value*>& values,
                                                          bool always) {
  using sharding::Placement;
  const sharding::Mesh& mesh = placements.mesh;
  std::vector<sharding::ShardingSpec> out(values.size(), sharding::ShardingSpec::replicated(mesh.numAxes()));
  if (mesh.numAxes() == 1 && !always) return out;
  sharding::RuleRegistry registry = sharding::defaultRuleRegistry();
  for (const auto& [target, rule] : schema.opRules) registry.set(target, sharding::ruleFromTemplate(rule));
  sharding::PropagationOptions popts;
  popts.cost = options.cost;
  popts.replicateUnknown = options.replicateUnknown;
  SPMD_ASSIGN_OR_RETURN(sharding::Propagation prop,
                        sharding::propagate(program, placements.inputs, mesh, registry, popts));
  for (size_t i = 0; i < values.size(); ++i) {
    out[i] = prop.values[static_cast<size_t>(values[i]->id())];
    for (Placement& p : out[i].placements)
      if (p.isPartial()) p = Placement::replicate();
  }
  return out;
}

}  // namespace spmd::passes
