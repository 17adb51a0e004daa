// `spmdc schema from-hf`: a Hugging Face tensor-parallel plan written out as
// an explicit placement schema the user can read, edit and pin.
//
//   plan.json {"base_model_tp_plan": {"layers.*.self_attn.q_proj": "colwise", ...},
//              "tp_plan": {"lm_head": "colwise_rep"}}
//   with the model: {"match": "model.layers.0.self_attn.q_proj.weight", "placements": {"tp": "S(0)"}}, ...
//   without:        {"match": "*layers.*.self_attn.q_proj.weight", "placements": {"tp": "S(0)"},
//                    "optional": true}, ... (modules taken for nn.Linear)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/Graph.h"
#include "schema/TpPlan.h"
#include "support/Status.h"

namespace spmd::schema {

/// Reads the plan in the JSON file at `path`: the object under
/// "base_model_tp_plan" merged with the one under "tp_plan" (a model's
/// head, e.g. lm_head), at the top level or one level down (a config
/// dump), or the file's object itself when it maps globs to styles.
Expected<TpPlan> readHfPlan(const std::string& path);

/// What the written schema's mesh is.
struct SchemaMesh {
  std::vector<int64_t> shape;
  /// Empty: the last axis is the tp axis (named as tpAxis says) and the
  /// others split the batch: "tp" (1-D), "dp", "tp" (2-D), "dp0", "dp1",
  /// "tp" (3-D), ...
  std::vector<std::string> axes;
  /// Empty: the axis named tp.
  std::string tpAxis;
};

/// The explicit schema (JSON text) equivalent to `plan` on `mesh`: with
/// `program`, one rule per parameter the plan shards, as compile would
/// place it; without, glob rules that take every module for nn.Linear.
/// `source` names the plan file in the schema's comment.
Expected<std::string> explicitSchemaFromPlan(const TpPlan& plan, const SchemaMesh& mesh,
                                             const ir::ExportedProgram* program, const std::string& source);

}  // namespace spmd::schema
