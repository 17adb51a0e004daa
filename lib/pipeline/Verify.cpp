// verifyPipeline (see Verify.h): a simulation of every stage's actions.
#include "pipeline/Verify.h"

#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "pipeline/StageGraphs.h"
#include "program/PipelineText.h"

namespace spmd::pipeline {
namespace {

using program::PipelineAction;
using Kind = PipelineAction::Kind;
using Phase = program::PipelinePlace::Phase;

Kind kindOf(Phase phase) { return phase == Phase::Forward ? Kind::Forward : Kind::Backward; }

// The actions that send and receive each transfer: a backward value is sent
// by the sender's I action and received by the receiver's I action when
// its I reads it, else by its W (zero-bubble); otherwise F and B.
std::map<std::pair<int64_t, Kind>, std::set<std::pair<int64_t, Kind>>> transferSources(
    const program::Program& p) {
  const program::PipelinePlan& plan = *p.pipeline;
  bool split = splitsBackward(plan);
  std::vector<std::vector<bool>> input;
  for (int64_t c = 0; split && c < plan.chunks(); ++c) input.push_back(inputGradientNodes(p, c));
  std::map<std::pair<int64_t, Kind>, std::set<std::pair<int64_t, Kind>>> out;
  for (const Transfer& t : stageTransfers(p)) {
    Kind from = kindOf(t.fromPhase), to = kindOf(t.toPhase);
    if (split && from == Kind::Backward) from = Kind::Input;
    if (split && to == Kind::Backward) {
      to = Kind::Weight;
      for (const ir::Node* u : p.graph.graph.findValue(t.value)->users())
        if (input[static_cast<size_t>(t.to)][static_cast<size_t>(u->index())]) to = Kind::Input;
    }
    out[{t.to, to}].insert({t.from, from});
  }
  return out;
}

// The action that must come before `k` of the same microbatch and stage.
std::optional<Kind> prerequisite(Kind k) {
  if (k == Kind::Backward || k == Kind::Input) return Kind::Forward;
  if (k == Kind::Weight) return Kind::Input;
  return std::nullopt;
}

// "stage 1" (one stage per rank) or "rank 1" (virtual stages).
std::string rankName(const program::PipelinePlan& plan, size_t r) {
  return (plan.virtualStages > 1 ? "rank " : "stage ") + std::to_string(r);
}

Status checkShape(const program::Program& p, int64_t microbatches) {
  const program::PipelinePlan& plan = *p.pipeline;
  if (plan.places.size() != p.graph.graph.nodes().size())
    return Status::error("pipeline: " + std::to_string(plan.places.size()) + " places for " +
                         std::to_string(p.graph.graph.nodes().size()) + " nodes");
  for (size_t i = 0; i < plan.places.size(); ++i)
    if (plan.places[i].stage >= plan.chunks())
      return Status::error("pipeline: node %" + p.graph.graph.nodes()[i]->name() + " is placed on stage " +
                           std::to_string(plan.places[i].stage) + " of " + std::to_string(plan.chunks()));
  if (static_cast<int64_t>(plan.actions.size()) != plan.stages)
    return Status::error("pipeline: " + std::to_string(plan.actions.size()) + " action lists for " +
                         std::to_string(plan.stages) + " stages");
  bool split = splitsBackward(plan);
  for (size_t r = 0; r < plan.actions.size(); ++r) {
    std::set<std::tuple<int64_t, Kind, int64_t>> seen;
    for (const PipelineAction& a : plan.actions[r]) {
      std::string where = "pipeline: " + rankName(plan, r) + " action " + program::actionText(a);
      bool splitKind = a.kind == Kind::Input || a.kind == Kind::Weight;
      if (a.kind != Kind::Forward && splitKind != split)
        return Status::error(where + ": " + plan.schedule + " runs " +
                             (split ? "I and W actions, not B" : "B actions, not I or W"));
      int64_t c = plan.stageOf(static_cast<int64_t>(r), a);
      if (a.microbatch >= microbatches)
        return Status::error(where + ": there are " + std::to_string(microbatches) + " microbatches");
      if (c >= plan.chunks() || plan.rankOf(c) != static_cast<int64_t>(r))
        return Status::error(where + ": stage " + std::to_string(c) + " does not run on " +
                             rankName(plan, r));
      if (!seen.insert({c, a.kind, a.microbatch}).second) return Status::error(where + " appears twice");
      std::optional<Kind> before = prerequisite(a.kind);
      if (before && !seen.count({c, *before, a.microbatch}))
        return Status::error(
            where + " comes before the " + (*before == Kind::Forward ? "forward" : "input gradients") +
            " of its microbatch (" + program::actionText({*before, a.microbatch, a.stage}) + ")");
    }
    if (static_cast<int64_t>(seen.size()) != (split ? 3 : 2) * microbatches * plan.virtualStages)
      return Status::error("pipeline: " + rankName(plan, r) + " does not run the forward and backward " +
                           (split ? "(I and W) " : "") + "of every one of the " +
                           std::to_string(microbatches) + " microbatches" +
                           (plan.virtualStages > 1 ? " on each of its stages" : ""));
  }
  return Status::ok();
}

}  // namespace

Status verifyPipeline(const program::Program& p) {
  if (!p.pipeline) return Status::ok();
  const program::PipelinePlan& plan = *p.pipeline;
  int64_t mbAxis = p.mesh.axisIndex(plan.microbatchAxis);
  if (mbAxis < 0) return Status::error("pipeline: the mesh has no axis '" + plan.microbatchAxis + "'");
  if (plan.stages < 1 || plan.virtualStages < 1)
    return Status::error("pipeline: " + std::to_string(plan.stages) + " ranks of " +
                         std::to_string(plan.virtualStages) + " stages");
  int64_t microbatches = p.mesh.size(mbAxis);
  SPMD_RETURN_IF_ERROR(checkShape(p, microbatches));
  // Which (stage, kind) pairs each (stage, kind) receives from (virtual stages).
  auto sources = transferSources(p);
  // Every rank runs its list in order; an action waits (a blocking receive)
  // until every action it receives from has run; sends never block.
  std::set<std::tuple<int64_t, Kind, int64_t>> done;
  std::vector<size_t> next(plan.actions.size(), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < plan.actions.size(); ++r)
      while (next[r] < plan.actions[r].size()) {
        const PipelineAction& a = plan.actions[r][next[r]];
        int64_t c = plan.stageOf(static_cast<int64_t>(r), a);
        bool ready = true;
        for (const auto& [from, kind] : sources[{c, a.kind}])
          ready &= done.count({from, kind, a.microbatch}) > 0;
        if (!ready) break;
        done.insert({c, a.kind, a.microbatch});
        ++next[r], progress = true;
      }
  }
  std::string stuck;
  for (size_t r = 0; r < plan.actions.size(); ++r) {
    if (next[r] == plan.actions[r].size()) continue;
    const PipelineAction& a = plan.actions[r][next[r]];
    int64_t c = plan.stageOf(static_cast<int64_t>(r), a);
    std::string waits;
    for (const auto& [from, kind] : sources[{c, a.kind}])
      if (!done.count({from, kind, a.microbatch}))
        waits += (waits.empty() ? "" : ", ") +
                 program::actionText({kind, a.microbatch, plan.virtualStages > 1 ? from : -1}) +
                 " of stage " + std::to_string(from) +
                 (plan.virtualStages > 1 ? " (rank " + std::to_string(plan.rankOf(from)) + ")" : "");
    stuck += (stuck.empty() ? "" : "; ") + rankName(plan, r) + " waits at " + program::actionText(a) +
             " for " + waits;
  }
  if (!stuck.empty()) return Status::error("pipeline: the schedule deadlocks: " + stuck);
  return Status::ok();
}

}  // namespace spmd::pipeline
