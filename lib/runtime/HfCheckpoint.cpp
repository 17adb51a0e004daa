// Hugging Face folders from checkpoints (see HfCheckpoint.h).
//
//   tensors model.embed_tokens.weight (512 MB), model.layers.0.* (400 MB),
//   ..., lm_head.weight (512 MB), --max-shard-size 1GB
//   -> file 1: embed_tokens + layer 0; file 2: layers 1-2; ...; the names
//      in natural order (layers.2 before layers.10), as save_pretrained does.
#include "runtime/HfCheckpoint.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/Checkpoint.h"
#include "runtime/TensorIO.h"
#include "support/File.h"

namespace spmd::runtime {
namespace {

namespace fs = std::filesystem;

// "layers.2" before "layers.10": digit runs compare as numbers.
bool naturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ei = i, ej = j;
      while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
      while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
      std::string na = a.substr(i, ei - i), nb = b.substr(j, ej - j);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ei;
      j = ej;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

Status checkOutDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return Status::error(dir + ": cannot create the folder: " + ec.message());
    return Status::ok();
  }
  if (!fs::is_directory(dir, ec)) return Status::error(dir + ": --hf-output names a file, not a folder");
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.ends_with(".safetensors") || name == "model.safetensors.index.json")
      return Status::error(dir + " already holds " + name +
                           "; remove it or choose another --hf-output folder");
  }
  return Status::ok();
}

Status copyConfig(const std::string& from, const std::string& to) {
  if (!fs::exists(fs::path(from) / "config.json"))
    return Status::error(from + ": no config.json; --hf-config-from names the model's Hugging Face folder");
  for (const char* name : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                           "special_tokens_map.json", "tokenizer.model"}) {
    fs::path src = fs::path(from) / name;
    if (!fs::exists(src)) continue;
    SPMD_ASSIGN_OR_RETURN(std::string text, readFile(src.string()));
    SPMD_RETURN_IF_ERROR(writeFileAtomic((fs::path(to) / name).string(), text));
  }
  return Status::ok();
}

// The tensors to write, in natural name order, grouped into files.
std::vector<std::vector<std::string>> groupIntoFiles(const TensorMap& tensors, int64_t maxBytes) {
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors)
    if (name.rfind("optim.", 0) != 0) names.push_back(name);
  std::sort(names.begin(), names.end(), naturalLess);
  std::vector<std::vector<std::string>> files;
  int64_t size = 0;
  for (const auto& name : names) {
    int64_t bytes = static_cast<int64_t>(tensors.at(name).nbytes());
    if (files.empty() || (size + bytes > maxBytes && size > 0)) {
      files.emplace_back();
      size = 0;
    }
    files.back().push_back(name);
    size += bytes;
  }
  return files;
}

}  // namespace

Status consolidateToHf(const std::string& dir, const HfExportOptions& o) {
  SPMD_RETURN_IF_ERROR(checkOutDir(o.outDir));
  SPMD_ASSIGN_OR_RETURN(TensorMap tensors, consolidatedTensors(dir));
  auto files = groupIntoFiles(tensors, o.maxShardBytes);
  if (files.empty()) return Status::error(dir + ": the checkpoint holds no parameters or buffers");
  nlohmann::ordered_json weightMap = nlohmann::ordered_json::object();
  int64_t total = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, files.size());
    std::string file = files.size() == 1 ? "model.safetensors" : name;
    TensorMap part;
    for (const auto& t : files[i]) {
      part.emplace(t, tensors.at(t));
      weightMap[t] = file;
      total += static_cast<int64_t>(tensors.at(t).nbytes());
    }
    SPMD_RETURN_IF_ERROR(writeTensors((fs::path(o.outDir) / file).string(), part));
  }
  if (files.size() > 1) {
    nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weightMap}};
    SPMD_RETURN_IF_ERROR(writeFileAtomic((fs::path(o.outDir) / "model.safetensors.index.json").string(),
                                         index.dump(2) + "\n"));
  }
  if (!o.configFrom.empty()) SPMD_RETURN_IF_ERROR(copyConfig(o.configFrom, o.outDir));
  return Status::ok();
}

}  // namespace spmd::runtime
