// Saving DCP checkpoints (see Dcp.h).
//
//   rank 0:     removes an old <dir>/.metadata, then says so in the store
//   every rank: <dir>/__<rank>_0.distcp: each chunk it owns, torch.save'd one after another;
//               its chunk records (key, offsets, sizes, byte offset, length) -> store
//   rank 0:     every rank's records -> <dir>/.metadata (atomic), its status -> store
//   every rank: waits for that status
// --dcp-format hf: each rank's shard-<rank + 1>-model-00001-of-00001.safetensors.partial,
// which rank 0 renames once every rank's is written (no .metadata).
// Pipelined runs: a stage's ranks write the weights it owns, numbered after the earlier stages'.
#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/Safetensors.h"
#include "runtime/Checkpoint.h"
#include "runtime/Dcp.h"
#include "runtime/DcpInternal.h"
#include "runtime/TypeMap.h"
#include "support/File.h"
#include "support/FirstLine.h"

namespace spmd::runtime {
namespace {

using nlohmann::json;

std::string keyOf(int64_t step, const std::string& what) {
  return "spmd/dcp/" + std::to_string(step) + "/" + what;
}

std::string fileName(int64_t key, DcpFormat format) {
  if (format == DcpFormat::Torch) return "__" + std::to_string(key) + "_0.distcp";
  std::string n = std::to_string(key + 1);
  return "shard-" + std::string(n.size() < 5 ? 5 - n.size() : 0, '0') + n +
         "-model-00001-of-00001.safetensors";
}

// Rank 0, before a Hugging Face save: an earlier save's shard files (of
// more ranks, or unfinished) would be read as part of this one.
void removeOldShards(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.starts_with("shard-") && name.find("-model-") != std::string::npos &&
        (name.ends_with(".safetensors") || name.ends_with(".safetensors.partial")))
      std::filesystem::remove(e.path(), ec);
  }
}

// The chunk file being built: torch.save'd tensors back to back (Torch), or
// one safetensors entry per key with its offsets (HuggingFace).
struct ChunkFile {
  DcpFormat format = DcpFormat::Torch;
  std::string bytes;
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  json offsets = json::object();
  json records = json::array();

  void add(const std::string& key, const at::Tensor& t, const std::vector<int64_t>& where) {
    at::Tensor c = t.cpu().contiguous().clone();
    json rec = {{"key", key}, {"offsets", where}, {"sizes", t.sizes().vec()}};
    if (format == DcpFormat::Torch) {
      std::vector<char> b = torch::jit::pickle_save(c);
      rec["offset"] = bytes.size();
      rec["length"] = b.size();
      bytes.append(b.begin(), b.end());
    } else {
      bool first = std::all_of(where.begin(), where.end(), [](int64_t o) { return o == 0; });
      if (c.numel() == 0 && !first) return;  // an empty piece: the others cover the tensor
      if (offsets.contains(key))
        throw std::runtime_error(
            "weight '" + key +
            "': this rank holds several blocks of it (a strided shard), "
            "which DCP's Hugging Face format cannot hold; save it with --dcp-format torch");
      offsets[key] = {{"saved_offsets", where}};
      tensors.emplace_back(key, c);
    }
    records.push_back(rec);
  }

