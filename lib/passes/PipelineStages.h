// Pipeline parallelism in compile(): the schema's pipeline axis leaves the
// mesh the step is compiled over, and a microbatch axis takes its place
// (outside the data- and tensor-parallel axes that follow it, so a view
// that merges the batch with a tensor-parallel dim keeps its shards in
// order; the step is the whole batch's either way); after the passes,
// pipeline::planPipeline places every node on a stage.
//
//   mesh 2x2 (pp, dp), "pipeline": {"axis": "pp", "microbatches": 4}
//   -> compiled over 2x4 (dp, mb): tokens [S(0), S(0)], weights [R, R]
//   -> plan: stages 2, 1f1b, one place per node
#pragma once

#include <optional>
#include <vector>

#include "pipeline/Stages.h"
#include "program/Program.h"
#include "schema/PlacementSchema.h"
#include "schema/Resolve.h"

namespace spmd::passes {

/// A pipeline compile's two meshes and its request.
struct PipelineSetup {
  pipeline::StageRequest request;
  int64_t microbatches = 0;
  /// The schema without its pipeline axis (mesh shape and names).
  schema::PlacementSchema inner;
  /// --mesh without the pipeline axis.
  std::optional<std::vector<int64_t>> innerMesh;
  /// Where the microbatch axis goes: the pipeline axis's place.
  int64_t microbatchIndex = 0;
};

/// The setup for `s` (which has a pipeline) and --mesh. Errors: no axis of
/// that name, "stages" not the axis's size, a mesh without axis names.
Expected<PipelineSetup> pipelineSetup(const schema::PlacementSchema& s,
                                      const std::optional<std::vector<int64_t>>& mesh);

/// Inserts the microbatch axis (size `microbatches`, at `index`) into resolved
/// placements: user inputs split on dim 0, everything else replicated.
/// Error names an input whose batch does not split evenly.
Status addMicrobatchAxis(schema::ResolvedPlacements& r, const ir::ExportedProgram& g,
                         const pipeline::StageRequest& req, int64_t microbatches, int64_t index);

/// One line on a compiled pipeline: stages, schedule, microbatches, the
/// values and bytes the stages send each other per microbatch, and that
/// the all-reduces over the microbatch axis are sums over microbatches.
std::string pipelineNote(const program::Program& p);

}  // namespace spmd::passes
