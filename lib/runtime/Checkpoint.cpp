// Sharded checkpoints (see Checkpoint.h).
#include "runtime/Checkpoint.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/File.h"

namespace spmd::runtime {
namespace {

// Copies a rank's local tensor into `global` at the indices `chunks` name,
// one run of each strided dim at a time (from dim `d` on).
void placeShard(const at::Tensor& global, const at::Tensor& local, const std::vector<sharding::Chunk>& chunks,
                size_t d) {
  if (d == chunks.size()) {
    at::Tensor(global).copy_(local);
    return;
  }
  const sharding::Chunk& c = chunks[d];
  auto dim = static_cast<int64_t>(d);
  for (int64_t b = 0; b < c.blocks; ++b)
    placeShard(global.narrow(dim, c.offset + b * c.blockStride, c.blockSize()),
               local.narrow(dim, b * c.blockSize(), c.blockSize()), chunks, d + 1);
}

namespace fs = std::filesystem;

std::string rankFile(const std::string& dir, int64_t rank) {
  return dir + "/rank" + std::to_string(rank) + ".safetensors";
}

// Waits until every rank has added itself to `key`.
void barrier(c10d::Store& store, const std::string& key, int64_t world) {
  if (store.add(key, 1) == world) store.set(key + "/all", std::vector<uint8_t>{1});
  store.wait({key + "/all"});
}

sharding::ShardingSpec parseSpec(const nlohmann::json& j) {
  sharding::ShardingSpec s;
  for (const auto& p : j) s.placements.push_back(*sharding::parsePlacement(p.get<std::string>()));
  return s;
}

}  // namespace

Status saveCheckpoint(const std::string& dir, const program::Program& program, int64_t rank,
                      const TensorMap& weights, int64_t step, c10d::Store& store) {
  std::string partial = dir + ".partial";
  int64_t world = program.mesh.numRanks();
  try {
    if (rank == 0) {
      fs::remove_all(partial);
      fs::create_directories(partial);
    }
    barrier(store, "spmd/ckpt/" + dir + "/begin", world);
    TensorMap cpu;
    for (const auto& [fqn, t] : weights) cpu.emplace(fqn, t.cpu());
    SPMD_RETURN_IF_ERROR(writeTensors(rankFile(partial, rank), cpu));
    barrier(store, "spmd/ckpt/" + dir + "/written", world);
    if (rank == 0) {
      nlohmann::ordered_json index;
      index["format"] = 1;
      index["step"] = step;
      index["mesh"] = {{"shape", program.mesh.shape()}, {"axes", program.mesh.axisNames()}};
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const auto& w : program.weights) {
        std::vector<std::string> spec;
        for (const auto& p : w.spec.placements) spec.push_back(p.str());
        list.push_back({{"fqn", w.fqn},
                        {"spec", spec},
                        {"global_shape", w.globalShape},
                        {"dtype", std::string(ir::scalarTypeName(w.dtype))}});
      }
      index["weights"] = list;
      SPMD_RETURN_IF_ERROR(writeFileAtomic(partial + "/index.json", index.dump(1) + "\n"));
      std::string old = dir + ".old";
      fs::remove_all(old);
      if (fs::exists(dir)) fs::rename(dir, old);
      fs::rename(partial, dir);
      fs::remove_all(old);
    }
    barrier(store, "spmd/ckpt/" + dir + "/done", world);
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error(dir + ": cannot save the checkpoint: " + what.substr(0, what.find('\n')));
  }
  return Status::ok();
}

Expected<int64_t> loadCheckpoint(const std::string& dir, const program::Program& program, int64_t rank,
                                 TensorMap& weights) {
  SPMD_ASSIGN_OR_RETURN(std::string text, readFile(dir + "/index.json"));
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(text);
    if (index.at("mesh").at("shape").get<std::vector<int64_t>>() != program.mesh.shape())
      return Status::error(dir + ": the checkpoint was saved on mesh " + index.at("mesh").at("shape").dump() +
                           ", this program runs on " + program.mesh.str());
  } catch (const std::exception& e) {
    return Status::error(dir +
                         "/index.json: not a checkpoint index: " + std::string(e.what()).substr(0, 200));
  }
  SPMD_ASSIGN_OR_RETURN(TensorMap saved, readTensors(rankFile(dir, rank)));
  c10::InferenceMode off(false);
  for (auto& [fqn, w] : weights) {
    auto it = saved.find(fqn);
    if (it == saved.end()) return Status::error(rankFile(dir, rank) + ": no tensor '" + fqn + "'");
    if (it->second.sizes() != w.sizes())
      return Status::error(rankFile(dir, rank) + ": tensor '" + fqn +
                           "' has another shape than this program's shard");
    w.copy_(it->second);
  }
  return index.value("step", int64_t{0});
}

Status consolidateCheckpoint(const std::string& dir, const std::string& output) {
  SPMD_ASSIGN_OR_RETURN(std::string text, readFile(dir + "/index.json"));
  try {
    auto index = nlohmann::json::parse(text);
    auto mesh = *sharding::Mesh::create(index["mesh"]["shape"].get<std::vector<int64_t>>(),
                                        index["mesh"]["axes"].get<std::vector<std::string>>());
    std::vector<TensorMap> ranks;
    for (int64_t r = 0; r < mesh.numRanks(); ++r) {
      SPMD_ASSIGN_OR_RETURN(TensorMap t, readTensors(rankFile(dir, r)));
      ranks.push_back(std::move(t));
    }
    TensorMap out;
    for (const auto& w : index["weights"]) {
      std::string fqn = w["fqn"].get<std::string>();
      auto shape = w["global_shape"].get<std::vector<int64_t>>();
      sharding::ShardingSpec spec = parseSpec(w["spec"]);
      const at::Tensor& first = ranks[0].at(fqn);
      at::Tensor global = at::empty(shape, first.options());
      for (int64_t r = 0; r < mesh.numRanks(); ++r) {
        placeShard(global, ranks[static_cast<size_t>(r)].at(fqn),
                   sharding::localChunks(shape, spec, mesh, mesh.coords(r)), 0);
      }
      out.emplace(fqn, global);
    }
    return writeTensors(output, out);
  } catch (const std::exception& e) {
    return Status::error(dir + ": cannot consolidate: " + std::string(e.what()).substr(0, 200));
  }
}

}  // namespace spmd::runtime
