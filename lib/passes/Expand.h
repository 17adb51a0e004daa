// SPMD expansion: turns the global graph plus a propagation into one local
// graph for all ranks. Operands whose layout differs from what their node
// needs are redistributed through reshard() (the one place that emits
// collectives); size-carrying arguments get local sizes; outputs are
// redistributed to the layouts the placement schema asks for.
//
//   %addmm_1: f32[32, 64] = aten.addmm.default(%p_fc2_bias, %gelu, %permute_1)   (global)
// becomes, with fc2 row-parallel on mesh 8:
//   %p_fc2_bias_zero_partial: f32[64] = spmd.zero_partial(%p_fc2_bias, "x")
//   %addmm_1: f32[32, 64] = aten.addmm.default(%p_fc2_bias_zero_partial, %gelu, %permute_1)
//   %addmm_1_all_reduce: f32[32, 64] = spmd.all_reduce(%addmm_1, "x", "sum")
//   output %addmm_1_all_reduce user_output
#pragma once

#include <optional>
#include <vector>

#include "program/Program.h"
#include "sharding/CostModel.h"
#include "sharding/Propagation.h"

namespace spmd::passes {

/// What expand() needs besides the program.
struct ExpandInput {
  const ir::ExportedProgram* source = nullptr;
  const sharding::Propagation* propagation = nullptr;
  sharding::Mesh mesh;
  /// One per graph input.
  std::vector<sharding::ShardingSpec> inputSpecs;
  /// One per signature output; nullopt keeps the propagated layout.
  std::vector<std::optional<sharding::ShardingSpec>> outputSpecs;
  sharding::CostModel cost = sharding::CostModel();
  /// When set, receives one note per node the expansion rewrote for its
  /// local shards beyond the rule (a view run as a reshape), for --report.
  std::vector<std::string>* notes = nullptr;
};

/// Builds the local program (graph, boundary placements, collective
/// records). Weights are not touched. Errors name the node and value.
Expected<program::Program> expand(const ExpandInput& in);

/// The local type of a value of global type `global` laid out as `spec`
/// (symbolic sizes divide symbolically: s52 over 2 -> s52//2).
ir::TensorType localType(const ir::TensorType& global, const sharding::ShardingSpec& spec,
                         const sharding::Mesh& mesh);

}  // namespace spmd::passes
