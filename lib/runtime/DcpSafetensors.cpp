// DCP checkpoints in Hugging Face's format (see DcpInternal.h), as
// torch.distributed.checkpoint's HuggingFaceStorageWriter(save_distributed=True)
// writes them:
//
//   ckpt/shard-00001-model-00001-of-00001.safetensors
//     __metadata__: {"DCP_SHARDING_INFO": "{\"model.w\": {\"saved_offsets\": [0, 0]}}", ...}
//     model.w: f32[3, 4]            -> chunk of model.w at (0, 0), sizes (3, 4)
//   ckpt/shard-00002-model-00001-of-00001.safetensors
//     model.w: f32[2, 4] at (3, 0)  -> model.w is f32[5, 4], two chunks
//
// No `.metadata`: the headers say everything, and each chunk is read as the
// raw bytes of its tensor.
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/Safetensors.h"
#include "runtime/DcpInternal.h"

namespace spmd::runtime {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> safetensorsFiles(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec) && e.path().filename().string().ends_with(".safetensors"))
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The saved offsets of each tensor of `file`, from its DCP_SHARDING_INFO.
Expected<std::map<std::string, std::vector<int64_t>>> savedOffsets(const io::SafetensorsFile& file) {
  std::map<std::string, std::vector<int64_t>> out;
  auto it = file.metadata().find("DCP_SHARDING_INFO");
  if (it == file.metadata().end()) return out;
  try {
    json info = json::parse(it->second);  // kept alive: items() refers into it
    for (const auto& [key, entry] : info.items())
      out[key] = entry.at("saved_offsets").get<std::vector<int64_t>>();
  } catch (const std::exception& e) {
    return Status::error(file.path() + ": malformed DCP_SHARDING_INFO in its header: " + e.what());
  }
  return out;
}

// Adds `e` of `file` (named `name` in the folder) to `md` as one chunk.
Status addChunk(DcpMetadata& md, const io::SafetensorsFile& file, const std::string& name,
                const io::SafetensorsEntry& e, const std::vector<int64_t>& offsets) {
  std::string what = file.path() + ": tensor '" + e.name + "'";
  if (offsets.size() != e.shape.size())
    return Status::error(what + ": DCP_SHARDING_INFO gives " + std::to_string(offsets.size()) +
                         " offsets for a tensor of rank " + std::to_string(e.shape.size()));
  DcpTensor& t = md.tensors[e.name];
  if (t.chunks.empty()) {
    t.dtype = e.dtype;
    t.size.assign(e.shape.size(), 0);
  } else if (t.dtype != e.dtype || t.size.size() != e.shape.size()) {
    return Status::error(what + ": another dtype or rank than its other chunks");
  }
  DcpChunk c;
  c.offsets = offsets;
  c.sizes = e.shape;
  c.storage.file = name;
  c.storage.offset = static_cast<const char*>(e.data) - file.headerBytes().data();
  c.storage.length = static_cast<int64_t>(e.bytes);
  c.storage.raw = true;
  for (size_t d = 0; d < offsets.size(); ++d) {
    if (offsets[d] < 0) return Status::error(what + ": a negative saved offset");
    t.size[d] = std::max(t.size[d], offsets[d] + e.shape[d]);
  }
  t.chunks.push_back(std::move(c));
  return Status::ok();
}

int64_t volume(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

}  // namespace

bool isSafetensorsDcp(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir + "/.metadata", ec) || fs::exists(dir + "/index.json", ec) ||
      fs::exists(dir + "/latest", ec))
    return false;
  return !safetensorsFiles(dir).empty();
}

Expected<DcpMetadata> safetensorsDcpMetadata(const std::string& dir) {
  std::vector<std::string> names = safetensorsFiles(dir);
  if (names.empty())
    return Status::error(dir + ": not a DCP checkpoint (no .metadata and no .safetensors files)");
  DcpMetadata md;
  for (const std::string& name : names) {
    SPMD_ASSIGN_OR_RETURN(io::SafetensorsFile file, io::SafetensorsFile::open(dir + "/" + name));
    SPMD_ASSIGN_OR_RETURN(auto offsets, savedOffsets(file));
    for (const io::SafetensorsEntry& e : file.entries()) {
      auto it = offsets.find(e.name);
      std::vector<int64_t> at = it != offsets.end() ? it->second : std::vector<int64_t>(e.shape.size(), 0);
      SPMD_RETURN_IF_ERROR(addChunk(md, file, name, e, at));
    }
  }
  // As DCP's own metadata check: the chunks cover each tensor exactly (no
  // element unsaved, none saved twice: chunks lie inside the extent).
  for (const auto& [key, t] : md.tensors) {
    int64_t covered = 0;
    for (const DcpChunk& c : t.chunks) covered += volume(c.sizes);
    if (covered != volume(t.size))
      return Status::error(dir + "/" + t.chunks.front().storage.file + ": tensor '" + key +
                           "': its chunks hold " + std::to_string(covered) + " elements of its " +
                           std::to_string(volume(t.size)) + " (a shard file is missing or duplicated)");
  }
  return md;
}

}  // namespace spmd::runtime
