// The default pass lists and helpers shared by passes.
#include <algorithm>
#include <set>

#include "ir/Collectives.h"
#include "passes/GraphPass.h"
#include "passes/MixedPrecision.h"
#include "passes/Passes.h"

namespace spmd::passes {

std::vector<std::unique_ptr<GraphPass>> defaultGraphPasses(bool optimizer) {
  std::vector<std::unique_ptr<GraphPass>> out;
  if (optimizer) out.push_back(std::make_unique<AppendOptimizer>());
  out.push_back(std::make_unique<GatherParams>());
  out.push_back(std::make_unique<MixedPrecision>());
  out.push_back(std::make_unique<SequenceParallel>());
  out.push_back(std::make_unique<ContextParallel>());
  return out;
}

std::vector<std::unique_ptr<Pass>> defaultPasses(bool async, int64_t bucketBytes,
                                                 std::vector<schema::RecomputeRule> recompute,
                                                 bool reissueCollectives, bool reshardAfterForward) {
  std::vector<std::unique_ptr<Pass>> out;
  out.push_back(std::make_unique<ContextParallelBalance>());
  out.push_back(std::make_unique<DedupCollectives>());
  out.push_back(std::make_unique<DeadCodeElimination>());
  out.push_back(std::make_unique<Recompute>(RecomputePlan{
      std::move(recompute), reissueCollectives ? RecomputeCollectives::Reissue : RecomputeCollectives::Save,
      std::nullopt}));
  out.push_back(std::make_unique<ReshardAfterForward>(reshardAfterForward));
  out.push_back(std::make_unique<BucketCollectives>(bucketBytes));
  out.push_back(std::make_unique<BucketShardCollectives>(bucketBytes));
  if (async) out.push_back(std::make_unique<AsyncCollectives>());
  return out;
}

void syncSignatureOutputs(program::Program& program) {
  auto& outs = program.graph.signature.outputs;
  const auto& graphOuts = program.graph.graph.outputs();
  for (size_t i = 0; i < outs.size() && i < graphOuts.size(); ++i) outs[i].arg = graphOuts[i];
}

Expected<ir::Node*> appendTensorNode(ir::Graph& graph, const std::string& base, const std::string& target,
                                     std::vector<ir::NamedArgument> args, const ir::TensorType& type) {
  const std::string name = freshName(graph, base);
  SPMD_ASSIGN_OR_RETURN(ir::Value * v, graph.addValue(name, ir::ValueKind::Tensor));
  v->mutableType() = type;
  return graph.addNode(name, target, std::move(args), {ir::Argument::tensor(v)});
}

void pruneCollectiveRecords(program::Program& program) {
  std::set<std::string> alive;
  for (const auto& n : program.graph.graph.nodes()) alive.insert(n->name());
  auto& recs = program.collectives;
  recs.erase(std::remove_if(recs.begin(), recs.end(), [&](const auto& r) { return !alive.count(r.node); }),
             recs.end());
}

Status commitRewrite(program::Program& program, const std::vector<ir::Node*>& order,
                     const std::unordered_map<ir::Value*, ir::Value*>& replacement,
                     const std::unordered_set<const ir::Node*>& removed) {
  ir::Graph& g = program.graph.graph;
  g.setNodeOrder(order);
  g.replaceUses(replacement, [](const ir::Node&) { return false; });
  g.eraseNodes([&](const ir::Node& n) { return removed.count(&n) > 0; });
  syncSignatureOutputs(program);
  pruneCollectiveRecords(program);
  return g.verify();
}

int firstUseThroughAliases(const ir::Value* v, int none, std::vector<ir::Node*>& aliases) {
  int first = none;
  for (ir::Node* u : v->users()) {
    if (u->target() == "aten.alias.default" && u->outputValues().size() == 1) {
      aliases.push_back(u);
      first = std::min(first, firstUseThroughAliases(u->outputValues()[0], none, aliases));
    } else {
      first = std::min(first, u->index());
    }
  }
  return first;
}

std::string freshName(const ir::Graph& g, const std::string& base) {
  std::string name = base;
  for (int i = 1; g.findValue(name); ++i) name = base + "_" + std::to_string(i);
  return name;
}

bool isRandomOp(const std::string& target) {
  for (const char* word : {"rand", "bernoulli", "dropout", "normal", "uniform", "exponential", "multinomial",
                           "poisson", "cauchy", "geometric"})
    if (target.find(word) != std::string::npos) return true;
  return false;
}

Expected<ir::Node*> cloneNode(ir::Graph& g, const ir::Node& n,
                              std::unordered_map<ir::Value*, ir::Value*>& remap, const std::string& suffix,
                              const std::string& mark) {
  std::vector<ir::NamedArgument> inputs = n.inputs();
  for (ir::NamedArgument& a : inputs)
    for (ir::Value*& v : a.arg.values)
      if (v)
        if (auto it = remap.find(v); it != remap.end()) v = it->second;
  // The clone is named as the original is: after its result when it has
  // one of the node's name.
  const std::string name = freshName(g, n.name() + suffix);
  std::vector<ir::Argument> outputs = n.outputs();
  for (ir::Argument& a : outputs)
    for (ir::Value*& v : a.values) {
      if (!v) continue;
      const std::string valueName = v->name() == n.name() ? name : freshName(g, v->name() + suffix);
      SPMD_ASSIGN_OR_RETURN(ir::Value * c, g.addValue(valueName, v->kind()));
      c->mutableType() = v->type();
      c->setSymValue(v->symValue());
      remap[v] = c;
      v = c;
    }
  SPMD_ASSIGN_OR_RETURN(ir::Node * c, g.addNode(name, n.target(), std::move(inputs), std::move(outputs)));
  c->mutableMetadata() = n.metadata();
  c->mutableMetadata().other[mark] = n.name();
  return c;
}

Status spliceClones(ir::Graph& graph, const std::vector<ir::Node*>& originals,
                    const std::map<int, std::vector<ir::Node*>>& clonesBefore,
                    const std::unordered_set<const ir::Node*>& forward,
                    const std::unordered_map<ir::Value*, ir::Value*>& remap,
                    const std::function<int(const ir::Value*)>& readersAfter) {
  for (ir::Node* n : originals) {
    if (forward.count(n)) continue;
    std::vector<ir::NamedArgument> inputs = n->inputs();
    bool changed = false;
    for (ir::NamedArgument& a : inputs)
      for (ir::Value*& v : a.arg.values) {
        auto it = v ? remap.find(v) : remap.end();
        if (it == remap.end() || n->index() <= readersAfter(v)) continue;
        v = it->second;
        changed = true;
      }
    if (changed) n->setInputs(std::move(inputs));
  }
  std::vector<ir::Node*> order;
  for (ir::Node* n : originals) {
    if (auto it = clonesBefore.find(n->index()); it != clonesBefore.end())
      order.insert(order.end(), it->second.begin(), it->second.end());
    order.push_back(n);
  }
  graph.setNodeOrder(order);
  graph.rebuildUses();
  return graph.verify();
}

void recordClone(program::Program& program, const ir::Node& original, const ir::Node& clone,
                 const std::string& why) {
  if (!ir::isCommunicating(original.target())) return;
  for (const program::CollectiveRecord& rec : std::vector(program.collectives))
    if (rec.node == original.name()) {
      program.collectives.push_back(rec);
      program.collectives.back().node = clone.name();
      program.collectives.back().consumer = why + rec.consumer;
    }
}

}  // namespace spmd::passes
