// Program <-> the JSON part of a .spmd file (see ProgramJson.h).
//
//   BoundaryInfo{spec [S(0), R], global f32[64, 32]}
//   <-> {"name": "x", "spec": ["S(0)", "R"], "global_type": {"dtype": 7, "sizes": [...], ...}}
//
// Writing uses nlohmann (ordered keys); reading uses simdjson, the reader
// the .pt2 path already uses, so the embedded graph goes straight to
// pt2::buildProgram without a second parse.
#include "program/ProgramJson.h"

#include <simdjson.h>

#include <exception>
#include <set>

#include "pt2/JsonUtil.h"

namespace spmd::program {
namespace {

using simdjson::SUCCESS;
using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

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

// ---- reading ---------------------------------------------------------------

Status fieldError(const std::string& where, std::string_view key, const char* what) {
  return Status::error(where + ": field '" + std::string(key) + "' is missing or not " + what);
}

Expected<std::string> readString(element e, std::string_view key, const std::string& where) {
  std::string_view s;
  if (e[key].get_string().get(s) != SUCCESS) return fieldError(where, key, "a string");
  return std::string(s);
}

Expected<int64_t> readInt(element e, std::string_view key, const std::string& where) {
  int64_t i = 0;
  if (e[key].get_int64().get(i) != SUCCESS) return fieldError(where, key, "an integer");
  return i;
}

Expected<uint64_t> readUint(element e, std::string_view key, const std::string& where) {
  uint64_t u = 0;
  if (e[key].get_uint64().get(u) != SUCCESS) return fieldError(where, key, "a non-negative integer");
  return u;
}

Expected<array> readArray(element e, std::string_view key, const std::string& where) {
  array a;
  if (e[key].get_array().get(a) != SUCCESS) return fieldError(where, key, "a list");
  return a;
}

Expected<std::vector<int64_t>> readInts(element e, std::string_view key, const std::string& where) {
  SPMD_ASSIGN_OR_RETURN(array a, readArray(e, key, where));
  std::vector<int64_t> out;
  for (element item : a) {
    int64_t i = 0;
    if (item.get_int64().get(i) != SUCCESS) return fieldError(where, key, "a list of integers");
    out.push_back(i);
  }
  return out;
}

Expected<sharding::ShardingSpec> readSpec(element e, const std::string& where) {
  SPMD_ASSIGN_OR_RETURN(array a, readArray(e, "spec", where));
  sharding::ShardingSpec spec;
  for (element item : a) {
    std::string_view s;
    if (item.get_string().get(s) != SUCCESS) return fieldError(where, "spec", "a list of placement strings");
    auto p = sharding::parsePlacement(s);
    if (!p) return p.status().withContext(where);
    spec.placements.push_back(*p);
  }
  return spec;
}

Expected<sharding::Mesh> readMesh(element root) {
  element m;
  if (root["mesh"].get(m) != SUCCESS) return Status::error("field 'mesh' is missing");
  SPMD_ASSIGN_OR_RETURN(std::vector<int64_t> shape, readInts(m, "shape", "mesh"));
  SPMD_ASSIGN_OR_RETURN(array axes, readArray(m, "axes", "mesh"));
  std::vector<std::string> names;
  for (element a : axes) {
    std::string_view s;
    if (a.get_string().get(s) != SUCCESS) return fieldError("mesh", "axes", "a list of strings");
    names.emplace_back(s);
  }
  if (shape.empty() && names.empty()) return sharding::Mesh();
  auto mesh = sharding::Mesh::create(std::move(shape), std::move(names));
  if (!mesh) return mesh.status().withContext("mesh");
  return mesh;
}

Expected<std::vector<BoundaryInfo>> readBoundary(element root, const char* key) {
  SPMD_ASSIGN_OR_RETURN(array items, readArray(root, key, "program"));
  std::vector<BoundaryInfo> out;
  for (element item : items) {
    std::string where = std::string(key) + "[" + std::to_string(out.size()) + "]";
    BoundaryInfo b;
    SPMD_ASSIGN_OR_RETURN(b.spec, readSpec(item, where));
    object type;
    if (item["global_type"].get_object().get(type) == SUCCESS) {
      auto t = pt2::parseTensorMeta(type, "global_type");
      if (!t) return t.status().withContext(where);
      b.globalType = std::move(*t);
    }
    out.push_back(std::move(b));
  }
  return out;
}

Expected<WeightEntry> readWeight(element item, const std::string& where) {
  WeightEntry w;
  SPMD_ASSIGN_OR_RETURN(w.fqn, readString(item, "fqn", where));
  SPMD_ASSIGN_OR_RETURN(int64_t dtype, readInt(item, "dtype", where));
  auto st = ir::scalarTypeFromSchema(dtype);
  if (!st || *st == ir::ScalarType::Unknown)
    return Status::error(where + ": unknown dtype " + std::to_string(dtype));
  w.dtype = *st;
  SPMD_ASSIGN_OR_RETURN(w.globalShape, readInts(item, "global_shape", where));
  SPMD_ASSIGN_OR_RETURN(w.localShape, readInts(item, "local_shape", where));
  SPMD_ASSIGN_OR_RETURN(w.spec, readSpec(item, where));
  SPMD_ASSIGN_OR_RETURN(array shards, readArray(item, "shards", where));
  for (element s : shards) {
    std::string sw = where + ".shards[" + std::to_string(w.shards.size()) + "]";
    ShardBlob b;
    SPMD_ASSIGN_OR_RETURN(b.index, readInts(s, "index", sw));
    SPMD_ASSIGN_OR_RETURN(b.offset, readUint(s, "offset", sw));
    SPMD_ASSIGN_OR_RETURN(b.bytes, readUint(s, "bytes", sw));
    w.shards.push_back(std::move(b));
  }
  return w;
}

Expected<CollectiveRecord> readCollective(element item, const std::string& where) {
  CollectiveRecord c;
  SPMD_ASSIGN_OR_RETURN(c.node, readString(item, "node", where));
  SPMD_ASSIGN_OR_RETURN(c.kind, readString(item, "kind", where));
  SPMD_ASSIGN_OR_RETURN(c.axis, readString(item, "axis", where));
  SPMD_ASSIGN_OR_RETURN(c.bytesPerRank, readInt(item, "bytes_per_rank", where));
  SPMD_ASSIGN_OR_RETURN(c.consumer, readString(item, "consumer", where));
  SPMD_ASSIGN_OR_RETURN(c.value, readString(item, "value", where));
  SPMD_ASSIGN_OR_RETURN(c.from, readString(item, "from", where));
  SPMD_ASSIGN_OR_RETURN(c.to, readString(item, "to", where));
  SPMD_ASSIGN_OR_RETURN(c.sourceLine, readString(item, "source_line", where));
  return c;
}

// Every spec has one placement per mesh axis (boundary specs may be empty).
Status checkSpecs(const Program& p) {
  auto fits = [&](const sharding::ShardingSpec& s, bool mayBeEmpty) {
    return (mayBeEmpty && s.placements.empty()) ||
           static_cast<int64_t>(s.placements.size()) == p.mesh.numAxes();
  };
  auto error = [&](const std::string& where, const sharding::ShardingSpec& s) {
    return Status::error(where + ": spec " + s.str() + " does not have one placement per mesh axis (" +
                         std::to_string(p.mesh.numAxes()) + ")");
  };
  for (size_t i = 0; i < p.inputs.size(); ++i)
    if (!fits(p.inputs[i].spec, true)) return error("inputs[" + std::to_string(i) + "]", p.inputs[i].spec);
  for (size_t i = 0; i < p.outputs.size(); ++i)
    if (!fits(p.outputs[i].spec, true)) return error("outputs[" + std::to_string(i) + "]", p.outputs[i].spec);
  for (size_t i = 0; i < p.weights.size(); ++i)
    if (!fits(p.weights[i].spec, false))
      return error("weights[" + std::to_string(i) + "]", p.weights[i].spec);
  return Status::ok();
}

// Everything but the graph, in file order.
Status readParts(element root, Program& p) {
  element version;
  if (root["format_version"].get(version) != SUCCESS)
    return Status::error("field 'format_version' is missing");
  SPMD_ASSIGN_OR_RETURN(int64_t major, readInt(version, "major", "format_version"));
  SPMD_ASSIGN_OR_RETURN(int64_t minor, readInt(version, "minor", "format_version"));
  p.formatVersion = static_cast<int>(major);
  p.formatMinor = static_cast<int>(minor);
  SPMD_ASSIGN_OR_RETURN(p.mesh, readMesh(root));
  SPMD_ASSIGN_OR_RETURN(p.inputs, readBoundary(root, "inputs"));
  SPMD_ASSIGN_OR_RETURN(p.outputs, readBoundary(root, "outputs"));
  SPMD_ASSIGN_OR_RETURN(array weights, readArray(root, "weights", "program"));
  for (element w : weights) {
    SPMD_ASSIGN_OR_RETURN(WeightEntry entry,
                          readWeight(w, "weights[" + std::to_string(p.weights.size()) + "]"));
    p.weights.push_back(std::move(entry));
  }
  SPMD_ASSIGN_OR_RETURN(array collectives, readArray(root, "collectives", "program"));
  for (element c : collectives) {
    SPMD_ASSIGN_OR_RETURN(CollectiveRecord r,
                          readCollective(c, "collectives[" + std::to_string(p.collectives.size()) + "]"));
    p.collectives.push_back(std::move(r));
  }
  object prov;
  if (root["provenance"].get_object().get(prov) != SUCCESS)
    return fieldError("program", "provenance", "an object");
  for (auto field : prov) {
    std::string_view v;
    if (field.value.get_string().get(v) != SUCCESS)
      return Status::error("provenance: field '" + std::string(field.key) + "' is not a string");
    p.provenance.emplace_back(std::string(field.key), std::string(v));
  }
  return checkSpecs(p);
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
  return Json{{"format_version", Json{{"major", kFormatVersion}, {"minor", kFormatMinor}}},
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

Expected<Program> programFromJson(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  element root;
  if (auto err = parser.parse(padded).get(root); err != SUCCESS)
    return Status::error(std::string("program JSON does not parse: ") + simdjson::error_message(err));
  if (!root.is_object()) return Status::error("program JSON is not an object");
  Program p;
  SPMD_RETURN_IF_ERROR(readParts(root, p));
  SPMD_ASSIGN_OR_RETURN(std::string name, readString(root, "name", "program"));
  element graph;
  if (root["exported_program"].get(graph) != SUCCESS)
    return Status::error("field 'exported_program' is missing");
  auto g = pt2::buildProgram(graph, name);
  if (!g) return g.status().withContext("exported_program");
  p.graph = std::move(*g);
  if (p.inputs.size() != p.graph.signature.inputs.size() ||
      p.outputs.size() != p.graph.signature.outputs.size())
    return Status::error("inputs/outputs list " + std::to_string(p.inputs.size()) + "/" +
                         std::to_string(p.outputs.size()) + " entries but the signature has " +
                         std::to_string(p.graph.signature.inputs.size()) + "/" +
                         std::to_string(p.graph.signature.outputs.size()));
  return p;
}

}  // namespace spmd::program
