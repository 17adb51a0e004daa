// Checkpoint index: parse, verify, format (see CheckpointIndex.h).
#include "runtime/CheckpointIndex.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "support/Checksum.h"
#include "support/File.h"
#include "support/FirstLine.h"

namespace spmd::runtime {
namespace {

using nlohmann::json;

constexpr int64_t kFormat = 2;

// A non-negative integer field of `j`, or an error naming it.
Expected<int64_t> intField(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return Status::error(where + ": no \"" + key + "\"");
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    return Status::error(where + ": \"" + key + "\" must be a non-negative integer, not " + it->dump());
  return it->get<int64_t>();
}

Expected<std::string> stringField(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string())
    return Status::error(where + ": \"" + key + "\" must be a string" +
                         (it == j.end() ? "" : ", not " + it->dump()));
  return it->get<std::string>();
}

// A list of non-negative integers (`positive`: >= 1).
Expected<std::vector<int64_t>> intList(const json& j, const std::string& what, bool positive) {
  if (!j.is_array()) return Status::error(what + " must be a list of integers, not " + j.dump());
  std::vector<int64_t> out;
  for (const json& v : j) {
    if (!v.is_number_integer() || v.get<int64_t>() < (positive ? 1 : 0))
      return Status::error(what + " must hold integers >= " + (positive ? "1" : "0") + ", not " + j.dump());
    out.push_back(v.get<int64_t>());
  }
  return out;
}

Expected<sharding::Mesh> parseMesh(const json& index) {
  auto it = index.find("mesh");
  if (it == index.end() || !it->is_object() || !it->contains("shape") || !it->contains("axes"))
    return Status::error("\"mesh\" must be {\"shape\": [...], \"axes\": [...]}");
  SPMD_ASSIGN_OR_RETURN(std::vector<int64_t> shape, intList(it->at("shape"), "mesh \"shape\"", true));
  const json& axes = it->at("axes");
  std::vector<std::string> names;
  for (const json& a : axes.is_array() ? axes : json::array({nullptr})) {
    if (!a.is_string()) return Status::error("mesh \"axes\" must be a list of names, not " + axes.dump());
    names.push_back(a.get<std::string>());
  }
  auto mesh = sharding::Mesh::create(shape, names);
  if (!mesh) return mesh.status().withContext("\"mesh\"");
  return mesh;
}

Expected<std::vector<sharding::Chunk>> parseRegion(const json& j, size_t rank) {
  if (!j.is_array() || j.size() != rank)
    return Status::error("\"region\" must list one [offset, size] per dim, not " + j.dump());
  std::vector<sharding::Chunk> out;
  for (const json& d : j) {
    auto v = intList(d, "a region dim", false);
    if (!v || (v->size() != 2 && v->size() != 4))
      return Status::error("a region dim must be [offset, size] or [offset, size, runs, stride], not " +
                           d.dump());
    sharding::Chunk c{(*v)[0], (*v)[1]};
    if (v->size() == 4) c = {(*v)[0], (*v)[1], (*v)[2], (*v)[3]};
    out.push_back(c);
  }
  return out;
}

Expected<sharding::ShardingSpec> parseSpec(const json& j, int64_t rank, const sharding::Mesh& mesh,
                                           const std::vector<int64_t>& shape) {
  if (!j.is_array()) return Status::error("\"spec\" must be a list of placements, not " + j.dump());
  sharding::ShardingSpec spec;
  for (const json& p : j) {
    if (!p.is_string()) return Status::error("\"spec\" must be a list of placements, not " + j.dump());
    auto placement = sharding::parsePlacement(p.get<std::string>());
    if (!placement) return placement.status().withContext("\"spec\"");
    spec.placements.push_back(*placement);
  }
  auto normalized = sharding::normalizeSpec(spec, rank, mesh);
  if (!normalized) return normalized.status().withContext("\"spec\"");
  // Plain splits follow torch.chunk at any size; strided runs must divide.
  SPMD_RETURN_IF_ERROR(sharding::checkShardable(shape, *normalized, mesh));
  return normalized;
}

// "rank<rank>-stage<s>.safetensors" for some stage s.
bool isStageFile(const std::string& file, int64_t rank) {
  std::string head = "rank" + std::to_string(rank) + "-stage", tail = ".safetensors";
  if (file.size() <= head.size() + tail.size() || file.rfind(head, 0) != 0 ||
      file.compare(file.size() - tail.size(), tail.size(), tail) != 0)
    return false;
  std::string digits = file.substr(head.size(), file.size() - head.size() - tail.size());
  return digits.size() < 9 && digits.find_first_not_of("0123456789") == std::string::npos;
}

Expected<ShardRecord> parseShard(const json& j, const WeightRecord& w, const sharding::Mesh& mesh,
                                 int64_t rank) {
  std::string where = "shard " + std::to_string(rank);
  if (!j.is_object()) return Status::error(where + " must be an object, not " + j.dump());
  ShardRecord s;
  SPMD_ASSIGN_OR_RETURN(s.rank, intField(j, "rank", where));
  SPMD_ASSIGN_OR_RETURN(s.file, stringField(j, "file", where));
  SPMD_ASSIGN_OR_RETURN(s.checksum, stringField(j, "checksum", where));
  if (s.rank != rank) return Status::error(where + " says \"rank\": " + std::to_string(s.rank));
  if (s.file != rankFileName(rank) && !isStageFile(s.file, rank))
    return Status::error(where + ": \"file\" must be \"" + rankFileName(rank) + "\" (or \"" +
                         rankFileName(rank, 0) + "\" for a pipeline stage), not \"" + s.file + "\"");
  if (s.checksum.size() != 16 || s.checksum.find_first_not_of("0123456789abcdef") != std::string::npos)
    return Status::error(where + ": \"checksum\" must be 16 hex digits, not \"" + s.checksum + "\"");
  if (!j.contains("region")) return Status::error(where + ": no \"region\"");
  auto region = parseRegion(j.at("region"), w.globalShape.size());
  if (!region) return region.status().withContext(where);
  s.region = std::move(*region);
  if (s.region != shardRegion(w, mesh, rank))
    return Status::error(where + ": \"region\" " + j.at("region").dump() + " is not what spec " +
                         w.spec.str() + " gives rank " + std::to_string(rank) + " on this mesh");
  return s;
}

Expected<WeightRecord> parseWeight(const json& j, const sharding::Mesh& mesh) {
  if (!j.is_object() || !j.contains("fqn") || !j.at("fqn").is_string())
    return Status::error("every entry of \"weights\" needs an \"fqn\" string, not " + j.dump().substr(0, 80));
  WeightRecord w;
  w.fqn = j.at("fqn").get<std::string>();
  std::string where = "weight '" + w.fqn + "'";
  if (!j.contains("global_shape")) return Status::error(where + ": no \"global_shape\"");
  auto shape = intList(j.at("global_shape"), "\"global_shape\"", false);
  if (!shape) return shape.status().withContext(where);
  w.globalShape = std::move(*shape);
  SPMD_ASSIGN_OR_RETURN(std::string dtype, stringField(j, "dtype", where));
  auto t = ir::scalarTypeFromName(dtype);
  if (!t || ir::elementSize(*t) == 0) return Status::error(where + ": unknown \"dtype\" \"" + dtype + "\"");
  w.dtype = *t;
  if (!j.contains("spec")) return Status::error(where + ": no \"spec\"");
  auto spec = parseSpec(j.at("spec"), static_cast<int64_t>(w.globalShape.size()), mesh, w.globalShape);
  if (!spec) return spec.status().withContext(where);
  w.spec = std::move(*spec);
  auto shards = j.find("shards");
  if (shards == j.end() || !shards->is_array() || static_cast<int64_t>(shards->size()) != mesh.numRanks())
    return Status::error(where + ": \"shards\" must list one shard per rank (" +
                         std::to_string(mesh.numRanks()) + ")");
  for (int64_t r = 0; r < mesh.numRanks(); ++r) {
    auto s = parseShard((*shards)[static_cast<size_t>(r)], w, mesh, r);
    if (!s) return s.status().withContext(where);
    w.shards.push_back(std::move(*s));
  }
  return w;
}

Expected<CheckpointIndex> parseIndexJson(const json& j) {
  if (!j.is_object()) return Status::error("not a JSON object");
  if (!j.contains("format") || j.at("format") != kFormat)
    return Status::error("\"format\" is " + (j.contains("format") ? j.at("format").dump() : "missing") +
                         ", this spmd-run reads format 2 checkpoints: save it again with this version");
  CheckpointIndex index;
  SPMD_ASSIGN_OR_RETURN(index.step, intField(j, "step", "the index"));
  SPMD_ASSIGN_OR_RETURN(index.mesh, parseMesh(j));
  auto weights = j.find("weights");
  if (weights == j.end() || !weights->is_array() || weights->empty())
    return Status::error("\"weights\" must be a non-empty list");
  std::set<std::string> seen;
  for (const json& e : *weights) {
    SPMD_ASSIGN_OR_RETURN(WeightRecord w, parseWeight(e, index.mesh));
    if (!seen.insert(w.fqn).second) return Status::error("weight '" + w.fqn + "' is listed twice");
    index.weights.push_back(std::move(w));
  }
  return index;
}

}  // namespace

