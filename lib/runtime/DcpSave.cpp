// Saving DCP checkpoints (see Dcp.h).
//
//   rank 0:     removes an old <dir>/.metadata, then says so in the store
//   every rank: <dir>/__<rank>_0.distcp: each chunk it owns, torch.save'd one after another;
//               its chunk records (key, offsets, sizes, byte offset, length) -> store
//   rank 0:     every rank's records -> <dir>/.metadata (atomic), its status -> store
//   every rank: waits for that status
#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/Checkpoint.h"
#include "runtime/Dcp.h"
#include "runtime/DcpInternal.h"
#include "support/File.h"

namespace spmd::runtime {
namespace {

using nlohmann::json;

std::string keyOf(int64_t step, const std::string& what) {
  return "spmd/dcp/" + std::to_string(step) + "/" + what;
}

std::string fileName(int64_t rank) { return "__" + std::to_string(rank) + "_0.distcp"; }

// The chunk file being built: torch.save'd tensors back to back.
struct ChunkFile {
  std::string bytes;
  json records = json::array();

  void add(const std::string& key, const at::Tensor& t, const std::vector<int64_t>& offsets) {
    std::vector<char> b = torch::jit::pickle_save(t.cpu().contiguous().clone());
    records.push_back({{"key", key},
                       {"offsets", offsets},
                       {"sizes", t.sizes().vec()},
                       {"offset", bytes.size()},
                       {"length", b.size()}});
    bytes.append(b.begin(), b.end());
  }
};

// True when `rank` writes its shard of a tensor laid out as `spec`: it
// sits at coordinate 0 of every axis that does not split the tensor.
bool owns(const sharding::ShardingSpec& spec, const std::vector<int64_t>& coords) {
  for (size_t a = 0; a < spec.placements.size(); ++a)
    if (!spec.placements[a].isShard() && coords[a] != 0) return false;
  return true;
}

// Adds every rectangular piece of `local` (the rank's region `region`, whose
// strided dims hold several runs) as its own chunk.
void addBoxes(ChunkFile& file, const std::string& key, const at::Tensor& local,
              const std::vector<sharding::Chunk>& region, size_t d, std::vector<int64_t>& offsets) {
  if (d == region.size()) {
    file.add(key, local, offsets);
    return;
  }
  const sharding::Chunk& c = region[d];
  auto dim = static_cast<int64_t>(d);
  for (int64_t b = 0; b < c.blocks; ++b) {
    offsets.push_back(c.offset + b * c.blockStride);
    addBoxes(file, key, local.narrow(dim, b * c.blockSize(), c.blockSize()), region, d + 1, offsets);
    offsets.pop_back();
  }
}

// This rank's chunks of every weight it owns.
Expected<ChunkFile> buildFile(const program::Program& p, int64_t rank, const TensorMap& weights) {
  ChunkFile file;
  std::vector<int64_t> coords = p.mesh.coords(rank);
  for (const auto& w : p.weights) {
    auto t = weights.find(w.fqn);
    if (t == weights.end())
      return Status::error("rank " + std::to_string(rank) + " holds no weight '" + w.fqn + "'");
    if (w.fqn == "optim.step") {
      if (rank != 0) continue;
      for (const auto& e : p.weights) {
        const std::string suffix = ".exp_avg";
        if (e.fqn.rfind("optim.", 0) == 0 && e.fqn.size() > suffix.size() + 6 &&
            e.fqn.compare(e.fqn.size() - suffix.size(), suffix.size(), suffix) == 0)
          file.add("optim.state." + e.fqn.substr(6, e.fqn.size() - 6 - suffix.size()) + ".step",
                   t->second.reshape({}), {});
      }
      continue;
    }
    auto spec = sharding::normalizeSpec(w.spec, static_cast<int64_t>(w.globalShape.size()), p.mesh);
    if (!spec) return spec.status().withContext("weight '" + w.fqn + "'");
    if (spec->hasPartial())
      return Status::error("weight '" + w.fqn + "' is laid out as a pending reduction " + spec->str() +
                           ", which DCP cannot hold; save it replicated or sharded");
    if (!owns(*spec, coords)) continue;
    if (t->second.is_floating_point() && !at::isfinite(t->second).all().item<bool>())
      return Status::error("weight '" + w.fqn + "' holds NaN or Inf values: not saved");
    std::vector<int64_t> offsets;
    addBoxes(file, dcpKeysOf(w.fqn)[0], t->second,
             sharding::localChunks(w.globalShape, *spec, p.mesh, coords), 0, offsets);
  }
  return file;
}

// Rank 0: the metadata from every rank's records.
Expected<DcpMetadata> gather(const program::Program& p, c10d::Store& store, int64_t step) {
  DcpMetadata md;
  ir::ScalarType stepDtype = ir::ScalarType::Float;
  for (const auto& w : p.weights) {
    if (w.fqn == "optim.step") stepDtype = w.dtype;
    if (w.fqn == "optim.step") continue;
    md.tensors[dcpKeysOf(w.fqn)[0]] = DcpTensor{w.dtype, w.globalShape, {}};
  }
  for (int64_t r = 0; r < p.mesh.numRanks(); ++r) {
    json j = json::parse(storeGetString(store, keyOf(step, "rank/" + std::to_string(r))));
    if (j.contains("error"))
      return Status::error("rank " + std::to_string(r) + ": " + j["error"].get<std::string>());
    for (const json& rec : j["records"]) {
      std::string key = rec["key"].get<std::string>();
      DcpTensor& t = md.tensors[key];
      if (t.dtype == ir::ScalarType::Unknown) t.dtype = stepDtype;  // a per-parameter step
      t.chunks.push_back({rec["offsets"].get<std::vector<int64_t>>(),
                          rec["sizes"].get<std::vector<int64_t>>(),
                          {fileName(r), rec["offset"].get<int64_t>(), rec["length"].get<int64_t>()}});
    }
  }
  return md;
}

template <typename F>
Status guarded(F f) {
  try {
    return f();
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error(what.substr(0, what.find('\n')));
  }
}

}  // namespace

Status saveDcpCheckpoint(const std::string& dir, const program::Program& program, int64_t rank,
                         const TensorMap& weights, int64_t step, c10d::Store& store) {
  namespace fs = std::filesystem;
  int64_t world = program.mesh.numRanks();
  try {
    if (rank == 0) {
      std::error_code ec;
      fs::create_directories(dir, ec);
      fs::remove(dir + "/.metadata", ec);  // the old chunk files are about to change
      storeSetString(store, keyOf(step, "cleared"), "");
    }
    store.wait({keyOf(step, "cleared")});
    Status st = guarded([&]() -> Status {
      fs::create_directories(dir);
      SPMD_ASSIGN_OR_RETURN(ChunkFile file, buildFile(program, rank, weights));
      SPMD_RETURN_IF_ERROR(writeFileAtomic(dir + "/" + fileName(rank), file.bytes));
      storeSetString(store, keyOf(step, "rank/" + std::to_string(rank)),
                     json{{"records", file.records}}.dump());
      return Status::ok();
    });
    if (!st.isOk())
      storeSetString(store, keyOf(step, "rank/" + std::to_string(rank)),
                     json{{"error", st.message()}}.dump());
    if (rank == 0) {
      std::vector<std::string> keys;
      for (int64_t r = 0; r < world; ++r) keys.push_back(keyOf(step, "rank/" + std::to_string(r)));
      store.wait(keys);
      Status done = guarded([&]() -> Status {
        SPMD_ASSIGN_OR_RETURN(DcpMetadata md, gather(program, store, step));
        SPMD_ASSIGN_OR_RETURN(std::string text, formatDcpMetadata(md));
        SPMD_RETURN_IF_ERROR(writeFileAtomic(dir + "/.metadata", text));
        return syncDirectory(dir);
      });
      storeSetString(store, keyOf(step, "done"), done.isOk() ? "" : done.message());
    }
    store.wait({keyOf(step, "done")});
    std::string done = storeGetString(store, keyOf(step, "done"));
    if (!done.empty()) return Status::error(dir + ": DCP checkpoint not saved: " + done);
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error(dir + ": cannot save the DCP checkpoint: " + what.substr(0, what.find('\n')));
  }
  return Status::ok();
}

Status saveDcpStep(const std::string& root, const program::Program& program, int64_t rank,
                   const TensorMap& weights, int64_t step, c10d::Store& store, int keep) {
  namespace fs = std::filesystem;
  std::string name = "step-" + std::to_string(step);
  SPMD_RETURN_IF_ERROR(saveDcpCheckpoint(root + "/" + name, program, rank, weights, step, store));
  if (rank != 0 || keep <= 0) return Status::ok();
  // Every rank has written its file and rank 0 the .metadata: older step
  // folders are no longer needed by anyone.
  std::vector<std::pair<std::pair<int64_t, int64_t>, fs::path>> complete;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    auto s = stepOfFolder(e.path().filename().string());
    if (!s || e.path().filename() == name || !e.is_directory(ec)) continue;
    if (isDcpCheckpoint(e.path().string()))
      complete.emplace_back(*s, e.path());
    else if (s->first < step)
      fs::remove_all(e.path(), ec);  // an older save that never finished
  }
  std::sort(complete.rbegin(), complete.rend());
  for (size_t i = static_cast<size_t>(keep - 1); i < complete.size(); ++i) {
    fs::remove_all(complete[i].second, ec);
    if (ec)
      return Status::error(complete[i].second.string() +
                           ": cannot remove an old checkpoint: " + ec.message());
  }
  return Status::ok();
}

}  // namespace spmd::runtime