  Status write(const std::string& path) const {
    if (format == DcpFormat::Torch) return writeFileAtomic(path, bytes);
    std::vector<io::TensorView> views;
    for (const auto& [key, t] : tensors) {
      auto dtype = fromC10ScalarType(t.scalar_type());
      if (!dtype)
        return Status::error("weight '" + key + "': dtype " + std::string(c10::toString(t.scalar_type())) +
                             " has no safetensors name");
      views.push_back({key, *dtype, t.sizes().vec(), t.data_ptr(), static_cast<uint64_t>(t.nbytes())});
    }
    return io::writeSafetensors(
        path, views, {{"DCP_SHARDING_INFO", offsets.dump()}, {"DCP_VERSION", "1.0"}, {"format", "pt"}});
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

// Who saves: this process's file number and their count (with stages, a
// stage's ranks after the earlier stages'), and whether its stage owns a weight.
struct Writer {
  int64_t rank = 0;  // in the program's mesh
  int64_t key = 0;
  int64_t world = 1;
  const StageSave* stages = nullptr;

  Writer(const program::Program& p, int64_t r, const StageSave* s) : rank(r), key(r), stages(s) {
    world = p.mesh.numRanks();
    if (s) {
      key = s->stage * world + r;
      world *= s->stages;
    }
  }
  bool owns(const std::string& fqn) const {
    if (!stages) return true;
    auto it = stages->owner.find(fqn);
    return it != stages->owner.end() && it->second == stages->stage;
  }
};

// This process's chunks of every weight it owns.
Expected<ChunkFile> buildFile(const program::Program& p, const Writer& me, const TensorMap& weights,
                              DcpFormat format) {
  ChunkFile file;
  file.format = format;
  int64_t rank = me.rank;
  std::vector<int64_t> coords = p.mesh.coords(rank);
  for (const auto& w : p.weights) {
    if (!me.owns(w.fqn)) continue;
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
Expected<DcpMetadata> gather(const program::Program& p, c10d::Store& store, int64_t step, int64_t world) {
  DcpMetadata md;
  ir::ScalarType stepDtype = ir::ScalarType::Float;
  for (const auto& w : p.weights) {
    if (w.fqn == "optim.step") stepDtype = w.dtype;
    if (w.fqn == "optim.step") continue;
    md.tensors[dcpKeysOf(w.fqn)[0]] = DcpTensor{w.dtype, w.globalShape, {}};
  }
  for (int64_t r = 0; r < world; ++r) {
    json j = json::parse(storeGetString(store, keyOf(step, "rank/" + std::to_string(r))));
    if (j.contains("error"))
      return Status::error("rank " + std::to_string(r) + ": " + j["error"].get<std::string>());
    for (const json& rec : j["records"]) {
      std::string key = rec["key"].get<std::string>();
      DcpTensor& t = md.tensors[key];
      if (t.dtype == ir::ScalarType::Unknown) t.dtype = stepDtype;  // a per-parameter step
      t.chunks.push_back(
          {rec["offsets"].get<std::vector<int64_t>>(),
           rec["sizes"].get<std::vector<int64_t>>(),
           {fileName(r, DcpFormat::Torch), rec["offset"].get<int64_t>(), rec["length"].get<int64_t>()}});
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
    return Status::error(firstLine(what));
  }
}

// Rank 0, once every rank reported: the .metadata (Torch), or every rank's
// shard file under its final name (HuggingFace: the headers are the metadata).
Status finish(const std::string& dir, const program::Program& p, c10d::Store& store, int64_t step,
              int64_t world, DcpFormat format) {
  if (format == DcpFormat::Torch) {
    SPMD_ASSIGN_OR_RETURN(DcpMetadata md, gather(p, store, step, world));
    SPMD_ASSIGN_OR_RETURN(std::string text, formatDcpMetadata(md));
    SPMD_RETURN_IF_ERROR(writeFileAtomic(dir + "/.metadata", text));
    return syncDirectory(dir);
  }
  for (int64_t r = 0; r < world; ++r) {
    json j = json::parse(storeGetString(store, keyOf(step, "rank/" + std::to_string(r))));
    if (j.contains("error"))
      return Status::error("rank " + std::to_string(r) + ": " + j["error"].get<std::string>());
  }
  for (int64_t r = 0; r < world; ++r) {
    std::string path = dir + "/" + fileName(r, format);
    std::error_code ec;
    if (!std::filesystem::exists(path + ".partial", ec)) continue;  // a rank that owns no chunk
    std::filesystem::rename(path + ".partial", path, ec);
    if (ec) return Status::error(path + ": cannot rename its finished part: " + ec.message());
  }
  return syncDirectory(dir);
}

}  // namespace

Status saveDcpCheckpoint(const std::string& dir, const program::Program& program, int64_t rank,
                         const TensorMap& weights, int64_t step, c10d::Store& store, const DcpWrite& how) {
  namespace fs = std::filesystem;
  Writer me(program, rank, how.stages);
  int64_t world = me.world;
  try {
    if (me.key == 0) {
      std::error_code ec;
      fs::create_directories(dir, ec);
      fs::remove(dir + "/.metadata", ec);  // the old chunk files are about to change
      if (how.format == DcpFormat::HuggingFace) removeOldShards(dir);
      storeSetString(store, keyOf(step, "cleared"), "");
    }
    store.wait({keyOf(step, "cleared")});
    Status st = guarded([&]() -> Status {
      fs::create_directories(dir);
      SPMD_ASSIGN_OR_RETURN(ChunkFile file, buildFile(program, me, weights, how.format));
      std::string path = dir + "/" + fileName(me.key, how.format);
      if (how.format == DcpFormat::HuggingFace) path += ".partial";
      if (!file.records.empty() || how.format == DcpFormat::Torch) SPMD_RETURN_IF_ERROR(file.write(path));
      storeSetString(store, keyOf(step, "rank/" + std::to_string(me.key)),
                     json{{"records", file.records}}.dump());
      return Status::ok();
    });
    if (!st.isOk())
      storeSetString(store, keyOf(step, "rank/" + std::to_string(me.key)),
                     json{{"error", st.message()}}.dump());
    if (me.key == 0) {
      std::vector<std::string> keys;
      for (int64_t r = 0; r < world; ++r) keys.push_back(keyOf(step, "rank/" + std::to_string(r)));
      store.wait(keys);
      Status done = guarded([&] { return finish(dir, program, store, step, world, how.format); });
      storeSetString(store, keyOf(step, "done"), done.isOk() ? "" : done.message());
    }
    store.wait({keyOf(step, "done")});
    std::string done = storeGetString(store, keyOf(step, "done"));
    if (!done.empty()) return Status::error(dir + ": DCP checkpoint not saved: " + done);
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error(dir + ": cannot save the DCP checkpoint: " + firstLine(what));
  }
  return Status::ok();
}

Status saveDcpStep(const std::string& root, const program::Program& program, int64_t rank,
                   const TensorMap& weights, int64_t step, c10d::Store& store, int keep,
                   const DcpWrite& how) {
  namespace fs = std::filesystem;
  std::string name = "step-" + std::to_string(step);
  SPMD_RETURN_IF_ERROR(saveDcpCheckpoint(root + "/" + name, program, rank, weights, step, store, how));
  if (Writer(program, rank, how.stages).key != 0 || keep <= 0) return Status::ok();
  // Every rank has written its file and rank 0 the .metadata: older step
  // folders are no longer needed by anyone.
  for (const std::string& old : stepFoldersToPrune(root, name, keep, isDcpCheckpoint)) {
    std::error_code ec;
    fs::remove_all(root + "/" + old, ec);
    if (ec) return Status::error(root + "/" + old + ": cannot remove an old checkpoint: " + ec.message());
  }
  return Status::ok();
}

}  // namespace spmd::runtime