std::string shardChecksum(const void* data, size_t bytes) {
  return checksumHex(checksum(std::span<const std::byte>(static_cast<const std::byte*>(data), bytes)));
}

std::string rankFileName(int64_t rank, int64_t stage) {
  return "rank" + std::to_string(rank) + (stage < 0 ? "" : "-stage" + std::to_string(stage)) + ".safetensors";
}

std::vector<sharding::Chunk> shardRegion(const WeightRecord& w, const sharding::Mesh& mesh, int64_t rank) {
  return sharding::localChunks(w.globalShape, w.spec, mesh, mesh.coords(rank));
}

Expected<CheckpointIndex> parseCheckpointIndex(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error(path + ": not a checkpoint index: " + firstLine(what));
  }
  auto index = parseIndexJson(j);
  if (!index) return index.status().withContext(path);
  return index;
}

std::string formatCheckpointIndex(const CheckpointIndex& index) {
  nlohmann::ordered_json out;
  out["format"] = kFormat;
  out["step"] = index.step;
  out["mesh"] = {{"shape", index.mesh.shape()}, {"axes", index.mesh.axisNames()}};
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const WeightRecord& w : index.weights) {
    std::vector<std::string> spec;
    for (const auto& p : w.spec.placements) spec.push_back(p.str());
    nlohmann::ordered_json shards = nlohmann::ordered_json::array();
    for (const ShardRecord& s : w.shards) {
      nlohmann::ordered_json region = nlohmann::ordered_json::array();
      for (const sharding::Chunk& c : s.region)
        region.push_back(c.blocks == 1 ? std::vector<int64_t>{c.offset, c.size}
                                       : std::vector<int64_t>{c.offset, c.size, c.blocks, c.blockStride});
      shards.push_back({{"rank", s.rank}, {"file", s.file}, {"checksum", s.checksum}, {"region", region}});
    }
    list.push_back({{"fqn", w.fqn},
                    {"spec", spec},
                    {"global_shape", w.globalShape},
                    {"dtype", std::string(ir::scalarTypeName(w.dtype))},
                    {"shards", shards}});
  }
  out["weights"] = list;
  return out.dump(1) + "\n";
}

Expected<std::string> resolveCheckpoint(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir + "/index.json", ec)) return dir;
  if (!fs::exists(dir + "/latest", ec))
    return Status::error(dir + ": not a checkpoint: it has neither a 'latest' file nor an index.json");
  SPMD_ASSIGN_OR_RETURN(std::string name, readFile(dir + "/latest"));
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    return Status::error(dir + "/latest: names no step folder (it should hold e.g. \"step-5\")");
  if (!fs::exists(dir + "/" + name + "/index.json", ec))
    return Status::error(dir + "/latest: names '" + name + "', which has no index.json");
  return dir + "/" + name;
}

Expected<CheckpointIndex> readCheckpointIndex(const std::string& dir, std::string* stepDir) {
  SPMD_ASSIGN_OR_RETURN(std::string folder, resolveCheckpoint(dir));
  SPMD_ASSIGN_OR_RETURN(std::string text, readFile(folder + "/index.json"));
  if (stepDir) *stepDir = folder;
  return parseCheckpointIndex(text, folder + "/index.json");
}

}  // namespace spmd::runtime
