// Per-stage subgraphs and transfers (see StageGraphs.h).
#include "pipeline/StageGraphs.h"

#include <algorithm>
#include <set>

#include "ir/Collectives.h"

namespace spmd::pipeline {
namespace {

using program::PipelinePlace;
using Phase = PipelinePlace::Phase;

const PipelinePlace& placeOf(const program::Program& p, const ir::Node& n) {
  return p.pipeline->places[static_cast<size_t>(n.index())];
}

bool isOutput(const program::Program& p, const ir::Value* v) {
  for (const auto& o : p.graph.signature.outputs)
    if (o.arg.value() == v) return true;
  return false;
}

// `selected` plus the free nodes they read (transitively), in node order.
std::vector<const ir::Node*> withFreeAncestors(const program::Program& p,
                                               const std::vector<const ir::Node*>& selected) {
  std::set<int> chosen;
  std::vector<const ir::Node*> work = selected;
  for (const ir::Node* n : selected) chosen.insert(n->index());
  while (!work.empty()) {
    const ir::Node* n = work.back();
    work.pop_back();
    for (const ir::Value* v : n->inputValues()) {
      const ir::Node* src = v->producer();
      if (!src || placeOf(p, *src).phase != Phase::Free || !chosen.insert(src->index()).second) continue;
      work.push_back(src);
    }
  }
  std::vector<const ir::Node*> out;
  out.reserve(chosen.size());
  for (int i : chosen) out.push_back(p.graph.graph.nodes()[static_cast<size_t>(i)].get());
  return out;
}

// The nodes of `stage` in `phase` that `keep` selects (all when null); its
// outputs are what the others read.
Expected<Subgraph> part(const program::Program& p, int64_t stage, Phase phase,
                        const std::vector<bool>* keep = nullptr) {
  auto member = [&](const ir::Node& n) {
    const PipelinePlace& pl = placeOf(p, n);
    return pl.phase == phase && pl.stage == stage && (!keep || (*keep)[static_cast<size_t>(n.index())]);
  };
  std::vector<const ir::Node*> nodes;
  std::vector<const ir::Value*> outputs;
  for (const auto& n : p.graph.graph.nodes()) {
    const PipelinePlace& pl = placeOf(p, *n);
    bool freeOutput = phase == Phase::Step && pl.phase == Phase::Free;
    if (phase == Phase::Step && pl.stage == stage && isAccumulation(p, *n)) {
      // An accumulated sum that is itself an output passes through the step.
      for (const ir::Value* v : n->outputValues())
        if (isOutput(p, v)) outputs.push_back(v);
      continue;
    }
    if (!member(*n) && !freeOutput) continue;
    bool any = false;
    for (const ir::Value* v : n->outputValues()) {
      bool leaves = isOutput(p, v);
      if (phase != Phase::Step)
        for (const ir::Node* u : v->users()) leaves |= placeOf(p, *u).phase != Phase::Free && !member(*u);
      if (leaves) outputs.push_back(v);
      any |= leaves;
    }
    if (!freeOutput || any) nodes.push_back(n.get());
  }
  return extractSubgraph(withFreeAncestors(p, nodes), outputs);
}

}  // namespace

bool isAccumulation(const program::Program& p, const ir::Node& n) {
  if (n.target() != ir::kAllReduce || !p.pipeline) return false;
  const ir::Argument* a = n.input("axis");
  return a && !a->strings.empty() && a->strings[0] == p.pipeline->microbatchAxis &&
         placeOf(p, n).phase == Phase::Step;
}

std::vector<Transfer> stageTransfers(const program::Program& p) {
  std::vector<Transfer> out;
  for (const auto& n : p.graph.graph.nodes()) {
    const PipelinePlace& from = placeOf(p, *n);
    if (from.phase != Phase::Forward && from.phase != Phase::Backward) continue;
    for (const ir::Value* v : n->outputValues()) {
      std::set<int64_t> sent;
      for (const ir::Node* u : v->users()) {
        const PipelinePlace& to = placeOf(p, *u);
        if ((to.phase != Phase::Forward && to.phase != Phase::Backward) || to.stage == from.stage) continue;
        if (sent.insert(to.stage).second)
          out.push_back({v->name(), from.stage, to.stage, from.phase, to.phase});
      }
    }
  }
  return out;
}

bool splitsBackward(const program::PipelinePlan& plan) { return plan.schedule == "zero-bubble"; }

std::vector<bool> inputGradientNodes(const program::Program& p, int64_t stage) {
  const auto& nodes = p.graph.graph.nodes();
  std::vector<bool> out(nodes.size(), false);
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const ir::Node& n = **it;
    const PipelinePlace& pl = placeOf(p, n);
    if (pl.phase != Phase::Backward || pl.stage != stage) continue;
    bool needed = false;
    for (const ir::Value* v : n.outputValues())
      for (const ir::Node* u : v->users()) {
        const PipelinePlace& up = placeOf(p, *u);
        bool sent = (up.phase == Phase::Forward || up.phase == Phase::Backward) && up.stage != stage;
        needed |= sent || out[static_cast<size_t>(u->index())];
      }
    out[static_cast<size_t>(n.index())] = needed;
  }
  return out;
}

