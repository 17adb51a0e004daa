// Pipeline parallelism's part of compile() (see PipelineStages.h).
#include "passes/PipelineStages.h"

#include <algorithm>

#include "pipeline/StageGraphs.h"
#include "support/Strings.h"

namespace spmd::passes {

Expected<PipelineSetup> pipelineSetup(const schema::PlacementSchema& s,
                                      const std::optional<std::vector<int64_t>>& mesh) {
  const schema::PipelineRequest& pp = *s.pipeline;
  SPMD_ASSIGN_OR_RETURN(sharding::Mesh full, schema::resolveMesh(s, mesh));
  int64_t axis = full.axisIndex(pp.axis);
  if (axis < 0)
    return Status::error(s.source + ": pipeline: the mesh " + full.str() + " has no axis '" + pp.axis +
                         "': name the mesh's axes (\"mesh\": {\"axes\": [\"pp\", \"dp\"]}) and give the " +
                         "pipeline's one as \"axis\"");
  PipelineSetup out;
  out.microbatches = pp.microbatches;
  out.request.axis = pp.axis;
  out.request.stages = full.size(axis);
  out.request.boundaries = pp.boundaries;
  out.request.schedule = pp.schedule;
  out.request.virtualStages = pp.virtualStages;
  if (pp.virtualStages < 1)
    return Status::error(s.source + ": pipeline: \"virtual_stages\" must be at least 1");
  if (pp.stageCount > 0 && pp.stageCount != out.request.stages)
    return Status::error(s.source + ": pipeline: \"stages\": " + std::to_string(pp.stageCount) +
                         " but axis '" + pp.axis + "' has size " + std::to_string(out.request.stages));
  // A schedule that cannot run these microbatches is refused before compiling.
  if (auto actions =
          pipeline::scheduleActions(pp.schedule, out.request.stages, pp.microbatches, pp.virtualStages);
      !actions)
    return actions.status().withContext(s.source);
  std::string mb = "mb";
  while (full.axisIndex(mb) >= 0) mb += "_";
  out.request.microbatchAxis = mb;
  out.inner = s;
  out.inner.pipeline.reset();
  std::vector<int64_t> shape = full.shape();
  std::vector<std::string> names = full.axisNames();
  shape.erase(shape.begin() + axis);
  names.erase(names.begin() + axis);
  // A pipeline-only mesh keeps a data-parallel axis of one rank.
  if (shape.empty()) shape = {1}, names = {full.axisIndex("dp") < 0 ? "dp" : "pp_dp"};
  out.microbatchIndex = shape.empty() ? 0 : axis;
  out.inner.meshShape = shape;
  out.inner.meshAxes = names;
  if (mesh) out.innerMesh = shape;
  return out;
}

Status addMicrobatchAxis(schema::ResolvedPlacements& r, const ir::ExportedProgram& g,
                         const pipeline::StageRequest& req, int64_t microbatches, int64_t index) {
  std::vector<int64_t> shape = r.mesh.shape();
  std::vector<std::string> names = r.mesh.axisNames();
  shape.insert(shape.begin() + index, microbatches);
  names.insert(names.begin() + index, req.microbatchAxis);
  auto insert = [&](std::vector<sharding::Placement>& ps, sharding::Placement p) {
    ps.insert(ps.begin() + index, p);
  };
  sharding::Mesh before = r.mesh;
  SPMD_ASSIGN_OR_RETURN(r.mesh, sharding::Mesh::create(shape, names));
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const ir::InputSpec& in = g.signature.inputs[i];
    bool batch = in.kind == ir::InputKind::UserInput && in.value && in.value->isTensor() &&
                 !in.value->type().sizes.empty();
    auto& placements = r.inputs[i].placements;
    if (placements.empty())
      placements.assign(static_cast<size_t>(before.numAxes()), sharding::Placement::replicate());
    if (batch) {
      int64_t split = microbatches;
      for (size_t a = 0; a < placements.size(); ++a)
        if (placements[a].isShard() && placements[a].dim == 0) split *= before.size(static_cast<int64_t>(a));
      const ir::Dim& rows = in.value->type().sizes[0];
      if (!rows.isStatic() || rows.value() % split != 0)
        return Status::error("pipeline: input '" + in.name + "' has " + rows.str() +
                             " rows (dim 0), which do not " + "split into " + std::to_string(microbatches) +
                             " microbatches on each of its " + std::to_string(split / microbatches) +
                             " shards: give a batch that is a multiple of " + std::to_string(split) +
                             ", or fewer microbatches");
    }
    insert(placements, batch ? sharding::Placement::shard(0) : sharding::Placement::replicate());
    if (r.gathered[i]) {
      if (r.gathered[i]->placements.empty())
        r.gathered[i]->placements.assign(static_cast<size_t>(before.numAxes()),
                                         sharding::Placement::replicate());
      insert(r.gathered[i]->placements, sharding::Placement::replicate());
    }
  }
  for (auto& o : r.outputs)
    if (o) {
      if (o->placements.empty())
        o->placements.assign(static_cast<size_t>(before.numAxes()), sharding::Placement::replicate());
      insert(o->placements, sharding::Placement::replicate());
    }
  return Status::ok();
}

std::string pipelineNote(const program::Program& p) {
  const program::PipelinePlan& plan = *p.pipeline;
  int64_t bytes = 0;
  std::vector<pipeline::Transfer> transfers = pipeline::stageTransfers(p);
  for (const auto& t : transfers) {
    const ir::Value* v = p.graph.graph.findValue(t.value);
    if (v && v->type().numel()) bytes += *v->type().numel() * ir::elementSize(v->type().dtype);
  }
  return "pipeline: " + std::to_string(plan.stages) + " stages over axis '" + plan.axis + "', " +
         plan.schedule +
         (plan.virtualStages > 1 ? " (" + std::to_string(plan.virtualStages) + " virtual stages per rank)"
                                 : "") +
         ", " + std::to_string(p.mesh.size(p.mesh.axisIndex(plan.microbatchAxis))) +
         " microbatches (mesh axis '" + plan.microbatchAxis +
         "': its all-reduces sum over microbatches, nothing is sent); stages send each other " +
         std::to_string(transfers.size()) + " values, " + withCommas(bytes) + " B per microbatch";
}

}  // namespace spmd::passes
