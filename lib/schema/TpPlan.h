// Hugging Face tensor-parallel plans (`config.base_model_tp_plan`) as
// placements: module globs mapped to transformers' styles, applied to the
// parameters of the modules they match under any prefix the exported
// module adds.
//
//   plan {"layers.*.self_attn.q_proj": "colwise", "layers.*.self_attn.o_proj": "rowwise"}, axis "tp"
//   model.layers.0.self_attn.q_proj.weight (nn.Linear [out, in]) -> {"tp": S(0)}, its bias -> S(0)
//   model.layers.0.self_attn.o_proj.weight                       -> {"tp": S(1)}, its bias -> R
//   transformer.h.0.attn.c_attn.weight (GPT-2's Conv1D [in, out]) under "colwise" -> S(1)
//   an nn.Embedding under "colwise" -> S(1) (its dim), under "rowwise" -> S(0) (vocab-parallel)
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/Graph.h"
#include "sharding/Placement.h"
#include "support/Status.h"

namespace spmd::schema {

/// A tensor-parallel plan: (module glob, style) in file order.
using TpPlan = std::vector<std::pair<std::string, std::string>>;

/// Checks every style of `plan`; the error names the glob, the style and
/// the known styles. `where` prefixes messages ("s.json: /tp_plan").
Status checkTpPlan(const TpPlan& plan, const std::string& where);

/// The glob of the first entry of `plan` whose style is sequence_parallel
/// (transformers' SequenceParallel on the norms): the plan asks for
/// sequence parallelism on its axis. nullopt when none is.
std::optional<std::string> sequenceParallelEntry(const TpPlan& plan);

/// Module path -> module type ("transformers.pytorch_utils.Conv1D"), from
/// the nn_module_stack of the program's nodes; for a module without one (a
/// joint train step keeps none), "Conv1D" or "Embedding" when its weight's
/// readers show it (an mm's right operand read untransposed; an embedding
/// table).
std::map<std::string, std::string> moduleTypes(const ir::ExportedProgram& p);

/// The entry of `plan` that governs module `path`: the longest glob that
/// matches the path or a suffix of it after a dot (plans are relative to
/// the base model: "layers.*.mlp" matches "model.layers.0.mlp"); nullopt
/// when none does.
std::optional<std::pair<std::string, std::string>> tpPlanEntry(const TpPlan& plan, const std::string& path);

/// The placement style `style` gives parameter `leaf` ("weight", "bias", or
/// another name) of rank `rank` in a module of type `moduleType` (empty
/// when unknown: treated as nn.Linear).
sharding::Placement tpPlacement(const std::string& style, const std::string& moduleType,
                                const std::string& leaf, int64_t rank);

}  // namespace spmd::schema
