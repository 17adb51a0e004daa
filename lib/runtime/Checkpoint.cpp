// Saving sharded checkpoints (see Checkpoint.h); loading is in
// CheckpointLoad.cpp.
//
//   every rank: <dir>/step-N/rank<r>.safetensors (fsynced), its checksums -> store
//   barrier     (a rank that failed says so in the store: every rank then fails)
//   rank 0:     <dir>/step-N/index.json, then <dir>/latest = "step-N" (atomic), prune list -> store
//   barrier;    each rank removes its own files of pruned folders; barrier; rank 0 removes the folders
#include "runtime/Checkpoint.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/File.h"
#include "support/FirstLine.h"

namespace spmd::runtime {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string keyOf(int64_t step, const std::string& what) {
  return "spmd/ckpt/" + std::to_string(step) + "/" + what;
}

// Waits until every rank has added itself to `key`.
void barrier(c10d::Store& store, const std::string& key, int64_t world) {
  if (store.add(key, 1) == world) store.set(key + "/all", std::vector<uint8_t>{1});
  store.wait({key + "/all"});
}

// Rank 0: a fresh folder name for step `step` ("step-N", or "step-N-k" when
// a complete "step-N" exists; an incomplete one, left by a crash, is reused).
std::string chooseFolder(const std::string& dir, int64_t step) {
  std::string base = "step-" + std::to_string(step);
  for (int k = 0;; ++k) {
    std::string name = k == 0 ? base : base + "-" + std::to_string(k);
    if (!fs::exists(dir + "/" + name)) return name;
    if (!fs::exists(dir + "/" + name + "/index.json")) {
      fs::remove_all(dir + "/" + name);
      return name;
    }
  }
}

// This rank's CPU tensors and their checksums; an error for NaN/Inf values.
Expected<TensorMap> cpuShards(const TensorMap& weights, json& sums) {
  TensorMap cpu;
  for (const auto& [fqn, t] : weights) {
    at::Tensor c = t.to(at::kCPU).contiguous();
    if (c.is_floating_point() && !at::isfinite(c).all().item<bool>())
      return Status::error("weight '" + fqn +
                           "' holds NaN or Inf values: not saved (the last checkpoint stays latest)");
    sums[fqn] = shardChecksum(c.data_ptr(), c.nbytes());
    cpu.emplace(fqn, std::move(c));
  }
  return cpu;
}

// Who saves: this process's key in the store (its world rank), the number
// of processes, its file, and the stages of a pipelined run (or null).
struct Saver {
  int64_t key = 0, world = 1;
  std::string file;
  const StageSave* stages = nullptr;
};

// Rank 0: the index from every rank's checksums (in the store); a weight's
// shards are its owning stage's ranks' (all of them without a pipeline).
Expected<CheckpointIndex> buildIndex(const program::Program& p, int64_t step, c10d::Store& store,
                                     const Saver& saver) {
  CheckpointIndex index{step, p.mesh, {}};
  std::vector<json> sums;
  for (int64_t r = 0; r < saver.world; ++r)
    sums.push_back(json::parse(storeGetString(store, keyOf(step, "sums/" + std::to_string(r))))["sums"]);
  int64_t ranks = p.mesh.numRanks();
  for (const auto& w : p.weights) {
    WeightRecord rec{w.fqn, w.spec, w.globalShape, w.dtype, {}};
    auto spec = sharding::normalizeSpec(w.spec, static_cast<int64_t>(w.globalShape.size()), p.mesh);
    if (!spec) return spec.status().withContext("weight '" + w.fqn + "'");
    rec.spec = *spec;
    int64_t stage = -1;
    if (saver.stages) {
      auto owner = saver.stages->owner.find(w.fqn);
      if (owner == saver.stages->owner.end())
        return Status::error("weight '" + w.fqn + "' belongs to no pipeline stage");
      stage = owner->second;
    }
    for (int64_t r = 0; r < ranks; ++r) {
      const json& s = sums[static_cast<size_t>(std::max<int64_t>(stage, 0) * ranks + r)];
      if (!s.contains(w.fqn))
        return Status::error("rank " + std::to_string(r) +
                             (stage < 0 ? "" : " of stage " + std::to_string(stage)) + " saved no tensor '" +
                             w.fqn + "'");
      rec.shards.push_back(
          {r, rankFileName(r, stage), s.at(w.fqn).get<std::string>(), shardRegion(rec, p.mesh, r)});
    }
    index.weights.push_back(std::move(rec));
  }
  return index;
}

// Every rank: the first error any rank reported for this save, or OK.
Status anyRankFailed(c10d::Store& store, int64_t step, int64_t world) {
  for (int64_t r = 0; r < world; ++r) {
    json j = json::parse(storeGetString(store, keyOf(step, "sums/" + std::to_string(r))));
    if (j.contains("error"))
      return Status::error("rank " + std::to_string(r) + ": " + j["error"].get<std::string>());
  }
  return Status::ok();
}

// `f()`, with an exception turned into an error (its first line).
template <typename F>
Status guarded(F f) {
  try {
    return f();
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error(firstLine(what));
  }
}

// Writes this rank's file and publishes its checksums (or its error: the
// other ranks must not wait for a file that will never come).
void writeRankFile(const std::string& folder, const Saver& saver, const TensorMap& weights, int64_t step,
                   c10d::Store& store) {
  json sums = json::object();
  Status st = guarded([&]() -> Status {
    fs::create_directories(folder);  // a node with its own disk
    SPMD_ASSIGN_OR_RETURN(TensorMap cpu, cpuShards(weights, sums));
    SPMD_RETURN_IF_ERROR(writeTensors(folder + "/" + saver.file, cpu));
    return syncDirectory(folder);
  });
  json report = st.isOk() ? json{{"sums", sums}} : json{{"error", st.message()}};
  storeSetString(store, keyOf(step, "sums/" + std::to_string(saver.key)), report.dump());
}

// Rank 0, once every rank file is complete: the index, then `latest`.
Status commit(const std::string& dir, const std::string& name, const program::Program& p, int64_t step,
              c10d::Store& store, int keep, const Saver& saver) {
  SPMD_ASSIGN_OR_RETURN(CheckpointIndex index, buildIndex(p, step, store, saver));
  std::string folder = dir + "/" + name;
  SPMD_RETURN_IF_ERROR(writeFileAtomic(folder + "/index.json", formatCheckpointIndex(index)));
  SPMD_RETURN_IF_ERROR(syncDirectory(folder));
  SPMD_RETURN_IF_ERROR(writeFileAtomic(dir + "/latest", name + "\n"));
  SPMD_RETURN_IF_ERROR(syncDirectory(dir));
  storeSetString(store, keyOf(step, "prune"), json(stepFoldersToPrune(dir, name, keep)).dump());
  return Status::ok();
}

// After `latest` moved: each rank removes its files of the pruned folders,
// then rank 0 the folders (with per-node disks, other nodes' folders go
// when their last file does).
void prune(const std::string& dir, const Saver& saver, int64_t step, c10d::Store& store) {
  json names = json::parse(storeGetString(store, keyOf(step, "prune")));
  std::error_code ec;
  for (const auto& n : names) fs::remove(dir + "/" + n.get<std::string>() + "/" + saver.file, ec);
  barrier(store, keyOf(step, "pruned"), saver.world);
  for (const auto& n : names) {
    std::string folder = dir + "/" + n.get<std::string>();
    if (saver.key == 0) {
      fs::remove(folder + "/index.json", ec);
      fs::remove_all(folder, ec);
    } else {
      fs::remove(folder, ec);  // only when empty
    }
  }
}

}  // namespace

