// DCP checkpoints: names, checks and loading (see Dcp.h); saving is in
// DcpSave.cpp.
//
//   rank r: its region of weight w (sharding::localChunks)
//           for each chunk of w's key that overlaps it: torch.load the chunk's bytes, copy the overlap
//           every element of the region covered, else an error
#include "runtime/Dcp.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "io/MappedFile.h"
#include "runtime/Checkpoint.h"
#include "runtime/DcpInternal.h"
#include "runtime/TypeMap.h"
#include "support/File.h"
#include "support/FirstLine.h"
#include "support/Strings.h"

namespace spmd::runtime {
namespace {

namespace fs = std::filesystem;

// The chunk files of one DCP folder, mapped on first use.
class ChunkReader {
 public:
  explicit ChunkReader(std::string dir) : dir_(std::move(dir)) {}

  // The bytes of `s`, checked to lie inside its file.
  Expected<std::string_view> bytes(const DcpStorage& s, const std::string& key) {
    std::string path = dir_ + "/" + s.file;
    auto it = files_.find(path);
    if (it == files_.end()) {
      if (!fs::exists(path)) return Status::error(path + ": missing (tensor '" + key + "' is stored in it)");
      SPMD_ASSIGN_OR_RETURN(io::MappedFile f, io::MappedFile::open(path));
      it = files_.emplace(path, std::make_unique<io::MappedFile>(std::move(f))).first;
    }
    const io::MappedFile& f = *it->second;
    if (static_cast<uint64_t>(s.offset) > f.size() || static_cast<uint64_t>(s.length) > f.size() - s.offset)
      return Status::error(path + ": tensor '" + key + "': its bytes [" + std::to_string(s.offset) + ", +" +
                           std::to_string(s.length) + ") lie past the file's end (" +
                           std::to_string(f.size()) + " bytes): the file is truncated");
    return f.view().substr(static_cast<size_t>(s.offset), static_cast<size_t>(s.length));
  }

  // Chunk `c` of tensor `key`, loaded and checked against the metadata.
  Expected<at::Tensor> read(const DcpChunk& c, const DcpTensor& t, const std::string& key) {
    SPMD_ASSIGN_OR_RETURN(std::string_view b, bytes(c.storage, key));
    std::string what = dir_ + "/" + c.storage.file + ": tensor '" + key + "'";
    if (c.storage.raw) return checked(raw(b, c, t), what);
    at::Tensor out;
    try {
      c10::IValue v = torch::jit::pickle_load(std::vector<char>(b.begin(), b.end()));
      if (!v.isTensor()) return Status::error(what + ": a chunk that is not a tensor");
      out = v.toTensor();
    } catch (const std::exception& e) {
      std::string m = e.what();
      return Status::error(what + ": a chunk that does not load (" + firstLine(m) + ")");
    }
    SPMD_ASSIGN_OR_RETURN(c10::ScalarType dtype, toC10ScalarType(t.dtype));
    if (out.scalar_type() != dtype || out.sizes() != c10::IntArrayRef(c.sizes))
      return Status::error(what + ": a chunk of another dtype or shape than .metadata records");
    return checked(out, what);
  }

 private:
  // A safetensors chunk: its raw elements (the header gave dtype and sizes).
  static Expected<at::Tensor> raw(std::string_view b, const DcpChunk& c, const DcpTensor& t) {
    SPMD_ASSIGN_OR_RETURN(c10::ScalarType dtype, toC10ScalarType(t.dtype));
    at::Tensor out = at::empty(c.sizes, at::TensorOptions().dtype(dtype));
    if (static_cast<size_t>(out.nbytes()) != b.size())
      return Status::error("a chunk of another size than its header says");
    if (!b.empty()) std::memcpy(out.data_ptr(), b.data(), b.size());
    return out;
  }

  static Expected<at::Tensor> checked(Expected<at::Tensor> out, const std::string& what) {
    if (!out) return out.status().withContext(what);
    if (out->is_floating_point() && !at::isfinite(*out).all().item<bool>())
      return Status::error(what + " holds NaN or Inf values: refusing to resume from it");
    return out;
  }

