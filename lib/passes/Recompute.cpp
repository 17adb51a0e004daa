// recompute (see Recompute.h): regions from module globs, what the backward
// reads from inside each, and the clones that recompute it.
//
//   region "layers.0" (rule "layers.*": full)
//     kept:        values read by a forward op outside the region, graph
//                  outputs, outputs of random ops, (Save) of collectives of
//                  activations and (selective) of the ops the rule saves
//     recomputed:  the other values the backward reads, with their producers
//                  inside the region, cloned in program order before the
//                  region's first backward reader
#include "passes/Recompute.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "ir/Collectives.h"
#include "passes/ActivationMemory.h"
#include "passes/LayoutCost.h"
#include "passes/Passes.h"
#include "schema/Glob.h"
#include "sharding/DeviceProfile.h"
#include "support/Strings.h"

namespace spmd::passes {
namespace {

constexpr int kNoRegion = -1;

/// A checkpointed module: its path and the rule that matched it.
struct Region {
  std::string path;
  const schema::RecomputeRule* rule = nullptr;
};

/// A collective whose operand an op made: an activation's, not a stored
/// parameter's (an FSDP gather, always recomputed).
bool activationCollective(const ir::Node& n) {
  if (!ir::isCommunicating(n.target())) return false;
  const auto ins = n.inputValues();
  return std::any_of(ins.begin(), ins.end(), [](const ir::Value* v) { return v->producer() != nullptr; });
}

/// "aten.mm.default" matches "aten.mm", "aten.mm.default" and "aten.m*".
bool savedOp(const schema::RecomputeRule& rule, const std::string& target) {
  const std::string bare = target.substr(0, target.rfind('.'));
  return std::any_of(rule.save.begin(), rule.save.end(), [&](const std::string& g) {
    return schema::globMatch(g, target) || schema::globMatch(g, bare);
  });
}

/// Assigns forward nodes to regions: the outermost module of a node's
/// nn_module_stack that a rule matches (for one module, the longest glob).
class RegionMap {
 public:
  explicit RegionMap(const std::vector<schema::RecomputeRule>& rules) : rules_(rules) {}

  int regionOf(const ir::Node& n) {
    const std::string& stack = n.metadata().nnModuleStack;
    auto [it, added] = byStack_.try_emplace(stack, kNoRegion);
    if (!added) return it->second;
    for (const ir::ModuleFrame& f : ir::moduleFrames(stack)) {
      paths_.insert(f.path);
      const schema::RecomputeRule* best = nullptr;
      for (const schema::RecomputeRule& r : rules_)
        if (schema::globMatch(r.glob, f.path) && (!best || r.glob.size() > best->glob.size())) best = &r;
      if (!best) continue;
      matched_.insert(best);
      auto [pos, fresh] = byPath_.try_emplace(f.path, static_cast<int>(regions_.size()));
      if (fresh) regions_.push_back({f.path, best});
      it->second = pos->second;
      break;
    }
    return it->second;
  }
  const Region& region(int id) const { return regions_[static_cast<size_t>(id)]; }
  /// Error naming the first rule that matched no module, with a suggestion.
  Status checkAllMatched() const {
    if (paths_.empty())
      return Status::error(
          "recompute: no op of this train step names the module it runs in (torch.export's joint route "
          "drops nn_module_stack); export it with `python -m spmdc_export --train` (its one-pass joint "
          "route keeps them)");
    std::vector<std::string> paths(paths_.begin(), paths_.end());
    for (const schema::RecomputeRule& r : rules_) {
      if (matched_.count(&r)) continue;
      bool any = std::any_of(paths.begin(), paths.end(),
                             [&](const auto& p) { return schema::globMatch(r.glob, p); });
      if (any) continue;  // matched only modules inside another rule's region
      std::optional<std::string> fix = schema::suggestGlob(r.glob, paths);
      return Status::error(
          "recompute: '" + r.glob + "' matches no module" +
          (fix ? " (did you mean '" + *fix + "'?)"
               : " (modules are named as in nn_module_stack, e.g. '" + paths.front() + "')"));
    }
    return Status::ok();
  }

