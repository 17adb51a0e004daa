// Gather-before-use anchors for parameters stored sharded (see GatherParams.h).
#include "passes/GatherParams.h"

#include <algorithm>
#include <unordered_map>

#include "passes/GraphPass.h"
#include "passes/Pass.h"
#include "sharding/Propagation.h"

namespace spmd::passes {
namespace {

bool isOptimizerUpdate(const ir::Node& n) { return n.metadata().other.count("spmd_optimizer") != 0; }

// Moves each anchor right before the first node that reads it; anchors no
// node reads are dropped.
void placeAnchors(ir::Graph& g, const std::unordered_map<ir::Node*, ir::Value*>& anchors) {
  std::unordered_map<ir::Node*, std::vector<ir::Node*>> before;
  std::vector<ir::Node*> unused;
  for (const auto& [node, value] : anchors) {
    ir::Node* first = nullptr;
    for (ir::Node* u : value->users())
      if (first == nullptr || u->index() < first->index()) first = u;
    if (first != nullptr)
      before[first].push_back(node);
    else
      unused.push_back(node);
  }
  std::vector<ir::Node*> order;
  for (const auto& n : g.nodes()) {
    if (anchors.count(n.get())) continue;
    auto it = before.find(n.get());
    if (it != before.end()) {
      std::sort(it->second.begin(), it->second.end(),
                [](const ir::Node* a, const ir::Node* b) { return a->name() < b->name(); });
      order.insert(order.end(), it->second.begin(), it->second.end());
    }
    order.push_back(n.get());
  }
  order.insert(order.end(), unused.begin(), unused.end());
  g.setNodeOrder(order);
  g.eraseNodes(
      [&](const ir::Node& n) { return std::find(unused.begin(), unused.end(), &n) != unused.end(); });
}

}  // namespace

Status insertParameterGathers(ir::ExportedProgram& program, const schema::ResolvedPlacements& placements) {
  ir::Graph& g = program.graph;
  std::unordered_map<ir::Value*, ir::Value*> readThrough;
  std::unordered_map<ir::Node*, ir::Value*> anchors;
  const auto& ins = program.signature.inputs;
  for (size_t i = 0; i < ins.size() && i < placements.gathered.size(); ++i) {
    if (!placements.gathered[i] || ins[i].value == nullptr) continue;
    ir::Value* param = ins[i].value;
    std::string name = freshName(g, param->name() + "_gathered");
    SPMD_ASSIGN_OR_RETURN(ir::Value * v, g.addValue(name, ir::ValueKind::Tensor));
    v->mutableType() = param->type();
    SPMD_ASSIGN_OR_RETURN(
        ir::Node * n, g.addNode(name, "aten.alias.default", {{"self", ir::Argument::tensor(param), false}},
                                {ir::Argument::tensor(v)}));
    n->mutableMetadata().other[std::string(sharding::kLayoutKey)] = placements.gathered[i]->str();
    readThrough[param] = v;
    anchors[n] = v;
  }
  if (anchors.empty()) return Status::ok();
  g.replaceUses(readThrough, [&](const ir::Node& n) {
    return anchors.count(const_cast<ir::Node*>(&n)) != 0 || isOptimizerUpdate(n);
  });
  placeAnchors(g, anchors);
  return g.verify();
}

Status GatherParams::run(ir::ExportedProgram& program, GraphPassContext& context) {
  return insertParameterGathers(program, *context.placements);
}

}  // namespace spmd::passes
