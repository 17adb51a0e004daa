// reshard-after-forward (see Passes.h): FSDP2's default, the backward
// gathers each parameter again instead of reading the forward's copy.
//
//   forward   %w_all_gather = spmd.all_gather(%w, "dp", 0)
//             %w_gathered   = aten.alias.default(%w_all_gather)
//             %permute      = aten.permute.default(%w_gathered, [1, 0])
//             %mm           = aten.mm.default(%x, %permute)
//   backward  %permute_2    = aten.permute.default(%permute, [1, 0])
// becomes
//   backward  %w_all_gather_rg = spmd.all_gather(%w, "dp", 0)
//             %w_gathered_rg   = aten.alias.default(%w_all_gather_rg)
//             %permute_rg      = aten.permute.default(%w_gathered_rg, [1, 0])
//             %permute_2       = aten.permute.default(%permute_rg, [1, 0])
// so %w_all_gather dies after %mm. What is cloned: the gather and the forward
// ops that read nothing but its result (views, aliases, casts); the
// gather's input (the stored shard, or its mixed-precision cast) is read as
// it is, so a bucketed gather issued one bucket ahead finds it.
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/Collectives.h"
#include "passes/ActivationMemory.h"
#include "passes/Passes.h"
#include "support/Strings.h"

namespace spmd::passes {
namespace {

/// One parameter gather and the forward values made from it alone.
struct GatherChain {
  ir::Node* gather = nullptr;
  std::vector<ir::Node*> nodes;  // the gather, then its chain, in program order
  int lastForward = -1;          // index of the last forward node reading the chain
};

/// The parameter FQN a gather's input is (the stored shard, or its cast to
/// param_dtype); nullptr for any other all-gather.
const std::string* gatheredParameter(const ir::Node& n,
                                     const std::unordered_map<const ir::Value*, std::string>& params) {
  if (n.target() != ir::kAllGather || n.inputValues().size() != 1 || n.outputValues().size() != 1)
    return nullptr;
  const ir::Value* x = n.inputValues()[0];
  if (const ir::Node* p = x->producer())
    x = p->target() == "aten._to_copy.default" && p->inputValues().size() == 1 ? p->inputValues()[0]
                                                                               : nullptr;
  auto it = x ? params.find(x) : params.end();
  return it == params.end() ? nullptr : &it->second;
}

/// The gather chains of `g`: each forward parameter gather outside the root
/// module group, and each forward node whose tensor inputs all lie in one
/// chain (views, aliases, casts of the gathered parameter; no collective,
/// no random op).
std::vector<GatherChain> gatherChains(const ir::Graph& g, const std::unordered_set<const ir::Node*>& forward,
                                      const std::unordered_map<const ir::Value*, std::string>& params) {
  std::vector<GatherChain> chains;
  std::unordered_map<const ir::Value*, size_t> chainOf;
  for (const auto& n : g.nodes()) {
    if (!forward.count(n.get())) continue;
    std::set<size_t> read;
    bool other = false;
    for (const ir::Value* v : n->inputValues()) {
      auto it = chainOf.find(v);
      if (it != chainOf.end()) read.insert(it->second);
      other = other || it == chainOf.end();
    }
    for (size_t c : read) chains[c].lastForward = n->index();
    size_t chain = 0;
    if (const std::string* fqn = gatheredParameter(*n, params); fqn && !moduleGroup(*fqn).empty()) {
      chain = chains.size();
      chains.push_back({n.get(), {}, n->index()});
    } else if (read.size() == 1 && !other && !ir::isCommunicating(n->target()) && !isRandomOp(n->target())) {
      chain = *read.begin();
    } else {
      continue;
    }
    chains[chain].nodes.push_back(n.get());
    for (const ir::Value* v : n->outputValues()) chainOf[v] = chain;
  }
  return chains;
}

/// The values of `chain` the backward reads after the chain's last forward
/// reader, and the index of the first such reader (-1: none).
std::pair<std::vector<ir::Value*>, int> backwardReads(const ir::Graph& g, const GatherChain& chain,
                                                      const std::unordered_set<const ir::Node*>& forward,
                                                      const std::unordered_set<const ir::Value*>& outputs) {
  std::unordered_set<const ir::Value*> made;
  for (const ir::Node* n : chain.nodes)
    for (const ir::Value* v : n->outputValues()) made.insert(v);
  std::vector<ir::Value*> read;
  int first = -1;
  for (const ir::Value* v : made)
    if (outputs.count(v)) return {{}, -1};  // a graph output: kept whatever the backward does
  for (const auto& n : g.nodes()) {
    if (forward.count(n.get()) || n->index() <= chain.lastForward) continue;
    for (ir::Value* v : n->inputValues()) {
      if (!made.count(v)) continue;
      if (std::find(read.begin(), read.end(), v) == read.end()) read.push_back(v);
      if (first < 0) first = n->index();
    }
  }
  return {read, first};
}

/// The nodes of `chain` that make `values`, through their inputs, in order.
std::vector<ir::Node*> needed(const GatherChain& chain, const std::vector<ir::Value*>& values) {
  std::unordered_set<const ir::Node*> in(chain.nodes.begin(), chain.nodes.end()), need;
  std::vector<const ir::Value*> work(values.begin(), values.end());
  while (!work.empty()) {
    const ir::Node* p = work.back()->producer();
    work.pop_back();
    if (!p || !in.count(p) || !need.insert(p).second || p == chain.gather) continue;
    for (const ir::Value* v : p->inputValues()) work.push_back(v);
  }
  std::vector<ir::Node*> out;
  for (ir::Node* n : chain.nodes)
    if (need.count(n)) out.push_back(n);
  return out;
}

}  // namespace

std::string reshardNote(const ReshardSummary& s) {
  return "reshard-after-forward: " + std::to_string(s.gathers) +
         " parameter all-gathers issued again in the backward (+" + withCommas(s.movedBytes) +
         " B/rank all-gathered, as FSDP2's reshard_after_forward=True); the forward no longer keeps " +
         withCommas(s.gatherBytes) + " B/rank of gathered parameters for the backward";
}

Status ReshardAfterForward::run(program::Program& program) {
  summary_ = {};
  if (!enabled_) return Status::ok();
  const std::unordered_set<const ir::Node*> forward = forwardNodes(program);
  if (forward.empty()) return Status::ok();
  ir::Graph& g = program.graph.graph;
  std::unordered_map<const ir::Value*, std::string> params;
  for (const auto& in : program.graph.signature.inputs)
    if (in.value && in.kind == ir::InputKind::Parameter) params[in.value] = in.target;
  std::unordered_set<const ir::Value*> outputs;
  for (const ir::Argument& a : g.outputs())
    for (const ir::Value* v : a.values)
      if (v) outputs.insert(v);
  std::vector<ir::Node*> originals;
  for (const auto& n : g.nodes()) originals.push_back(n.get());
  std::map<int, std::vector<ir::Node*>> clonesBefore;  // node index -> clones run before it
  std::unordered_map<ir::Value*, ir::Value*> remap;    // a chain's values -> their clones
  std::unordered_map<const ir::Value*, int> after;     // a chain's values -> its last forward reader
  for (const GatherChain& chain : gatherChains(g, forward, params)) {
    auto [values, first] = backwardReads(g, chain, forward, outputs);
    if (first < 0) continue;
    for (ir::Node* n : needed(chain, values)) {
      SPMD_ASSIGN_OR_RETURN(ir::Node * c, cloneNode(g, *n, remap, "_rg", "spmd_regather"));
      clonesBefore[first].push_back(c);
      for (const ir::Value* v : n->outputValues()) after[v] = chain.lastForward;
      if (n != chain.gather) continue;
      recordClone(program, *n, *c, "backward of ");
      ++summary_.gathers;
      summary_.gatherBytes += localBytes(*n->outputValues()[0]);
      for (const program::CollectiveRecord& r : program.collectives)
        if (r.node == n->name()) summary_.movedBytes += r.bytesPerRank;
    }
  }
  if (remap.empty()) return Status::ok();
  return spliceClones(g, originals, clonesBefore, forward, remap,
                      [&](const ir::Value* v) { return after.at(v); });
}

}  // namespace spmd::passes