Expected<StageGraphs> stageGraphs(const program::Program& p, int64_t stage) {
  StageGraphs out;
  SPMD_ASSIGN_OR_RETURN(out.forward, part(p, stage, Phase::Forward));
  SPMD_ASSIGN_OR_RETURN(out.backward, part(p, stage, Phase::Backward));
  if (splitsBackward(*p.pipeline)) {
    std::vector<bool> input = inputGradientNodes(p, stage), weight(input.size());
    for (size_t i = 0; i < input.size(); ++i) weight[i] = !input[i];
    SPMD_ASSIGN_OR_RETURN(out.backwardInput, part(p, stage, Phase::Backward, &input));
    SPMD_ASSIGN_OR_RETURN(out.backwardWeight, part(p, stage, Phase::Backward, &weight));
  }
  SPMD_ASSIGN_OR_RETURN(out.step, part(p, stage, Phase::Step));
  for (const auto& n : p.graph.graph.nodes()) {
    if (placeOf(p, *n).phase != Phase::Prologue) continue;
    const ir::Value* in = n->inputValues().at(0);
    std::vector<const ir::Node*> src;
    if (in->producer()) src.push_back(in->producer());
    if (in->producer() && placeOf(p, *in->producer()).phase != Phase::Free)
      return Status::error("node %" + n->name() + ": a prologue sum must read a free value");
    SPMD_ASSIGN_OR_RETURN(Subgraph g, extractSubgraph(withFreeAncestors(p, src), {in}));
    out.prologue.emplace_back(std::move(g), n.get());
  }
  return out;
}

std::set<std::string> stageWeightNames(const program::Program& p, const StageGraphs& g) {
  std::map<std::string, std::string> stored;  // value name -> FQN
  for (const ir::InputSpec& in : p.graph.signature.inputs)
    if (ir::isStored(in.kind) && in.value) stored.emplace(in.value->name(), in.target);
  std::set<std::string> out;
  auto add = [&](const Subgraph& s) {
    for (const std::string& name : s.inputs)
      if (auto it = stored.find(name); it != stored.end()) out.insert(it->second);
  };
  add(g.forward);
  add(g.backward);
  add(g.step);
  for (const auto& [sub, node] : g.prologue) add(sub);
  return out;
}

Expected<std::vector<std::set<std::string>>> stageWeights(const program::Program& p) {
  std::vector<std::set<std::string>> out(static_cast<size_t>(p.pipeline->stages));
  std::set<std::string> read;
  for (int64_t c = 0; c < p.pipeline->chunks(); ++c) {
    SPMD_ASSIGN_OR_RETURN(StageGraphs g, stageGraphs(p, c));
    std::set<std::string> names = stageWeightNames(p, g);
    out[static_cast<size_t>(p.pipeline->rankOf(c))].insert(names.begin(), names.end());
    read.insert(names.begin(), names.end());
  }
  for (const program::WeightEntry& w : p.weights)
    if (!read.count(w.fqn) && !out.empty()) out[0].insert(w.fqn);
  return out;
}

Expected<program::Program> checkpointView(const program::Program& p) {
  int64_t mb = p.mesh.axisIndex(p.pipeline->microbatchAxis);
  std::vector<int64_t> shape = p.mesh.shape();
  shape[static_cast<size_t>(mb)] = 1;
  program::Program view;
  SPMD_ASSIGN_OR_RETURN(view.mesh, sharding::Mesh::create(shape, p.mesh.axisNames()));
  view.weights = p.weights;
  for (program::WeightEntry& w : view.weights) {
    w.shards.clear();
    if (static_cast<size_t>(mb) < w.spec.placements.size() &&
        !w.spec.placements[static_cast<size_t>(mb)].isReplicate())
      return Status::error("weight '" + w.fqn + "' is laid out " + w.spec.str() +
                           ", not replicated over the " + "microbatch axis '" + p.pipeline->microbatchAxis +
                           "': it cannot be checkpointed");
  }
  return view;
}

std::map<std::string, int64_t> weightOwners(const std::vector<std::set<std::string>>& stageWeights) {
  std::map<std::string, int64_t> out;
  for (size_t s = 0; s < stageWeights.size(); ++s)
    for (const std::string& fqn : stageWeights[s]) out.emplace(fqn, static_cast<int64_t>(s));
  return out;
}

}  // namespace spmd::pipeline
