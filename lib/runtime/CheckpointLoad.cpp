// Loading and consolidating sharded checkpoints (see Checkpoint.h).
//
//   same mesh and layout: rank r reads its own rank file, shard by shard
//   otherwise (resharding): per weight, every saved shard is placed into the
//   global tensor (as consolidation does), and this rank's chunks are cut out
// Every shard read is checked against the index (dtype, shape, checksum)
// and for NaN/Inf before anything uses it.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "io/Safetensors.h"
#include "runtime/Checkpoint.h"
#include "runtime/Dcp.h"
#include "runtime/TypeMap.h"

namespace spmd::runtime {
namespace {

// Copies between a global tensor and a rank's local tensor at the indices
// `chunks` name, one run of each strided dim at a time (from dim `d` on):
// local -> global when `place`, global -> local otherwise.
void copyRegion(const at::Tensor& global, const at::Tensor& local, const std::vector<sharding::Chunk>& chunks,
                size_t d, bool place) {
  if (d == chunks.size()) {
    if (place)
      at::Tensor(global).copy_(local);
    else
      at::Tensor(local).copy_(global);
    return;
  }
  const sharding::Chunk& c = chunks[d];
  auto dim = static_cast<int64_t>(d);
  for (int64_t b = 0; b < c.blocks; ++b)
    copyRegion(global.narrow(dim, c.offset + b * c.blockStride, c.blockSize()),
               local.narrow(dim, b * c.blockSize(), c.blockSize()), chunks, d + 1, place);
}

std::vector<int64_t> sizesOf(const std::vector<sharding::Chunk>& region) {
  std::vector<int64_t> out;
  out.reserve(region.size());
  for (const auto& c : region) out.push_back(c.size);
  return out;
}

// The rank files of one step folder, opened (mapped) on first use; every
// shard handed out was checked against the index.
class ShardReader {
 public:
  explicit ShardReader(std::string folder) : folder_(std::move(folder)) {}

  // Rank `rank`'s entry for `w`, checked against the index's dtype and
  // region without reading its bytes.
  Expected<const io::SafetensorsEntry*> entry(const WeightRecord& w, int64_t rank) {
    const ShardRecord& s = w.shards[static_cast<size_t>(rank)];
    std::string path = folder_ + "/" + s.file;
    SPMD_ASSIGN_OR_RETURN(const io::SafetensorsFile* file, open(path));
    const io::SafetensorsEntry* e = file->find(w.fqn);
    if (!e) return Status::error(path + ": no tensor '" + w.fqn + "', which the index lists");
    if (e->dtype != w.dtype || e->shape != sizesOf(s.region))
      return Status::error(path + ": tensor '" + w.fqn + "' is not the shard the index describes (dtype " +
                           std::string(ir::scalarTypeName(e->dtype)) + ", another shape than its region)");
    return e;
  }

  // Rank `rank`'s shard of `w` as a fresh CPU tensor.
  Expected<at::Tensor> read(const WeightRecord& w, int64_t rank) {
    const ShardRecord& s = w.shards[static_cast<size_t>(rank)];
    std::string what = folder_ + "/" + s.file + ": tensor '" + w.fqn + "'";
    SPMD_ASSIGN_OR_RETURN(const io::SafetensorsEntry* e, entry(w, rank));
    if (shardChecksum(e->data, e->bytes) != s.checksum)
      return Status::error(what + ": checksum mismatch: the file is damaged or is another rank's");
    SPMD_ASSIGN_OR_RETURN(c10::ScalarType dtype, toC10ScalarType(w.dtype));
    at::Tensor t = at::empty(e->shape, at::TensorOptions().dtype(dtype));
    if (e->bytes > 0) std::memcpy(t.data_ptr(), e->data, e->bytes);
    if (t.is_floating_point() && !at::isfinite(t).all().item<bool>())
      return Status::error(what + " holds NaN or Inf values: refusing to resume from it");
    return t;
  }

  // Errors when a file read holds a tensor the index does not list (an
  // index cut short).
  Status checkAllListed(const CheckpointIndex& index) const {
    std::set<std::string, std::less<>> listed;
    for (const auto& w : index.weights) listed.insert(w.fqn);
    for (const auto& [path, file] : files_)
      for (const std::string& name : file->names())
        if (!listed.count(name))
          return Status::error(path + " holds tensor '" + name +
                               "', which the index does not list: the index is incomplete");
    return Status::ok();
  }

 private:
  Expected<const io::SafetensorsFile*> open(const std::string& path) {
    auto it = files_.find(path);
    if (it != files_.end()) return it->second.get();
    if (!std::filesystem::exists(path))
      return Status::error(
          path +
          ": missing: every rank file must be reachable from each worker; with per-node "
          "disks, copy the step folder's rank files to every node or use a shared filesystem");
    SPMD_ASSIGN_OR_RETURN(io::SafetensorsFile f, io::SafetensorsFile::open(path));
    auto owned = std::make_unique<io::SafetensorsFile>(std::move(f));
    return files_.emplace(path, std::move(owned)).first->second.get();
  }