 private:
  const std::vector<schema::RecomputeRule>& rules_;
  std::unordered_map<std::string, int> byStack_;
  std::map<std::string, int> byPath_;
  std::vector<Region> regions_;
  std::set<std::string> paths_;
  std::set<const schema::RecomputeRule*> matched_;
};

/// Which forward nodes lie in which region, and which of them may be
/// recomputed.
struct Plan {
  std::unordered_set<const ir::Node*> forward;
  std::unordered_map<const ir::Node*, int> region;  // forward nodes in a region
  std::unordered_set<const ir::Node*> recomputable;
  /// Per region, the index of its last forward node. A non-forward node
  /// before it (a size read for the backward, a loss all-reduce placed
  /// late) runs while the region's values are alive and reads them; the
  /// backward readers after it read the recomputed ones.
  std::map<int, int> lastForward;
};

/// True when `v` (made in region `r`) is read only inside `r` or by the
/// backward, and is no graph output: the region's checkpoint may drop it.
bool internal(const ir::Value* v, int r, const Plan& plan,
              const std::unordered_set<const ir::Value*>& outputs) {
  if (outputs.count(v)) return false;
  for (const ir::Node* u : v->users()) {
    if (!plan.forward.count(u)) continue;
    auto it = plan.region.find(u);
    if (it == plan.region.end() || it->second != r) return false;
  }
  return true;
}

/// A forward node that names no module (a parameter gather, a layout
/// change the compiler inserted) runs in the region of its forward readers
/// when they all lie in one.
void inheritRegions(const std::vector<std::unique_ptr<ir::Node>>& nodes, Plan& plan) {
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const ir::Node* n = it->get();
    if (!plan.forward.count(n) || plan.region.count(n) || !n->metadata().nnModuleStack.empty()) continue;
    int region = kNoRegion;
    bool one = true;
    for (const ir::Value* v : n->outputValues())
      for (const ir::Node* u : v->users()) {
        if (!plan.forward.count(u)) continue;
        auto r = plan.region.find(u);
        const int ur = r == plan.region.end() ? kNoRegion : r->second;
        one = one && ur != kNoRegion && (region == kNoRegion || region == ur);
        region = ur;
      }
    if (one && region != kNoRegion) plan.region[n] = region;
  }
}

Expected<Plan> planRegions(const program::Program& program, RegionMap& regions, RecomputeCollectives how) {
  Plan plan;
  plan.forward = forwardNodes(program);
  if (plan.forward.empty())
    return Status::error(
        "recompute: the program has no loss output; activation checkpointing applies to "
        "train steps (export with --train)");
  const auto& nodes = program.graph.graph.nodes();
  for (const auto& n : nodes)
    if (plan.forward.count(n.get()))
      if (int r = regions.regionOf(*n); r != kNoRegion) plan.region[n.get()] = r;
  inheritRegions(nodes, plan);
  for (const auto& n : nodes) {
    auto it = plan.region.find(n.get());
    if (it == plan.region.end()) continue;
    const int r = it->second;
    plan.lastForward[r] = n->index();
    const schema::RecomputeRule& rule = *regions.region(r).rule;
    if (rule.mode == schema::RecomputeMode::None || isRandomOp(n->target())) continue;
    if (rule.mode == schema::RecomputeMode::Selective && savedOp(rule, n->target())) continue;
    if (how == RecomputeCollectives::Save && activationCollective(*n)) continue;
    plan.recomputable.insert(n.get());
  }
  SPMD_RETURN_IF_ERROR(regions.checkAllMatched());
  return plan;
}

/// Per region: the values its backward reads that it may recompute (in
/// order of first reading), and the index of the first backward node
/// reading one.
struct Needs {
  std::map<int, std::vector<ir::Value*>> values;
  std::map<int, int> insertAt;
};

Needs backwardNeeds(const ir::Graph& g, const Plan& plan,
                    const std::unordered_set<const ir::Value*>& outputs) {
  Needs needs;
  for (const auto& n : g.nodes()) {
    if (plan.forward.count(n.get())) continue;
    for (ir::Value* v : n->inputValues()) {
      const ir::Node* p = v->producer();
      if (!p || !plan.recomputable.count(p)) continue;
      const int r = plan.region.at(p);
      if (n->index() <= plan.lastForward.at(r) || !internal(v, r, plan, outputs)) continue;
      auto& list = needs.values[r];
      if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
      needs.insertAt.try_emplace(r, n->index());
    }
  }
  return needs;
}

/// The indices of the nodes that recompute `values` of region `r`: their
/// producers and, through their inputs, every recomputable producer of a
/// value internal to `r`.
std::set<int> recomputeSet(const std::vector<ir::Value*>& values, int r, const Plan& plan,
                           const std::unordered_set<const ir::Value*>& outputs) {
  std::set<int> clone;
  std::vector<const ir::Value*> work(values.begin(), values.end());
  while (!work.empty()) {
    const ir::Value* v = work.back();
    work.pop_back();
    const ir::Node* p = v->producer();
    if (!p || !plan.recomputable.count(p) || plan.region.at(p) != r || !internal(v, r, plan, outputs))
      continue;
    if (!clone.insert(p->index()).second) continue;
    for (const ir::Value* in : p->inputValues()) work.push_back(in);
  }
  return clone;
}

/// The collectives of activations in recomputed regions that the backward
/// reads through the recomputation (Save: their kept results) or that it
/// runs again (Reissue: the cloned ones); their bytes and modeled time.
void countCollectives(const program::Program& program, const Plan& plan, const Needs& needs,
                      const std::unordered_set<const ir::Node*>& cloned,
                      const std::unordered_set<const ir::Value*>& outputs, RecomputeSummary& summary) {
  const sharding::CostModel cm = sharding::costModelFor(sharding::defaultDeviceProfile(), program.mesh);
  for (const auto& n : program.graph.graph.nodes()) {
    auto r = plan.region.find(n.get());
    if (r == plan.region.end() || !needs.values.count(r->second) || !activationCollective(*n)) continue;
    bool read = cloned.count(n.get()) > 0;
    for (const ir::Value* v : n->outputValues())
      if (internal(v, r->second, plan, outputs))
        for (const ir::Node* u : v->users())
          read = read || cloned.count(u) ||
                 (!plan.forward.count(u) && u->index() > plan.lastForward.at(r->second));
    if (!read) continue;
    ++summary.collectives;
    for (const ir::Value* v : n->outputValues()) summary.collectiveBytes += localBytes(*v);
    summary.collectiveSeconds += collectiveSeconds(*n, program.mesh, cm);
  }
}

}  // namespace

