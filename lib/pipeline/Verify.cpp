// verifyPipeline (see Verify.h): a simulation of every stage's actions.
#include "pipeline/Verify.h"

#include <map>
#include <set>

#include "pipeline/StageGraphs.h"
#include "program/PipelineText.h"

namespace spmd::pipeline {
namespace {

using program::PipelineAction;
using Kind = PipelineAction::Kind;
using Phase = program::PipelinePlace::Phase;

Kind kindOf(Phase phase) { return phase == Phase::Forward ? Kind::Forward : Kind::Backward; }

Status checkShape(const program::Program& p, int64_t microbatches) {
  const program::PipelinePlan& plan = *p.pipeline;
  if (plan.places.size() != p.graph.graph.nodes().size())
    return Status::error("pipeline: " + std::to_string(plan.places.size()) + " places for " +
                         std::to_string(p.graph.graph.nodes().size()) + " nodes");
  for (size_t i = 0; i < plan.places.size(); ++i)
    if (plan.places[i].stage >= plan.stages)
      return Status::error("pipeline: node %" + p.graph.graph.nodes()[i]->name() + " is placed on stage " +
                           std::to_string(plan.places[i].stage) + " of " + std::to_string(plan.stages));
  if (static_cast<int64_t>(plan.actions.size()) != plan.stages)
    return Status::error("pipeline: " + std::to_string(plan.actions.size()) + " action lists for " +
                         std::to_string(plan.stages) + " stages");
  for (size_t s = 0; s < plan.actions.size(); ++s) {
    std::set<std::pair<Kind, int64_t>> seen;
    for (const PipelineAction& a : plan.actions[s]) {
      std::string where = "pipeline: stage " + std::to_string(s) + " action " + program::actionText(a);
      if (a.microbatch >= microbatches)
        return Status::error(where + ": there are " + std::to_string(microbatches) + " microbatches");
      if (!seen.insert({a.kind, a.microbatch}).second) return Status::error(where + " appears twice");
      if (a.kind == Kind::Backward && !seen.count({Kind::Forward, a.microbatch}))
        return Status::error(where + " comes before the forward of its microbatch");
    }
    if (static_cast<int64_t>(seen.size()) != 2 * microbatches)
      return Status::error("pipeline: stage " + std::to_string(s) +
                           " does not run the forward and backward of " + "every one of the " +
                           std::to_string(microbatches) + " microbatches");
  }
  return Status::ok();
}

}  // namespace

Status verifyPipeline(const program::Program& p) {
  if (!p.pipeline) return Status::ok();
  const program::PipelinePlan& plan = *p.pipeline;
  int64_t mbAxis = p.mesh.axisIndex(plan.microbatchAxis);
  if (mbAxis < 0) return Status::error("pipeline: the mesh has no axis '" + plan.microbatchAxis + "'");
  int64_t microbatches = p.mesh.size(mbAxis);
  SPMD_RETURN_IF_ERROR(checkShape(p, microbatches));
  // Which (stage, kind) pairs each (stage, kind) receives from.
  std::map<std::pair<int64_t, Kind>, std::set<std::pair<int64_t, Kind>>> sources;
  for (const Transfer& t : stageTransfers(p))
    sources[{t.to, kindOf(t.toPhase)}].insert({t.from, kindOf(t.fromPhase)});
  std::set<std::tuple<int64_t, Kind, int64_t>> done;
  std::vector<size_t> next(plan.actions.size(), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t s = 0; s < plan.actions.size(); ++s)
      while (next[s] < plan.actions[s].size()) {
        const PipelineAction& a = plan.actions[s][next[s]];
        bool ready = true;
        for (const auto& [from, kind] : sources[{static_cast<int64_t>(s), a.kind}])
          ready &= done.count({from, kind, a.microbatch}) > 0;
        if (!ready) break;
        done.insert({static_cast<int64_t>(s), a.kind, a.microbatch});
        ++next[s], progress = true;
      }
  }
  std::string stuck;
  for (size_t s = 0; s < plan.actions.size(); ++s) {
    if (next[s] == plan.actions[s].size()) continue;
    const PipelineAction& a = plan.actions[s][next[s]];
    std::string waits;
    for (const auto& [from, kind] : sources[{static_cast<int64_t>(s), a.kind}])
      if (!done.count({from, kind, a.microbatch}))
        waits += (waits.empty() ? "" : ", ") + program::actionText({kind, a.microbatch}) + " of stage " +
                 std::to_string(from);
    stuck += (stuck.empty() ? "" : "; ") + std::string("stage ") + std::to_string(s) + " waits at " +
             program::actionText(a) + " for " + waits;
  }
  if (!stuck.empty()) return Status::error("pipeline: the schedule deadlocks: " + stuck);
  return Status::ok();
}

}  // namespace spmd::pipeline