std::optional<std::pair<int64_t, int64_t>> stepOfFolder(const std::string& name) {
  if (name.rfind("step-", 0) != 0) return std::nullopt;
  std::string rest = name.substr(5);
  size_t dash = rest.find('-');
  std::string n = rest.substr(0, dash), k = dash == std::string::npos ? "0" : rest.substr(dash + 1);
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() < 18 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(n) || !digits(k)) return std::nullopt;
  return std::make_pair(std::stoll(n), std::stoll(k));
}

std::vector<std::string> stepFoldersToPrune(const std::string& dir, const std::string& current, int keep,
                                            const std::function<bool(const std::string&)>& isComplete) {
  std::vector<std::string> out;
  if (keep <= 0) return out;
  auto now = stepOfFolder(current);
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::string>> counted;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    auto step = stepOfFolder(name);
    if (!step || name == current || !e.is_directory(ec)) continue;
    if (!isComplete || isComplete(e.path().string()))
      counted.emplace_back(*step, name);
    else if (now && step->first < now->first)
      out.push_back(name);  // an older save that never finished
  }
  std::sort(counted.rbegin(), counted.rend());
  for (size_t i = static_cast<size_t>(keep - 1); i < counted.size(); ++i) out.push_back(counted[i].second);
  return out;
}

