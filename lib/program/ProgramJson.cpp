// Program <-> the JSON part of a .spmd file (see ProgramJson.h).
//
//   BoundaryInfo{spec [S(0), R], global f32[64, 32]}
//   <-> {"name": "x", "spec": ["S(0)", "R"], "global_type": {"dtype": 7, "sizes": [...], ...}}
//
// Writing streams the text with a JsonWriter (no tree); reading uses
// simdjson, the reader the .pt2 path already uses, so the embedded graph
// goes straight to serialize::buildProgram without a second parse.
#include "program/ProgramJson.h"

#include <simdjson.h>

#include <cstdint>
#include <set>

#include "program/Format.h"
#include "program/PipelineText.h"
#include "serialize/FromExportJson.h"
#include "serialize/JsonUtil.h"
#include "serialize/ToExportJson.h"
#include "serialize/ToText.h"
#include "support/Strings.h"

namespace spmd::program {
namespace {

using serialize::JsonWriter;
using simdjson::SUCCESS;
using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// ---- writing ---------------------------------------------------------------

Status writeSpec(JsonWriter& w, const sharding::ShardingSpec& spec, const sharding::Mesh& mesh,
                 const std::string& what) {
  if (!spec.placements.empty() && static_cast<int64_t>(spec.placements.size()) != mesh.numAxes())
    return Status::error(what + ": spec " + spec.str() + " has " + std::to_string(spec.placements.size()) +
                         " placements but the mesh has " + std::to_string(mesh.numAxes()) + " axes");
  w.beginArray();
  for (const auto& p : spec.placements) w.string(p.str());
  w.endArray();
  return Status::ok();
}

void writeGlobalType(JsonWriter& w, const ir::TensorType& t) {
  if (t.dtype == ir::ScalarType::Unknown && t.sizes.empty())
    w.null();
  else
    serialize::writeTensorType(w, t);
}

// The name of signature input `i` / output `i`, for readers of the JSON.
std::string inputName(const ir::ExportedProgram& g, size_t i) {
  return i < g.signature.inputs.size() ? g.signature.inputs[i].name : "";
}
std::string outputName(const ir::ExportedProgram& g, size_t i) {
  if (i >= g.signature.outputs.size()) return "";
  const ir::Value* v = g.signature.outputs[i].arg.value();
  return v ? v->name() : serialize::printArgument(g.signature.outputs[i].arg);
}

Status writeBoundary(JsonWriter& w, const Program& p, bool inputs) {
  const auto& list = inputs ? p.inputs : p.outputs;
  size_t expected = inputs ? p.graph.signature.inputs.size() : p.graph.signature.outputs.size();
  const char* what = inputs ? "inputs" : "outputs";
  if (list.size() != expected)
    return Status::error(std::string("program has ") + std::to_string(list.size()) + " boundary " + what +
                         " but the signature has " + std::to_string(expected));
  w.beginArray();
  for (size_t i = 0; i < list.size(); ++i) {
    std::string name = inputs ? inputName(p.graph, i) : outputName(p.graph, i);
    w.beginObject().key("name").string(name).key("spec");
    SPMD_RETURN_IF_ERROR(writeSpec(w, list[i].spec, p.mesh, std::string(what) + " '" + name + "'"));
    w.key("global_type");
    writeGlobalType(w, list[i].globalType);
    w.endObject();
  }
  w.endArray();
  return Status::ok();
}

void writeSource(JsonWriter& w, const WeightSourceRef& s) {
  w.key("source").beginObject();
  if (s.zeros) {
    w.key("zeros").boolean(true).endObject();
    return;
  }
  w.key("file").string(s.file).key("tensor").string(s.tensor).key("dtype").integer(static_cast<int>(s.dtype));
  w.key("file_bytes").unsignedInteger(s.fileBytes).key("header_xxh3").string(checksumHex(s.headerChecksum));
  w.key("sample_xxh3").string(checksumHex(s.sampleChecksum)).endObject();
}

Status writeWeights(JsonWriter& w, const Program& p) {
  w.beginArray();
  for (const auto& e : p.weights) {
    w.beginObject().key("fqn").string(e.fqn).key("dtype").integer(static_cast<int>(e.dtype));
    w.key("global_shape").integers(e.globalShape).key("local_shape").integers(e.localShape).key("spec");
    SPMD_RETURN_IF_ERROR(writeSpec(w, e.spec, p.mesh, "weight '" + e.fqn + "'"));
    w.key("shards").beginArray();
    for (const auto& s : e.shards) {
      w.beginObject().key("index").integers(s.index);
      w.key("offset").unsignedInteger(s.offset).key("bytes").unsignedInteger(s.bytes);
      w.key("xxh3").string(checksumHex(s.checksum)).endObject();
    }
    w.endArray();
    if (e.source) writeSource(w, *e.source);
    w.endObject();
  }
  w.endArray();
  return Status::ok();
}

// "pipeline": {"axis": "pp", "stages": 2, "microbatch_axis": "mb",
//   "schedule": "1f1b", "places": ["F0", "-", ...], "actions": [["F0", ...], ...]}
// ("virtual_stages": v only when v > 1: interleaved plans.)
void writePipeline(JsonWriter& w, const PipelinePlan& plan) {
  w.key("pipeline").beginObject();
  w.key("axis").string(plan.axis).key("stages").integer(plan.stages);
  if (plan.virtualStages > 1) w.key("virtual_stages").integer(plan.virtualStages);
  w.key("microbatch_axis").string(plan.microbatchAxis).key("schedule").string(plan.schedule);
  w.key("places").beginArray();
  for (const auto& place : plan.places) w.string(placeText(place));
  w.endArray().key("actions").beginArray();
  for (const auto& list : plan.actions) {
    w.beginArray();
    for (const auto& a : list) w.string(actionText(a));
    w.endArray();
  }
  w.endArray().endObject();
}

void writeCollectives(JsonWriter& w, const Program& p) {
  w.beginArray();
  for (const auto& c : p.collectives) {
    w.beginObject().key("node").string(c.node).key("kind").string(c.kind).key("axis").string(c.axis);
    w.key("bytes_per_rank").integer(c.bytesPerRank).key("consumer").string(c.consumer);
    w.key("value").string(c.value).key("from").string(c.from).key("to").string(c.to);
    w.key("source_line").string(c.sourceLine).endObject();
  }
  w.endArray();
}

// The whole document, keys in the order of ProgramJson.h.
Status writeProgramJson(JsonWriter& w, const Program& p) {
  std::set<std::string_view> seen;
  for (const auto& [k, v] : p.provenance)
    if (!seen.insert(k).second) return Status::error("provenance key '" + k + "' appears twice");
  w.beginObject().key("format_version").beginObject();
  w.key("major").integer(kFormatVersion).key("minor").integer(formatMinorFor(p)).endObject();
  w.key("name").string(p.graph.name);
  w.key("mesh").beginObject().key("shape").integers(p.mesh.shape());
  w.key("axes").strings(p.mesh.axisNames()).endObject();
  w.key("inputs");
  SPMD_RETURN_IF_ERROR(writeBoundary(w, p, true));
  w.key("outputs");
  SPMD_RETURN_IF_ERROR(writeBoundary(w, p, false));
  w.key("weights");
  SPMD_RETURN_IF_ERROR(writeWeights(w, p));
  if (!p.weightsRoot.empty()) w.key("weights_root").string(p.weightsRoot);
  w.key("collectives");
  writeCollectives(w, p);
  w.key("provenance").beginObject();
  for (const auto& [k, v] : p.provenance) w.key(k).string(v);
  w.endObject();
  if (p.pipeline) writePipeline(w, *p.pipeline);
  w.key("exported_program");
  SPMD_RETURN_IF_ERROR(serialize::writeExportedProgram(w, p.graph));
  w.endObject();
  return Status::ok();
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
  // Bounded before anything multiplies the sizes or iterates the ranks.
  int64_t ranks = 1;
  for (int64_t s : shape) {
    if (s < 1) break;  // Mesh::create names the axis
    if (s > kMaxRanks / ranks)
      return Status::error("mesh: shape " + formatShape(shape) + " has more than " +
                           std::to_string(kMaxRanks) + " ranks (the most a program may have)");
    ranks *= s;
  }
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
      auto t = serialize::parseTensorMeta(type, "global_type");
      if (!t) return t.status().withContext(where);
      b.globalType = std::move(*t);
    }
    out.push_back(std::move(b));
  }
  return out;
}