  std::string folder_;
  std::map<std::string, std::unique_ptr<io::SafetensorsFile>> files_;
};

// The global tensor of `w`, assembled from every rank's shard.
Expected<at::Tensor> assemble(ShardReader& reader, const WeightRecord& w, const sharding::Mesh& mesh) {
  if (w.spec.hasPartial())
    return Status::error("weight '" + w.fqn + "' was saved as a pending reduction " + w.spec.str() +
                         ", which cannot be reassembled; save it replicated or sharded");
  SPMD_ASSIGN_OR_RETURN(c10::ScalarType dtype, toC10ScalarType(w.dtype));
  at::Tensor global = at::empty(w.globalShape, at::TensorOptions().dtype(dtype));
  for (int64_t r = 0; r < mesh.numRanks(); ++r) {
    SPMD_ASSIGN_OR_RETURN(at::Tensor shard, reader.read(w, r));
    copyRegion(global, shard, w.shards[static_cast<size_t>(r)].region, 0, true);
  }
  return global;
}

// Errors when the checkpoint and the program disagree on the weights.
Status checkWeights(const CheckpointIndex& index, const program::Program& p, const std::string& where) {
  std::map<std::string, const WeightRecord*> saved;
  for (const auto& w : index.weights) saved.emplace(w.fqn, &w);
  for (const auto& w : p.weights) {
    auto it = saved.find(w.fqn);
    if (it == saved.end())
      return Status::error(where + ": weight '" + w.fqn + "' of this program is not in the checkpoint");
    if (it->second->globalShape != w.globalShape || it->second->dtype != w.dtype)
      return Status::error(where + ": weight '" + w.fqn + "' is saved with another shape or dtype than " +
                           "this program's");
    saved.erase(it);
  }
  if (!saved.empty())
    return Status::error(where + ": weight '" + saved.begin()->first +
                         "' of the checkpoint is not in this program (another model or optimizer?)");
  return Status::ok();
}

// This rank's shard of `w` laid out as `entry` on `p`'s mesh.
Expected<at::Tensor> localShard(ShardReader& reader, const CheckpointIndex& index, const WeightRecord& w,
                                const program::WeightEntry& entry, const program::Program& p, int64_t rank) {
  auto spec = sharding::normalizeSpec(entry.spec, static_cast<int64_t>(entry.globalShape.size()), p.mesh);
  if (!spec) return spec.status().withContext("weight '" + entry.fqn + "'");
  if (index.mesh == p.mesh && *spec == w.spec) return reader.read(w, rank);
  SPMD_ASSIGN_OR_RETURN(at::Tensor global, assemble(reader, w, index.mesh));
  std::vector<sharding::Chunk> chunks =
      sharding::localChunks(entry.globalShape, *spec, p.mesh, p.mesh.coords(rank));
  at::Tensor local = at::empty(sizesOf(chunks), global.options());
  copyRegion(global, local, chunks, 0, false);
  return local;
}

}  // namespace

Status checkCheckpoint(const std::string& dir, const program::Program& program) {
  if (isDcpCheckpoint(dir)) return checkDcpCheckpoint(dir, program);
  std::string folder;
  SPMD_ASSIGN_OR_RETURN(CheckpointIndex index, readCheckpointIndex(dir, &folder));
  SPMD_RETURN_IF_ERROR(checkWeights(index, program, folder));
  // Every rank file is there and lists each shard the index names (the
  // headers only: the checksums are the workers' to check).
  ShardReader reader(folder);
  for (const WeightRecord& w : index.weights)
    for (int64_t r = 0; r < index.mesh.numRanks(); ++r) SPMD_RETURN_IF_ERROR(reader.entry(w, r).status());
  return reader.checkAllListed(index);
}

Expected<int64_t> loadCheckpoint(const std::string& dir, const program::Program& program, int64_t rank,
                                 TensorMap& weights) {
  if (isDcpCheckpoint(dir)) return loadDcpCheckpoint(dir, program, rank, weights);
  std::string folder;
  SPMD_ASSIGN_OR_RETURN(CheckpointIndex index, readCheckpointIndex(dir, &folder));
  SPMD_RETURN_IF_ERROR(checkWeights(index, program, folder));
  std::map<std::string, const WeightRecord*> saved;
  for (const auto& w : index.weights) saved.emplace(w.fqn, &w);
  ShardReader reader(folder);
  c10::InferenceMode off(false);
  try {
    for (const auto& entry : program.weights) {
      auto target = weights.find(entry.fqn);
      if (target == weights.end()) continue;
      SPMD_ASSIGN_OR_RETURN(at::Tensor t,
                            localShard(reader, index, *saved.at(entry.fqn), entry, program, rank));
      if (t.sizes() != target->second.sizes())
        return Status::error(folder + ": weight '" + entry.fqn + "': the shard has another shape than " +
                             "this program's");
      target->second.copy_(t);
    }
    SPMD_RETURN_IF_ERROR(reader.checkAllListed(index));
  } catch (const c10::Error& e) {
    return Status::error(folder + ": cannot load the checkpoint: " + e.what_without_backtrace());
  }
  return index.step;
}

Expected<TensorMap> consolidatedTensors(const std::string& dir) {
  std::string folder;
  SPMD_ASSIGN_OR_RETURN(CheckpointIndex index, readCheckpointIndex(dir, &folder));
  ShardReader reader(folder);
  TensorMap out;
  try {
    for (const auto& w : index.weights) {
      SPMD_ASSIGN_OR_RETURN(at::Tensor global, assemble(reader, w, index.mesh));
      out.emplace(w.fqn, std::move(global));
    }
    SPMD_RETURN_IF_ERROR(reader.checkAllListed(index));
  } catch (const c10::Error& e) {
    return Status::error(folder + ": cannot consolidate: " + e.what_without_backtrace());
  }
  return out;
}

Status consolidateCheckpoint(const std::string& dir, const std::string& output) {
  if (output.empty()) return Status::error(dir + ": --consolidate needs --output <file.safetensors>");
  SPMD_ASSIGN_OR_RETURN(TensorMap out, consolidatedTensors(dir));
  return writeTensors(output, out);
}

}  // namespace spmd::runtime