Status saveCheckpoint(const std::string& dir, const program::Program& program, int64_t rank,
                      const TensorMap& weights, int64_t step, c10d::Store& store, int keep,
                      const StageSave* stages) {
  int64_t ranks = program.mesh.numRanks();
  Saver saver{rank, ranks, rankFileName(rank), stages};
  TensorMap owned;  // a stage's ranks save the weights it owns
  if (stages) {
    saver = {stages->stage * ranks + rank, stages->stages * ranks, rankFileName(rank, stages->stage), stages};
    for (const auto& [fqn, t] : weights)
      if (auto it = stages->owner.find(fqn); it != stages->owner.end() && it->second == stages->stage)
        owned.emplace(fqn, t);
  }
  const TensorMap& mine = stages ? owned : weights;
  int64_t world = saver.world;
  try {
    if (saver.key == 0) {
      // On failure the others still get a name; writing into it fails on
      // rank 0 too, which every rank then hears through the store.
      std::string name = "step-" + std::to_string(step);
      (void)guarded([&] {
        fs::create_directories(dir);
        name = chooseFolder(dir, step);
        return Status::ok();
      });
      storeSetString(store, keyOf(step, "name"), name);
    }
    std::string name = storeGetString(store, keyOf(step, "name"));
    writeRankFile(dir + "/" + name, saver, mine, step, store);
    barrier(store, keyOf(step, "written"), world);
    Status failed = anyRankFailed(store, step, world);
    if (saver.key == 0 && failed.isOk()) {
      Status st = guarded([&] { return commit(dir, name, program, step, store, keep, saver); });
      storeSetString(store, keyOf(step, "committed"), st.isOk() ? "" : st.message());
    }
    if (!failed.isOk()) return failed.withContext(dir + ": checkpoint not saved");
    std::string committed = storeGetString(store, keyOf(step, "committed"));
    if (!committed.empty()) return Status::error(dir + ": checkpoint not saved: " + committed);
    prune(dir, saver, step, store);
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error(dir + ": cannot save the checkpoint: " + firstLine(what));
  }
  return Status::ok();
}

std::string storeGetString(c10d::Store& store, const std::string& key) {
  std::vector<uint8_t> v = store.get(key);
  return {v.begin(), v.end()};
}

void storeSetString(c10d::Store& store, const std::string& key, const std::string& value) {
  store.set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

Status agreeOnResume(c10d::Store& store, int64_t rank, int64_t world, const Status& mine) {
  std::string text = mine.isOk() ? "" : mine.message();
  try {
    store.set("spmd/resume/" + std::to_string(rank), std::vector<uint8_t>(text.begin(), text.end()));
    for (int64_t r = 0; r < world; ++r) {
      std::vector<uint8_t> v = store.get("spmd/resume/" + std::to_string(r));
      if (!v.empty())
        return Status::error("rank " + std::to_string(r) + ": " + std::string(v.begin(), v.end()));
    }
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error("rank " + std::to_string(rank) +
                         ": waiting for the other ranks to load the checkpoint: " + firstLine(what));
  }
  return Status::ok();
}

}  // namespace spmd::runtime
