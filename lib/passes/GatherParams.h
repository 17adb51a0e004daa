// FSDP's gather before use: a parameter stored sharded is read through a
// fixed layout anchor that all-gathers it just before its first use.
//
//   %fc1_weight [S(0)] (stored sharded)     %fc1_weight [S(0)]
//   %t = aten.t.default(%fc1_weight)   =>   %fc1_weight_gathered = aten.alias.default(%fc1_weight)
//   ...                                         {spmd_layout: "[R]"}      # all-gather here
//                                           %t = aten.t.default(%fc1_weight_gathered)
//
// The optimizer update keeps reading the stored shard, and the gradient,
// anchored to the parameter's layout, is reduce-scattered back to it.
#pragma once

#include "ir/Graph.h"
#include "schema/Resolve.h"
#include "support/Status.h"

namespace spmd::passes {

/// For each input with a `placements.gathered` layout, inserts an anchor
/// into that layout before the input's first use and makes every other
/// reader, except the optimizer update, read the anchor.
Status insertParameterGathers(ir::ExportedProgram& program, const schema::ResolvedPlacements& placements);

}  // namespace spmd::passes
