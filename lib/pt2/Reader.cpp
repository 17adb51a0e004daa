// The archive level of the .pt2 reader: finds the model JSON and the
// payload configs inside the zip, builds the IR (serialize::buildProgram),
// reads payloads.
//
//   model/models/model.json                      -> ir::ExportedProgram
//   model/data/weights/model_weights_config.json -> {"fc1.weight": {"path_name": "weight_0", ...}}
//   model/data/weights/weight_0                  -> Storage (shared by tied weights)
#include <simdjson.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <new>
#include <tuple>
#include <unordered_map>

#include "io/Zip.h"
#include "pt2/Archive.h"
#include "pt2/VerifyArchive.h"
#include "serialize/FromExportJson.h"
#include "serialize/JsonUtil.h"
#include "support/Strings.h"

namespace spmd::pt2 {
namespace {

using serialize::clampedInt;
using serialize::getString;
using serialize::optObject;
using serialize::parseTensorMeta;
using serialize::StorageOffsets;

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The archive's top folder and its single model JSON member.
struct Layout {
  std::string top;
  std::string modelJson;
  std::string weightsConfig;
  std::string constantsConfig;
  std::string weightRefs;  ///< extra/spmdc_weights.json, when exported by reference
};

bool startsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool endsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

Expected<Layout> findLayout(const io::ZipArchive& zip) {
  Layout l;
  std::vector<std::string> models;
  for (const std::string& n : zip.names()) {
    size_t slash = n.find('/');
    if (slash == std::string::npos) continue;
    std::string_view rest = std::string_view(n).substr(slash + 1);
    if (startsWith(rest, "models/") && endsWith(rest, ".json") && rest.find('/', 7) == std::string_view::npos)
      models.push_back(n);
    if (startsWith(rest, "data/weights/") && endsWith(rest, "_weights_config.json")) l.weightsConfig = n;
    if (startsWith(rest, "data/constants/") && endsWith(rest, "_constants_config.json"))
      l.constantsConfig = n;
    if (rest == "extra/spmdc_weights.json") l.weightRefs = n;
  }
  if (models.empty())
    return Status::error(
        "no models/<name>.json in the archive; is this a torch.export archive written by torch.export.save?");
  if (models.size() > 1)
    return Status::error("the archive holds several models (" + joined(models) +
                         "); only single-model archives are supported");
  l.modelJson = models[0];
  l.top = models[0].substr(0, models[0].find('/'));
  return l;
}

// `s` with "<path>: " in front, unless its message already starts so (the
// zip layer names the file itself).
Status inFile(const Status& s, const std::string& path) {
  if (s.isOk() || s.message().rfind(path + ": ", 0) == 0) return s;
  return s.withContext(path);
}

// The JSON document of archive member `member`; valid while `parser` lives.
Expected<simdjson::dom::element> parseMember(const io::ZipArchive& zip, const std::string& member,
                                             simdjson::dom::parser& parser) {
  SPMD_ASSIGN_OR_RETURN(std::string text, zip.readString(member));
  simdjson::dom::element root;
  if (auto err = parser.parse(simdjson::padded_string(text)).get(root); err != simdjson::SUCCESS)
    return Status::error(member + " does not parse: " + simdjson::error_message(err));
  return root;
}

Status readPayloadConfig(const io::ZipArchive& zip, const Layout& layout, const std::string& member,
                         std::map<std::string, TensorPayload, std::less<>>& out) {
  if (member.empty()) return Status::ok();
  simdjson::dom::parser parser;
  SPMD_ASSIGN_OR_RETURN(simdjson::dom::element root, parseMember(zip, member, parser));
  simdjson::dom::object config = optObject(root, "config");
  std::string dir = member.substr(0, member.rfind('/') + 1);
  for (auto field : config) {
    TensorPayload t;
    t.fqn = std::string(field.key);
    std::string where = member + ": '" + t.fqn + "'";
    simdjson::dom::element e = field.value;
    auto pathName = getString(e, "path_name");
    if (!pathName) return pathName.status().withContext(where);
    t.member = dir + std::string(*pathName);
    bool b = false;
    if (e["is_param"].get_bool().get(b) == simdjson::SUCCESS) t.isParam = b;
    if (e["use_pickle"].get_bool().get(b) == simdjson::SUCCESS && b)
      return Status::error(
          where +
          " is stored pickled (a tensor subclass or custom object); only plain tensors are supported");
    simdjson::dom::object meta;
    if (e["tensor_meta"].get_object().get(meta) != simdjson::SUCCESS)
      return Status::error(where + " has no tensor_meta");
    auto type = parseTensorMeta(meta, t.fqn);
    if (!type) return type.status().withContext(member);
    t.dtype = type->dtype;
    for (const auto& d : type->sizes) t.sizes.push_back(d.value());
    for (const auto& d : type->strides) t.strides.push_back(d.value());
    t.storageOffset = clampedInt(meta["storage_offset"]["as_int"], 0);
    if (!type->isStatic()) return Status::error(where + " has symbolic sizes; stored tensors must be static");
    if (!zip.contains(t.member)) return Status::error(where + " refers to missing member " + t.member);
    out.emplace(t.fqn, std::move(t));
  }
  return Status::ok();
}

// extra/spmdc_weights.json: which parameters live in a checkpoint folder.
Status readWeightRefs(const io::ZipArchive& zip, const std::string& member, Archive& a) {
  if (member.empty()) return Status::ok();
  simdjson::dom::parser parser;
  SPMD_ASSIGN_OR_RETURN(simdjson::dom::element root, parseMember(zip, member, parser));
  int64_t format = 0;
  if (root["format"].get_int64().get(format) != simdjson::SUCCESS || format != 1)
    return Status::error(member + ": format is not 1; re-export with this spmdc_export");
  auto rootDir = getString(root, "root");
  if (!rootDir || rootDir->empty()) return Status::error(member + ": no \"root\" folder");
  a.weightsRoot = std::string(*rootDir);
  simdjson::dom::object tensors;
  if (root["tensors"].get_object().get(tensors) != simdjson::SUCCESS)
    return Status::error(member + ": no \"tensors\" object");
  for (auto field : tensors) {
    std::string fqn(field.key);
    auto it = a.weights.find(fqn);
    if (it == a.weights.end())
      return Status::error(member + ": '" + fqn + "' is not a parameter or buffer of the program");
    auto file = getString(field.value, "file");
    auto tensor = getString(field.value, "tensor");
    if (!file || !tensor || file->empty() || tensor->empty())
      return Status::error(member + ": '" + fqn + "' needs a \"file\" and a \"tensor\"");
    it->second.external = ExternalTensor{std::string(*file), std::string(*tensor)};
  }
  return Status::ok();
}

// Reads every payload member once; tied tensors share the Storage. Sizes
// were checked against the metadata by verifyPayloads.
Status readPayloads(const io::ZipArchive& zip, std::map<std::string, TensorPayload, std::less<>>& payloads,
                    std::unordered_map<std::string, std::shared_ptr<const Storage>>& byMember) {
  for (auto& [fqn, t] : payloads) {
    if (t.external) continue;  // its bytes are in the checkpoint, not here
    SPMD_ASSIGN_OR_RETURN(uint64_t size, zip.size(t.member));
    auto it = byMember.find(t.member);
    if (it == byMember.end()) {
      auto storage = std::make_shared<Storage>(size);
      SPMD_RETURN_IF_ERROR(zip.readInto(t.member, storage->data(), size));
      it = byMember.emplace(t.member, std::move(storage)).first;
    }
    t.storage = it->second;
  }
  return Status::ok();
}

std::string stem(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = base.rfind('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

// Tied weights: FQNs whose payload is the same member, offset and shape.
void recordTiedNames(Archive& a) {
  std::map<std::tuple<std::string, int64_t, std::vector<int64_t>>, std::vector<std::string>> byBytes;
  for (const auto& [fqn, t] : a.weights)
    if (t.external)  // meta payloads all share one empty member: tie by the checkpoint's tensor
      byBytes[{t.external->file + "\n" + t.external->tensor, 0, t.sizes}].push_back(fqn);
    else
      byBytes[{t.member, t.storageOffset, t.sizes}].push_back(fqn);
  for (const auto& [key, names] : byBytes)
    for (const std::string& n : names)
      for (const std::string& other : names)
        if (other != n) a.program.tiedNames[n].push_back(other);
}

}  // namespace

Storage::Storage(size_t size) : size_(size) {
  size_t rounded = (size + 63) / 64 * 64;
  data_ = static_cast<std::byte*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
  if (!data_) throw std::bad_alloc();
}

Storage::~Storage() { std::free(data_); }

const TensorPayload* Archive::payload(std::string_view fqn) const {
  if (auto it = weights.find(fqn); it != weights.end()) return &it->second;
  if (auto it = constants.find(fqn); it != constants.end()) return &it->second;
  return nullptr;
}

Archive cloneArchive(const Archive& a) {
  return Archive{a.path, a.program.clone(), a.weights, a.constants, a.weightsRoot, a.stats};
}

Expected<Archive> readArchive(const std::string& path, const ReadOptions& options) {
  Archive a;
  a.path = path;
  auto t0 = Clock::now();
  SPMD_ASSIGN_OR_RETURN(std::unique_ptr<io::ZipArchive> zip, io::ZipArchive::open(path));
  auto layout = findLayout(*zip);
  if (!layout) return inFile(layout.status(), path);
  // Padded for simdjson, which then parses the text where it lies (a copy
  // of 8 MB on llama_deep_train otherwise).
  auto text = zip->readString(layout->modelJson, simdjson::SIMDJSON_PADDING);
  if (!text) return inFile(text.status(), path);
  a.stats.openMs = msSince(t0);

  t0 = Clock::now();
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(text->data(), text->size(), /*realloc_if_needed=*/false).get(root);
      err != simdjson::SUCCESS)
    return Status::error(path + ": " + layout->modelJson +
                         " does not parse as JSON: " + simdjson::error_message(err));
  a.stats.parseMs = msSince(t0);

  t0 = Clock::now();
  StorageOffsets offsets;
  auto program = serialize::buildProgram(root, stem(path), &offsets);
  if (!program) return program.status().withContext(path + ": " + layout->modelJson);
  a.program = std::move(*program);
  // Nothing below, nor any later reader of the program, trusts it unverified.
  if (Status st = serialize::verifyProgram(a.program, offsets); !st.isOk()) return inFile(st, path);
  a.stats.buildMs = msSince(t0);

  t0 = Clock::now();
  Status st = readPayloadConfig(*zip, *layout, layout->weightsConfig, a.weights);
  if (st.isOk()) st = readPayloadConfig(*zip, *layout, layout->constantsConfig, a.constants);
  if (st.isOk()) st = readWeightRefs(*zip, layout->weightRefs, a);
  if (st.isOk()) st = verifyPayloads(*zip, a, offsets);
  if (!st.isOk()) return inFile(st, path);
  recordTiedNames(a);
  if (options.loadWeights) {
    std::unordered_map<std::string, std::shared_ptr<const Storage>> byMember;
    st = readPayloads(*zip, a.weights, byMember);
    if (st.isOk()) st = readPayloads(*zip, a.constants, byMember);
    if (!st.isOk()) return inFile(st, path);
  }
  a.stats.weightsMs = msSince(t0);
  return a;
}

}  // namespace spmd::pt2