std::string recomputeNote(const RecomputeSummary& s, const std::string& choice) {
  char extra[64] = "";
  if (s.stepFlops > 0)
    std::snprintf(extra, sizeof extra, " (%.3g MFLOP, +%.1f%% of the step's)", s.recomputedFlops / 1e6,
                  100.0 * s.recomputedFlops / s.stepFlops);
  std::string note = "recompute: " + std::to_string(s.recomputedOps) + " ops of " +
                     std::to_string(s.modules) + " checkpointed modules recomputed in the backward" + extra +
                     "; saved activations " + withCommas(s.savedBytesBefore) + " -> " +
                     withCommas(s.savedBytesAfter) + " B/rank";
  if (s.collectives > 0) {
    char us[32];
    std::snprintf(us, sizeof us, "%.3g us", s.collectiveSeconds * 1e6);
    const bool saved = s.collectivesTaken == RecomputeCollectives::Save;
    note += "; " + std::to_string(s.collectives) + " collectives of activations " +
            (saved ? "saved (" + withCommas(s.collectiveBytes) + " B/rank kept; re-issuing would add " + us +
                         " modeled)"
                   : "re-issued (+" + std::string(us) + " modeled; saving would keep " +
                         withCommas(s.collectiveBytes) + " B/rank)");
  }
  return choice.empty() ? note : note + "; " + choice;
}

