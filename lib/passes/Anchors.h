// Layout anchors: an `aten.alias` carrying `spmd_layout`, which propagation
// takes as the value's layout (a reshard before it, where the producer's
// layout differs). Graph passes that pin activations (sequence-parallel,
// context-parallel) insert them before propagation.
//
//   %k = aten.add.Tensor(...)                                  (cp = 2)
//   =>
//   %k    = aten.add.Tensor(...)
//   %k_cp = aten.alias.default(%k) {spmd_layout: "[R]"}   # all-gather over cp
//   ... every other reader of %k reads %k_cp ...
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/Graph.h"
#include "passes/Pipeline.h"
#include "schema/PlacementSchema.h"
#include "schema/Resolve.h"
#include "sharding/Placement.h"
#include "support/Status.h"

namespace spmd::passes {

/// Inserts an anchor of each (value, layout) right after the value's
/// producer (graph inputs: first), named `<value><suffix>` (made unique),
/// with metadata `marker` = "1"; every other reader of the value, the
/// backward of a train step included, reads the anchor. Each value at most
/// once. Errors: the graph fails verify() afterwards.
Status insertLayoutAnchors(ir::Graph& g,
                           const std::vector<std::pair<ir::Value*, sharding::ShardingSpec>>& pins,
                           const std::string& suffix, const std::string& marker);

/// Each of `values`' layout as propagation gives it from `placements`
/// without anchors (pending sums as R), so that an anchor can keep it on
/// the mesh axes it does not pin; all R on a 1-D mesh unless `always`.
Expected<std::vector<sharding::ShardingSpec>> baseLayouts(const ir::ExportedProgram& program,
                                                          const schema::PlacementSchema& schema,
                                                          const schema::ResolvedPlacements& placements,
                                                          const CompileOptions& options,
                                                          const std::vector<ir::Value*>& values,
                                                          bool always = false);

}  // namespace spmd::passes
