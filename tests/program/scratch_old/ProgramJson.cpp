#include <exception>
#include <set>
#include "program/Program.h"
#include "IrToJson.h"
namespace spmd::program_old {
using program::Program;
namespace {
// ---- writing ---------------------------------------------------------------

Expected<Json> specToJson(const sharding::ShardingSpec& spec, const sharding::Mesh& mesh,
                          const std::string& what) {
  if (!spec.placements.empty() && static_cast<int64_t>(spec.placements.size()) != mesh.numAxes())
    return Status::error(what + ": spec " + spec.str() + " has " + std::to_string(spec.placements.size()) +
                         " placements but the mesh has " + std::to_string(mesh.numAxes()) + " axes");
  Json items = Json::array();
  for (const auto& p : spec.placements) items.push_back(p.str());
  return items;
}

Json globalTypeToJson(const ir::TensorType& t) {
  if (t.dtype == ir::ScalarType::Unknown && t.sizes.empty()) return nullptr;
  return tensorTypeToJson(t);
}

// The name of signature input `i` / output `i`, for readers of the JSON.
std::string inputName(const ir::ExportedProgram& g, size_t i) {
  return i < g.signature.inputs.size() ? g.signature.inputs[i].name : "";
}
std::string outputName(const ir::ExportedProgram& g, size_t i) {
  if (i >= g.signature.outputs.size()) return "";
  const ir::Value* v = g.signature.outputs[i].arg.value();
  return v ? v->name() : ir::printArgument(g.signature.outputs[i].arg);
}

Expected<Json> boundaryToJson(const Program& p, bool inputs) {
  const auto& list = inputs ? p.inputs : p.outputs;
  size_t expected = inputs ? p.graph.signature.inputs.size() : p.graph.signature.outputs.size();
  const char* what = inputs ? "inputs" : "outputs";
  if (list.size() != expected)
    return Status::error(std::string("program has ") + std::to_string(list.size()) + " boundary " + what +
                         " but the signature has " + std::to_string(expected));
  Json items = Json::array();
  for (size_t i = 0; i < list.size(); ++i) {
    std::string name = inputs ? inputName(p.graph, i) : outputName(p.graph, i);
    SPMD_ASSIGN_OR_RETURN(Json spec, specToJson(list[i].spec, p.mesh, std::string(what) + " '" + name + "'"));
    items.push_back(Json{
        {"name", name}, {"spec", std::move(spec)}, {"global_type", globalTypeToJson(list[i].globalType)}});
  }
  return items;
}

Expected<Json> weightsToJson(const Program& p) {
  Json items = Json::array();
  for (const auto& w : p.weights) {
    SPMD_ASSIGN_OR_RETURN(Json spec, specToJson(w.spec, p.mesh, "weight '" + w.fqn + "'"));
    Json shards = Json::array();
    for (const auto& s : w.shards)
      shards.push_back(Json{{"index", s.index}, {"offset", s.offset}, {"bytes", s.bytes}});
    items.push_back(Json{{"fqn", w.fqn},
                         {"dtype", static_cast<int>(w.dtype)},
                         {"global_shape", w.globalShape},
                         {"local_shape", w.localShape},
                         {"spec", std::move(spec)},
                         {"shards", std::move(shards)}});
  }
  return items;
}

Json collectivesToJson(const Program& p) {
  Json items = Json::array();
  for (const auto& c : p.collectives)
    items.push_back(Json{{"node", c.node},
                         {"kind", c.kind},
                         {"axis", c.axis},
                         {"bytes_per_rank", c.bytesPerRank},
                         {"consumer", c.consumer},
                         {"value", c.value},
                         {"from", c.from},
                         {"to", c.to},
                         {"source_line", c.sourceLine}});
  return items;
}

}  // namespace
Expected<Json> programToJson(const Program& p) {
  Json provenance = Json::object();
  std::set<std::string> seen;
  for (const auto& [k, v] : p.provenance) {
    if (!seen.insert(k).second) return Status::error("provenance key '" + k + "' appears twice");
    provenance[k] = v;
  }
  SPMD_ASSIGN_OR_RETURN(Json inputs, boundaryToJson(p, true));
  SPMD_ASSIGN_OR_RETURN(Json outputs, boundaryToJson(p, false));
  SPMD_ASSIGN_OR_RETURN(Json weights, weightsToJson(p));
  SPMD_ASSIGN_OR_RETURN(Json graph, exportedProgramToJson(p.graph));
  return Json{{"format_version", Json{{"major", program::kFormatVersion}, {"minor", program::kFormatMinor}}},
              {"name", p.graph.name},
              {"mesh", Json{{"shape", p.mesh.shape()}, {"axes", p.mesh.axisNames()}}},
              {"inputs", std::move(inputs)},
              {"outputs", std::move(outputs)},
              {"weights", std::move(weights)},
              {"collectives", collectivesToJson(p)},
              {"provenance", std::move(provenance)},
              {"exported_program", std::move(graph)}};
}

Expected<std::string> programToJsonText(const Program& p) {
  SPMD_ASSIGN_OR_RETURN(Json j, programToJson(p));
  try {
    return j.dump(-1, ' ', false, Json::error_handler_t::replace);
  } catch (const std::exception& e) {
    return Status::error(std::string("cannot print the program JSON: ") + e.what());
  }
}

}  // namespace spmd::program_old
