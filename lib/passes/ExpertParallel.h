// Expert parallelism checks before propagation (docs/EXPERT_PARALLEL.md).
//
//   schema: {"match": "*experts.w*", "placements": {"ep": "S(0)"}}, 6 experts, ep = 4
//   -> error: model.pt2: node %moe_experts (spmdc.moe_experts.default): its 6 experts (w1 p_moe_w1
//      f32[6, 16, 8]) do not divide over mesh axis ep (4 ranks): make ep's size divide 6, or replicate
//      the experts
#pragma once

#include "ir/Graph.h"
#include "schema/Resolve.h"
#include "support/Status.h"

namespace spmd::passes {

/// Error naming the first MoE experts node (spmdc.moe_experts, its
/// backward) whose stacked expert weights the placements split over a mesh
/// axis whose size does not divide the expert count; every rank must hold
/// the same number of experts.
Status checkExpertPlacements(const ir::ExportedProgram& program,
                             const schema::ResolvedPlacements& placements);

}  // namespace spmd::passes