Expected<WeightSourceRef> readSource(element e, const std::string& where) {
  WeightSourceRef s;
  bool zeros = false;
  if (e["zeros"].get_bool().get(zeros) == SUCCESS) {
    if (!zeros) return fieldError(where, "zeros", "true");
    s.zeros = true;
    return s;
  }
  SPMD_ASSIGN_OR_RETURN(s.file, readString(e, "file", where));
  SPMD_ASSIGN_OR_RETURN(s.tensor, readString(e, "tensor", where));
  SPMD_ASSIGN_OR_RETURN(int64_t dtype, readInt(e, "dtype", where));
  auto st = ir::scalarTypeFromSchema(dtype);
  if (!st || *st == ir::ScalarType::Unknown)
    return Status::error(where + ": unknown dtype " + std::to_string(dtype));
  s.dtype = *st;
  SPMD_ASSIGN_OR_RETURN(s.fileBytes, readUint(e, "file_bytes", where));
  for (auto [key, out] : {std::pair<const char*, uint64_t*>{"header_xxh3", &s.headerChecksum},
                          {"sample_xxh3", &s.sampleChecksum}}) {
    SPMD_ASSIGN_OR_RETURN(std::string sum, readString(e, key, where));
    if (!parseChecksumHex(sum, *out)) return fieldError(where, key, "16 lowercase hex digits");
  }
  return s;
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
    SPMD_ASSIGN_OR_RETURN(std::string sum, readString(s, "xxh3", sw));
    if (!parseChecksumHex(sum, b.checksum)) return fieldError(sw, "xxh3", "16 lowercase hex digits");
    w.shards.push_back(std::move(b));
  }
  element source;
  if (item["source"].get(source) == SUCCESS) {
    SPMD_ASSIGN_OR_RETURN(w.source, readSource(source, where + ".source"));
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
Expected<std::vector<std::string>> readStrings(element e, std::string_view key, const std::string& where) {
  SPMD_ASSIGN_OR_RETURN(array a, readArray(e, key, where));
  std::vector<std::string> out;
  for (element item : a) {
    std::string_view s;
    if (item.get_string().get(s) != SUCCESS) return fieldError(where, key, "a list of strings");
    out.emplace_back(s);
  }
  return out;
}

Expected<PipelinePlan> readPipeline(element e) {
  PipelinePlan plan;
  const std::string where = "pipeline";
  SPMD_ASSIGN_OR_RETURN(plan.axis, readString(e, "axis", where));
  SPMD_ASSIGN_OR_RETURN(plan.stages, readInt(e, "stages", where));
  if (e["virtual_stages"].error() == SUCCESS) {
    SPMD_ASSIGN_OR_RETURN(plan.virtualStages, readInt(e, "virtual_stages", where));
    if (plan.virtualStages < 1) return fieldError(where, "virtual_stages", "a positive integer");
  }
  SPMD_ASSIGN_OR_RETURN(plan.microbatchAxis, readString(e, "microbatch_axis", where));
  SPMD_ASSIGN_OR_RETURN(plan.schedule, readString(e, "schedule", where));
  SPMD_ASSIGN_OR_RETURN(std::vector<std::string> places, readStrings(e, "places", where));
  for (const auto& text : places) {
    SPMD_ASSIGN_OR_RETURN(PipelinePlace place, parsePlace(text));
    plan.places.push_back(place);
  }
  SPMD_ASSIGN_OR_RETURN(array stages, readArray(e, "actions", where));
  for (element list : stages) {
    plan.actions.emplace_back();
    array items;
    if (list.get_array().get(items) != SUCCESS) return fieldError(where, "actions", "a list of lists");
    for (element item : items) {
      std::string_view s;
      if (item.get_string().get(s) != SUCCESS)
        return fieldError(where, "actions", "a list of lists of strings");
      SPMD_ASSIGN_OR_RETURN(PipelineAction a, parseAction(s));
      plan.actions.back().push_back(a);
    }
  }
  return plan;
}

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
  if (major < 0 || minor < 0 || major > INT32_MAX || minor > INT32_MAX)
    return Status::error("format_version " + std::to_string(major) + "." + std::to_string(minor) +
                         " is out of range");
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
  std::string_view weightsRoot;
  if (root["weights_root"].get_string().get(weightsRoot) == SUCCESS) p.weightsRoot = std::string(weightsRoot);
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
  element pipeline;
  if (root["pipeline"].get(pipeline) == SUCCESS) {
    SPMD_ASSIGN_OR_RETURN(PipelinePlan plan, readPipeline(pipeline));
    p.pipeline = std::move(plan);
  }
  return checkSpecs(p);
}

}  // namespace

Expected<std::string> programToJsonText(const Program& p) {
  std::string text;
  // The graph dominates, at about 800 bytes a node; pages reserved but not
  // written cost nothing.
  text.reserve(4096 + 1024 * p.graph.graph.nodes().size());
  serialize::JsonWriter w(text);
  SPMD_RETURN_IF_ERROR(writeProgramJson(w, p));
  return text;
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
  auto g = serialize::buildProgram(graph, name);
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