  std::string dir_;
  std::map<std::string, std::unique_ptr<io::MappedFile>> files_;
};

// One run of the overlap of a saved chunk and a rank's region in one dim.
struct Run {
  int64_t inChunk, inLocal, size;
};

// Per dim, the runs where chunk `c` meets `region`; empty when they do not meet.
std::vector<std::vector<Run>> overlap(const DcpChunk& c, const std::vector<sharding::Chunk>& region) {
  std::vector<std::vector<Run>> out;
  for (size_t d = 0; d < region.size(); ++d) {
    const sharding::Chunk& r = region[d];
    std::vector<Run> runs;
    for (int64_t b = 0; b < r.blocks; ++b) {
      int64_t lo = r.offset + b * r.blockStride, hi = lo + r.blockSize();
      int64_t s = std::max(lo, c.offsets[d]), e = std::min(hi, c.offsets[d] + c.sizes[d]);
      if (s < e) runs.push_back({s - c.offsets[d], b * r.blockSize() + (s - lo), e - s});
    }
    if (runs.empty()) return {};
    out.push_back(std::move(runs));
  }
  return out;
}

void copyRuns(const at::Tensor& chunk, const at::Tensor& local, const at::Tensor& covered,
              const std::vector<std::vector<Run>>& runs, size_t d) {
  if (d == runs.size()) {
    at::Tensor(local).copy_(chunk);
    at::Tensor(covered).fill_(true);
    return;
  }
  auto dim = static_cast<int64_t>(d);
  for (const Run& r : runs[d])
    copyRuns(chunk.narrow(dim, r.inChunk, r.size), local.narrow(dim, r.inLocal, r.size),
             covered.narrow(dim, r.inLocal, r.size), runs, d + 1);
}

// What errors about `dir`'s metadata name: its .metadata file, or the
// folder itself for one in DCP's Hugging Face format (headers, no file).
std::string metadataName(const std::string& dir) {
  return isSafetensorsDcp(dir) ? dir + " (its safetensors headers)" : dir + "/.metadata";
}

Expected<DcpMetadata> readMetadata(const std::string& dir) {
  std::string path = dir + "/.metadata";
  if (!fs::exists(path)) return safetensorsDcpMetadata(dir);
  SPMD_ASSIGN_OR_RETURN(std::string text, readFile(path));
  return parseDcpMetadata(text, path);
}

// Rank `rank`'s shard of weight `w` from tensor `key`.
Expected<at::Tensor> localShard(ChunkReader& reader, const DcpTensor& t, const std::string& key,
                                const program::WeightEntry& w, const program::Program& p, int64_t rank,
                                const std::string& dir) {
  auto spec = sharding::normalizeSpec(w.spec, static_cast<int64_t>(w.globalShape.size()), p.mesh);
  if (!spec) return spec.status().withContext("weight '" + w.fqn + "'");
  std::vector<sharding::Chunk> region =
      sharding::localChunks(w.globalShape, *spec, p.mesh, p.mesh.coords(rank));
  std::vector<int64_t> sizes;
  sizes.reserve(region.size());
  for (const auto& c : region) sizes.push_back(c.size);
  SPMD_ASSIGN_OR_RETURN(c10::ScalarType dtype, toC10ScalarType(w.dtype));
  at::Tensor local = at::empty(sizes, at::TensorOptions().dtype(dtype));
  at::Tensor covered = at::zeros(sizes, at::TensorOptions().dtype(at::kBool));
  for (const DcpChunk& c : t.chunks) {
    auto runs = overlap(c, region);
    if (runs.empty() && !region.empty()) continue;
    SPMD_ASSIGN_OR_RETURN(at::Tensor chunk, reader.read(c, t, key));
    copyRuns(chunk, local, covered, runs, 0);
  }
  if (!covered.all().item<bool>())
    return Status::error(metadataName(dir) + ": tensor '" + key + "': its chunks leave part of rank " +
                         std::to_string(rank) + "'s shard unsaved");
  for (size_t a = 0; a < spec->placements.size(); ++a)
    if (spec->placements[a].isPartial() && p.mesh.coords(rank)[a] != 0) local.zero_();
  return local;
}

// The step counter from every parameter's "step" key.
Expected<at::Tensor> stepTensor(ChunkReader& reader, const DcpMetadata& md,
                                const std::vector<std::string>& keys, const std::string& dir) {
  at::Tensor first;
  std::string firstKey;
  for (const std::string& key : keys) {
    const DcpTensor& t = md.tensors.at(key);
    if (t.chunks.size() != 1)
      return Status::error(metadataName(dir) + ": tensor '" + key + "' is not one scalar");
    SPMD_ASSIGN_OR_RETURN(at::Tensor v, reader.read(t.chunks[0], t, key));
    if (!first.defined()) {
      first = v, firstKey = key;
    } else if (!at::equal(v, first)) {
      return Status::error(metadataName(dir) + ": tensor '" + key + "' (" + std::to_string(v.item<double>()) +
                           ") and '" + firstKey + "' (" + std::to_string(first.item<double>()) +
                           ") differ: spmdc keeps one optimizer step for all parameters");
    }
  }
  return first;
}

}  // namespace

std::vector<std::string> dcpKeysOf(const std::string& fqn) {
  const std::string optim = "optim.";
  if (fqn.rfind(optim, 0) != 0) return {"model." + fqn, fqn};
  std::string rest = fqn.substr(optim.size());
  return {"optim.state." + rest, "optimizer.state." + rest};
}

Expected<std::vector<DcpMatch>> matchDcpWeights(const DcpMetadata& md, const program::Program& p,
                                                const std::string& dir) {
  std::vector<DcpMatch> out;
  std::vector<std::string> steps;
  for (const auto& w : p.weights) {
    const std::string suffix = ".exp_avg", prefix = "optim.";
    if (w.fqn.rfind(prefix, 0) == 0 && w.fqn.size() > prefix.size() + suffix.size() &&
        w.fqn.compare(w.fqn.size() - suffix.size(), suffix.size(), suffix) == 0) {
      std::string param = w.fqn.substr(prefix.size(), w.fqn.size() - prefix.size() - suffix.size());
      for (const char* root : {"optim.state.", "optimizer.state."})
        if (md.tensors.count(root + param + ".step")) steps.push_back(root + param + ".step");
    }
  }
  for (const auto& w : p.weights) {
    DcpMatch m{&w, {}};
    if (w.fqn == "optim.step") {
      m.keys = steps;
    } else {
      for (const std::string& k : dcpKeysOf(w.fqn))
        if (md.tensors.count(k)) {
          m.keys = {k};
          break;
        }
    }
    if (m.keys.empty())
      return Status::error(metadataName(dir) + ": no tensor for weight '" + w.fqn + "' (looked for '" +
                           (w.fqn == "optim.step" ? "optim.state.<param>.step" : dcpKeysOf(w.fqn)[0]) +
                           "'): a checkpoint of another model or optimizer?");
    for (const std::string& k : m.keys) {
      const DcpTensor& t = md.tensors.at(k);
      std::vector<int64_t> want = w.fqn == "optim.step" ? std::vector<int64_t>{} : w.globalShape;
      if (t.size != want || t.dtype != w.dtype)
        return Status::error(metadataName(dir) + ": tensor '" + k + "' is " + formatShape(t.size) + " " +
                             std::string(ir::scalarTypeName(t.dtype)) + ", but weight '" + w.fqn + "' is " +
                             formatShape(want) + " " + std::string(ir::scalarTypeName(w.dtype)) +
                             (isSafetensorsDcp(dir) && t.dtype == w.dtype
                                  ? " (its files record no global size: is a shard file missing?)"
                                  : ""));
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::optional<DcpFormat> parseDcpFormat(const std::string& name) {
  if (name == "torch") return DcpFormat::Torch;
  if (name == "hf") return DcpFormat::HuggingFace;
  return std::nullopt;
}

bool isDcpCheckpoint(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir + "/.metadata", ec) || isSafetensorsDcp(dir);
}

Expected<std::string> resolveDcpFolder(const std::string& dir) {
  if (isDcpCheckpoint(dir)) return dir;
  std::error_code ec;
  std::optional<std::pair<int64_t, int64_t>> best;
  std::string found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    auto step = stepOfFolder(name);
    if (step && isDcpCheckpoint(e.path().string()) && (!best || *step > *best)) {
      best = step;
      found = e.path().string();
    }
  }
  if (!best)
    return Status::error(dir +
                         ": not a DCP checkpoint folder (no .metadata, and no step-<N> folder holding one; "
                         "spmd-run's own checkpoints take --resume)");
  return found;
}

Status checkDcpCheckpoint(const std::string& dir, const program::Program& program) {
  SPMD_ASSIGN_OR_RETURN(DcpMetadata md, readMetadata(dir));
  SPMD_ASSIGN_OR_RETURN(std::vector<DcpMatch> matches, matchDcpWeights(md, program, dir));
  ChunkReader reader(dir);
  for (const DcpMatch& m : matches)
    for (const std::string& k : m.keys)
      for (const DcpChunk& c : md.tensors.at(k).chunks)
        SPMD_RETURN_IF_ERROR(reader.bytes(c.storage, k).status());
  return Status::ok();
}

Expected<int64_t> loadDcpCheckpoint(const std::string& dir, const program::Program& program, int64_t rank,
                                    TensorMap& weights) {
  SPMD_ASSIGN_OR_RETURN(DcpMetadata md, readMetadata(dir));
  SPMD_ASSIGN_OR_RETURN(std::vector<DcpMatch> matches, matchDcpWeights(md, program, dir));
  ChunkReader reader(dir);
  c10::InferenceMode off(false);
  int64_t step = 0;
  try {
    for (const DcpMatch& m : matches) {
      auto target = weights.find(m.weight->fqn);
      if (target == weights.end()) continue;
      at::Tensor t;
      if (m.weight->fqn == "optim.step") {
        SPMD_ASSIGN_OR_RETURN(t, stepTensor(reader, md, m.keys, dir));
        step = static_cast<int64_t>(t.item<double>());
      } else {
        SPMD_ASSIGN_OR_RETURN(
            t, localShard(reader, md.tensors.at(m.keys[0]), m.keys[0], *m.weight, program, rank, dir));
      }
      if (t.sizes() != target->second.sizes())
        return Status::error(dir + ": weight '" + m.weight->fqn +
                             "': the shard has another shape than this program's");
      target->second.copy_(t);
    }
  } catch (const c10::Error& e) {
    return Status::error(dir + ": cannot load the DCP checkpoint: " + e.what_without_backtrace());
  }
  return step;
}

}  // namespace spmd::runtime
