// `spmdc schema from-hf` (see FromHf.h). With the model, the placements come
// from resolvePlacements on a schema holding the plan, so the written file
// places exactly what compiling with the plan would.
#include "schema/FromHf.h"

#include <nlohmann/json.hpp>

#include "schema/PlacementSchema.h"
#include "schema/Resolve.h"
#include "support/File.h"

namespace spmd::schema {
namespace {

using json = nlohmann::json;
using ordered = nlohmann::ordered_json;

// The plan objects of `doc` (or of one object one level down).
bool collectPlan(const json& doc, TpPlan& plan) {
  bool found = false;
  for (const char* key : {"base_model_tp_plan", "tp_plan"}) {
    if (!doc.contains(key) || !doc[key].is_object()) continue;
    for (const auto& [glob, style] : doc[key].items())
      if (style.is_string()) plan.emplace_back(glob, style.get<std::string>());
    found = true;
  }
  return found;
}

bool looksLikePlan(const json& doc) {
  if (!doc.is_object() || doc.empty()) return false;
  for (const auto& [k, v] : doc.items())
    if (!v.is_string()) return false;
  return true;
}

// The mesh's axis names: as given, else the last is the tp axis (tp, or
// as --tp-axis names it) and the others split the batch: dp (2-D), or dp0,
// dp1, ... (more axes).
std::vector<std::string> axisNames(const SchemaMesh& m) {
  if (!m.axes.empty() || m.shape.empty()) return m.axes;
  std::vector<std::string> axes;
  for (size_t a = 0; a + 1 < m.shape.size(); ++a)
    axes.push_back(m.shape.size() == 2 ? "dp" : "dp" + std::to_string(a));
  axes.push_back(m.tpAxis.empty() ? "tp" : m.tpAxis);
  return axes;
}

}  // namespace

Expected<TpPlan> readHfPlan(const std::string& path) {
  SPMD_ASSIGN_OR_RETURN(std::string text, readFile(path));
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return Status::error(path + ": not a JSON object (expected a config or plan with base_model_tp_plan)");
  TpPlan plan;
  bool found = collectPlan(doc, plan);
  for (auto it = doc.begin(); !found && it != doc.end(); ++it)
    if (it->is_object()) found = collectPlan(*it, plan);
  if (!found && looksLikePlan(doc)) {
    for (const auto& [glob, style] : doc.items()) plan.emplace_back(glob, style.get<std::string>());
    found = true;
  }
  if (!found || plan.empty())
    return Status::error(
        path +
        ": no tensor-parallel plan: expected a \"base_model_tp_plan\" object (transformers keeps it "
        "on the config class: write config.base_model_tp_plan into the file), or an object of "
        "module globs to styles");
  SPMD_RETURN_IF_ERROR(checkTpPlan(plan, path + ": tensor-parallel plan"));
  return plan;
}

Expected<std::string> explicitSchemaFromPlan(const TpPlan& plan, const SchemaMesh& m,
                                             const ir::ExportedProgram* program, const std::string& source) {
  ordered out;
  out["version"] = 1;
  out["comment"] = "Written by spmdc schema from-hf from " + source +
                   (program ? " and the model: the placements compiling with that plan gives."
                            : ": modules taken for nn.Linear (give --model to check the types).");
  PlacementSchema s;
  s.source = source;
  s.meshShape = m.shape;
  s.meshAxes = axisNames(m);
  out["mesh"] = {{"shape", m.shape}, {"axes", s.meshAxes}};
  s.tpPlan = plan;
  s.tpAxis = m.tpAxis;
  SPMD_ASSIGN_OR_RETURN(sharding::Mesh mesh, resolveMesh(s, std::nullopt));
  SPMD_ASSIGN_OR_RETURN(int64_t tp, [&]() -> Expected<int64_t> {
    std::string axis = m.tpAxis.empty() ? "tp" : m.tpAxis;
    if (mesh.axisIndex(axis) >= 0) return mesh.axisIndex(axis);
    if (mesh.numAxes() == 1) return int64_t{0};
    return Status::error(source + ": the mesh " + mesh.str() + " has no axis '" + axis +
                         "': name the tp axis with --tp-axis, or leave out --axes (dp,tp)");
  }());
  ordered rules = ordered::array();
  if (program) {
    SPMD_ASSIGN_OR_RETURN(ResolvedPlacements r, resolvePlacements(s, *program, std::nullopt));
    for (size_t i = 0; i < program->signature.inputs.size(); ++i) {
      const ir::InputSpec& in = program->signature.inputs[i];
      if (in.kind != ir::InputKind::Parameter || r.inputs[i].isReplicated()) continue;
      ordered placements = ordered::object();
      for (size_t a = 0; a < r.inputs[i].placements.size(); ++a)
        if (!r.inputs[i].placements[a].isReplicate())
          placements[mesh.axisNames()[a]] = r.inputs[i].placements[a].str();
      rules.push_back({{"match", in.target}, {"placements", placements}});
    }
  } else {
    std::string axis = m.tpAxis.empty() ? "tp" : m.tpAxis;
    if (mesh.axisIndex(axis) < 0 && mesh.numAxes() == 1) axis = mesh.axisNames()[0];
    for (const auto& [glob, style] : plan) {
      for (const auto& [leaf, rank] : {std::pair<const char*, int64_t>{"weight", 2}, {"bias", 1}}) {
        sharding::Placement p = tpPlacement(style, "", leaf, rank);
        if (p.isReplicate()) continue;
        rules.push_back({{"match", "*" + glob + "." + leaf},
                         {"placements", {{axis, p.str()}}},
                         {"optional", true},
                         {"comment", "'" + style + "'"}});
      }
    }
  }
  out["params"] = rules;
  // The other axes split the batch (data parallel x tensor parallel).
  ordered inputs = ordered::array();
  for (int64_t a = 0; a < mesh.numAxes(); ++a)
    if (a != tp)
      inputs.push_back({{"match", "*"},
                        {"placements", {{mesh.axisNames()[static_cast<size_t>(a)], "S(0)"}}},
                        {"where_divisible", true},
                        {"comment", "data parallel: the batch split over this axis"}});
  if (!inputs.empty()) out["inputs"] = inputs;
  // A sequence_parallel style asks for sequence parallelism on the tp axis.
  if (sequenceParallelEntry(plan)) out["sequence_parallel"] = mesh.axisNames()[static_cast<size_t>(tp)];
  out["outputs"] = "replicate";
  return out.dump(1) + "\n";
}

}  // namespace spmd::schema