Expected<std::vector<RecomputeRegion>> recomputeRegions(const program::Program& program,
                                                        const std::vector<schema::RecomputeRule>& rules) {
  RegionMap regions(rules);
  SPMD_ASSIGN_OR_RETURN(Plan plan, planRegions(program, regions, RecomputeCollectives::Save));
  std::vector<RecomputeRegion> out;
  std::set<int> seen;
  for (const auto& n : program.graph.graph.nodes())
    if (auto it = plan.region.find(n.get()); it != plan.region.end() && seen.insert(it->second).second)
      out.push_back({regions.region(it->second).path, regions.region(it->second).rule});
  return out;
}

Status applyRecompute(program::Program& program, const RecomputePlan& recompute, RecomputeSummary& summary,
                      const RecomputeFigures& figures) {
  summary = {};
  summary.collectivesTaken = recompute.collectives;
  if (recompute.rules.empty()) return Status::ok();
  ir::Graph& g = program.graph.graph;
  RegionMap regions(recompute.rules);
  SPMD_ASSIGN_OR_RETURN(Plan plan, planRegions(program, regions, recompute.collectives));
  if (figures.before) {
    std::tie(summary.savedBytesBefore, summary.stepFlops) = *figures.before;
  } else {
    summary.savedBytesBefore = estimateSavedActivations(program).savedBytes;
    for (const auto& n : g.nodes()) summary.stepFlops += nodeFlops(*n);
  }
  summary.savedBytesAfter = summary.savedBytesBefore;
  std::unordered_set<const ir::Value*> outputs;
  for (const ir::Argument& a : g.outputs())
    for (const ir::Value* v : a.values)
      if (v) outputs.insert(v);
  const Needs needs = backwardNeeds(g, plan, outputs);
  std::vector<ir::Node*> originals;
  for (const auto& n : g.nodes()) originals.push_back(n.get());
  std::unordered_map<ir::Value*, ir::Value*> remap;    // what the backward reads instead
  std::map<int, std::vector<ir::Node*>> clonesBefore;  // node index -> clones run before it
  std::unordered_set<const ir::Node*> cloned;          // their originals
  for (const auto& [r, values] : needs.values) {
    const std::set<int> clone = recomputeSet(values, r, plan, outputs);
    std::unordered_map<ir::Value*, ir::Value*> local;
    for (int i : clone) {
      const ir::Node& n = *originals[static_cast<size_t>(i)];
      cloned.insert(&n);
      SPMD_ASSIGN_OR_RETURN(ir::Node * c, cloneNode(g, n, local, "_rc", "spmd_recompute"));
      clonesBefore[needs.insertAt.at(r)].push_back(c);
      summary.recomputedFlops += nodeFlops(n);
      recordClone(program, n, *c, "recompute of ");
    }
    for (ir::Value* v : values) remap[v] = local.at(v);
    ++summary.modules;
    summary.recomputedOps += static_cast<int64_t>(clone.size());
  }
  countCollectives(program, plan, needs, cloned, outputs, summary);
  if (remap.empty()) return Status::ok();
  // Each backward node after a region's forward reads the recomputed values.
  SPMD_RETURN_IF_ERROR(spliceClones(g, originals, clonesBefore, plan.forward, remap, [&](const ir::Value* v) {
    return plan.lastForward.at(plan.region.at(v->producer()));
  }));
  if (figures.after) summary.savedBytesAfter = estimateSavedActivations(program).savedBytes;
  return Status::ok();
}

Status Recompute::run(program::Program& program) {
  if (schema::hasAutoRecompute(plan_.rules))
    return Status::error("recompute: an \"auto\" entry must be resolved first (chooseRecompute)");
  return applyRecompute(program, plan_, summary_, figures_);
}

}  // namespace spmd::passes
