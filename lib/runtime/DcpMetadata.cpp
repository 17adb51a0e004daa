// DCP `.metadata`: interpret and verify the unpickled tree, and build one
// (see DcpMetadata.h).
#include "runtime/DcpMetadata.h"

#include <utility>

#include "io/Pickle.h"

namespace spmd::runtime {
namespace {

using io::PyRef;
using io::PyValue;
using Kind = PyValue::Kind;

constexpr const char* kMetaModule = "torch.distributed.checkpoint.metadata";
constexpr const char* kFsModule = "torch.distributed.checkpoint.filesystem";

constexpr std::pair<ir::ScalarType, std::string_view> kDtypes[] = {
    {ir::ScalarType::Float, "float32"}, {ir::ScalarType::Double, "float64"},
    {ir::ScalarType::Half, "float16"},  {ir::ScalarType::BFloat16, "bfloat16"},
    {ir::ScalarType::Long, "int64"},    {ir::ScalarType::Int, "int32"},
    {ir::ScalarType::Short, "int16"},   {ir::ScalarType::Char, "int8"},
    {ir::ScalarType::Byte, "uint8"},    {ir::ScalarType::Bool, "bool"},
};

// The state (BUILD) dict of an object of class `cls`, or an error.
Expected<const PyValue*> stateOf(const PyRef& v, const char* module, const char* cls,
                                 const std::string& what) {
  if (!v || !v->isObject(module, cls) || !v->state || v->state->kind != Kind::Dict)
    return Status::error(what + " is not a " + std::string(module) + "." + cls);
  return v->state.get();
}

Expected<int64_t> intOf(const PyRef& v, const std::string& what) {
  if (!v || v->kind != Kind::Int || v->integer < 0) return Status::error(what + " is not an integer >= 0");
  return v->integer;
}

// A torch.Size (torch.Size((a, b))) or a plain tuple of ints >= 0.
Expected<std::vector<int64_t>> sizeOf(const PyRef& v, const std::string& what) {
  const PyValue* t = v.get();
  if (t && t->isObject("torch", "Size") && t->items.size() == 1) t = t->items[0].get();
  if (!t || t->kind != Kind::Tuple) return Status::error(what + " is not a torch.Size");
  std::vector<int64_t> out;
  for (const PyRef& i : t->items) {
    SPMD_ASSIGN_OR_RETURN(int64_t n, intOf(i, what));
    out.push_back(n);
  }
  return out;
}

Expected<ir::ScalarType> dtypeOf(const PyRef& props, const std::string& what) {
  // TensorProperties pickles its state as (dtype, layout, requires_grad, memory format, pin_memory).
  if (!props || !props->isObject(kMetaModule, "TensorProperties") || !props->state ||
      props->state->kind != Kind::Tuple || props->state->items.empty())
    return Status::error(what + ": \"properties\" is not a TensorProperties");
  const PyValue& d = *props->state->items[0];
  if (d.kind == Kind::Global && d.text == "torch")
    for (const auto& [type, name] : kDtypes)
      if (d.name == name) return type;
  return Status::error(what + ": dtype " + (d.kind == Kind::Global ? d.text + "." + d.name : "?") +
                       " is not one spmd-run reads");
}

Expected<DcpStorage> storageOf(const PyRef& v, const std::string& what) {
  SPMD_ASSIGN_OR_RETURN(const PyValue* s, stateOf(v, kFsModule, "_StorageInfo", what));
  DcpStorage out;
  PyRef path = s->get("relative_path");
  if (!path || path->kind != Kind::Str || path->text.empty() || path->text.find('/') != std::string::npos ||
      path->text == "." || path->text == "..")
    return Status::error(what + ": \"relative_path\" is not a file name inside the checkpoint folder");
  out.file = path->text;
  SPMD_ASSIGN_OR_RETURN(out.offset, intOf(s->get("offset"), what + ": \"offset\""));
  SPMD_ASSIGN_OR_RETURN(out.length, intOf(s->get("length"), what + ": \"length\""));
  PyRef transforms = s->get("transform_descriptors");
  if (transforms &&
      !(transforms->kind == Kind::None ||
        ((transforms->kind == Kind::List || transforms->kind == Kind::Tuple) && transforms->items.empty())))
    return Status::error(what + ": stored with transforms (compression?), which spmd-run does not read");
  return out;
}

// storage_data: (key, chunk offsets) -> storage; bytes items have no offsets.
Expected<std::map<std::pair<std::string, std::vector<int64_t>>, DcpStorage>> storageMap(const PyRef& data) {
  if (!data || data->kind != Kind::Dict) return Status::error("\"storage_data\" is not a dict");
  std::map<std::pair<std::string, std::vector<int64_t>>, DcpStorage> out;
  for (const auto& [k, v] : data->entries) {
    SPMD_ASSIGN_OR_RETURN(const PyValue* index,
                          stateOf(k, kMetaModule, "MetadataIndex", "a storage_data key"));
    PyRef fqn = index->get("fqn");
    if (!fqn || fqn->kind != Kind::Str) return Status::error("a storage_data key has no \"fqn\"");
    std::vector<int64_t> offsets;
    PyRef off = index->get("offset");
    if (off && off->kind != Kind::None) {
      SPMD_ASSIGN_OR_RETURN(offsets, sizeOf(off, "key '" + fqn->text + "': a chunk offset"));
    }
    SPMD_ASSIGN_OR_RETURN(DcpStorage s, storageOf(v, "key '" + fqn->text + "'"));
    out[{fqn->text, offsets}] = std::move(s);
  }
  return out;
}

Expected<DcpChunk> chunkOf(const PyRef& v, const DcpTensor& t, const std::string& what) {
  SPMD_ASSIGN_OR_RETURN(const PyValue* s,
                        stateOf(v, kMetaModule, "ChunkStorageMetadata", what + ": a chunk"));
  DcpChunk c;
  SPMD_ASSIGN_OR_RETURN(c.offsets, sizeOf(s->get("offsets"), what + ": chunk \"offsets\""));
  SPMD_ASSIGN_OR_RETURN(c.sizes, sizeOf(s->get("sizes"), what + ": chunk \"sizes\""));
  if (c.offsets.size() != t.size.size() || c.sizes.size() != t.size.size())
    return Status::error(what + ": a chunk of another rank than the tensor's");
  for (size_t d = 0; d < t.size.size(); ++d)
    if (c.offsets[d] > t.size[d] || c.sizes[d] > t.size[d] - c.offsets[d])
      return Status::error(what + ": a chunk reaches outside the tensor in dim " + std::to_string(d));
  return c;
}

// Volume of a box; false on overflow past 2^62.
bool volume(const std::vector<int64_t>& sizes, int64_t& out) {
  out = 1;
  for (int64_t s : sizes) {
    if (s != 0 && out > (int64_t{1} << 62) / s) return false;
    out *= s;
  }
  return true;
}

Expected<DcpTensor> tensorOf(const PyValue& state, const std::string& what,
                             std::map<std::pair<std::string, std::vector<int64_t>>, DcpStorage>& storage,
                             const std::string& key) {
  DcpTensor t;
  SPMD_ASSIGN_OR_RETURN(t.dtype, dtypeOf(state.get("properties"), what));
  SPMD_ASSIGN_OR_RETURN(t.size, sizeOf(state.get("size"), what + ": \"size\""));
  PyRef chunks = state.get("chunks");
  if (!chunks || chunks->kind != Kind::List) return Status::error(what + ": \"chunks\" is not a list");
  int64_t total = 0, want = 0;
  if (!volume(t.size, want)) return Status::error(what + ": a size too large");
  for (const PyRef& c : chunks->items) {
    SPMD_ASSIGN_OR_RETURN(DcpChunk chunk, chunkOf(c, t, what));
    auto it = storage.find({key, chunk.offsets});
    if (it == storage.end()) return Status::error(what + ": a chunk without a storage_data record");
    chunk.storage = it->second;
    int64_t v = 0;
    if (!volume(chunk.sizes, v) || (total += v) > want)
      return Status::error(what + ": its chunks hold more elements than the tensor (overlapping chunks)");
    t.chunks.push_back(std::move(chunk));
  }
  if (total != want)
    return Status::error(what + ": its chunks hold " + std::to_string(total) + " of its " +
                         std::to_string(want) + " elements");
  return t;
}

Expected<DcpMetadata> parseTree(const PyRef& root) {
  SPMD_ASSIGN_OR_RETURN(const PyValue* md, stateOf(root, kMetaModule, "Metadata", "the pickled object"));
  PyRef sdm = md->get("state_dict_metadata");
  if (!sdm || sdm->kind != Kind::Dict) return Status::error("\"state_dict_metadata\" is not a dict");
  SPMD_ASSIGN_OR_RETURN(auto storage, storageMap(md->get("storage_data")));
  DcpMetadata out;
  for (const auto& [k, v] : sdm->entries) {
    if (!k || k->kind != Kind::Str) return Status::error("a state_dict_metadata key is not a string");
    std::string what = "key '" + k->text + "'";
    if (out.tensors.count(k->text) || out.bytes.count(k->text))
      return Status::error(what + " is listed twice");
    if (v && v->isObject(kMetaModule, "BytesStorageMetadata")) {
      auto it = storage.find({k->text, {}});
      if (it == storage.end()) return Status::error(what + ": a bytes item without a storage_data record");
      out.bytes.emplace(k->text, it->second);
      continue;
    }
    SPMD_ASSIGN_OR_RETURN(const PyValue* state, stateOf(v, kMetaModule, "TensorStorageMetadata", what));
    SPMD_ASSIGN_OR_RETURN(DcpTensor t, tensorOf(*state, what, storage, k->text));
    out.tensors.emplace(k->text, std::move(t));
  }
  return out;
}

PyRef torchSize(const std::vector<int64_t>& dims) {
  std::vector<PyRef> items;
  items.reserve(dims.size());
  for (int64_t d : dims) items.push_back(PyValue::ofInt(d));
  return PyValue::object("torch", "Size", {PyValue::tuple(std::move(items))}, false);
}

PyRef dataclass(const char* module, const char* cls, std::vector<std::pair<PyRef, PyRef>> fields) {
  return PyValue::object(module, cls, {}, true, PyValue::dict(std::move(fields)));
}

PyRef properties(ir::ScalarType dtype) {
  auto layout = PyValue::object("torch.serialization", "_get_layout", {PyValue::str("torch.strided")}, false);
  auto format = PyValue::object(kMetaModule, "_MEM_FORMAT_ENCODING", {PyValue::ofInt(0)}, false);
  auto state = PyValue::tuple({PyValue::global("torch", std::string(torchDtypeName(dtype))), layout,
                               PyValue::ofBool(false), format, PyValue::ofBool(false)});
  return PyValue::object(kMetaModule, "TensorProperties", {}, true, state);
}

}  // namespace

std::string_view torchDtypeName(ir::ScalarType t) {
  for (const auto& [type, name] : kDtypes)
    if (type == t) return name;
  return "";
}

Expected<DcpMetadata> parseDcpMetadata(std::string_view bytes, const std::string& path) {
  auto root = io::readPickle(bytes, path);
  if (!root) return Status::error(root.status().message() + " (is this a DCP checkpoint's .metadata?)");
  auto md = parseTree(*root);
  if (!md) return md.status().withContext(path + ": not a DCP checkpoint's metadata this spmd-run reads");
  return md;
}

Expected<std::string> formatDcpMetadata(const DcpMetadata& md) {
  auto str = [](const std::string& s) { return PyValue::str(s); };
  std::vector<std::pair<PyRef, PyRef>> sdm, storage;
  for (const auto& [key, t] : md.tensors) {
    if (torchDtypeName(t.dtype).empty())
      return Status::error("tensor '" + key + "': dtype " + std::string(ir::scalarTypeName(t.dtype)) +
                           " has no DCP name");
    std::vector<PyRef> chunks;
    for (const DcpChunk& c : t.chunks) {
      chunks.push_back(
          dataclass(kMetaModule, "ChunkStorageMetadata",
                    {{str("offsets"), torchSize(c.offsets)}, {str("sizes"), torchSize(c.sizes)}}));
      PyRef index = dataclass(kMetaModule, "MetadataIndex",
                              {{str("fqn"), str(key)},
                               {str("offset"), torchSize(c.offsets)},
                               {str("index"), PyValue::ofInt(static_cast<int64_t>(chunks.size() - 1))}});
      PyRef info = dataclass(kFsModule, "_StorageInfo",
                             {{str("relative_path"), str(c.storage.file)},
                              {str("offset"), PyValue::ofInt(c.storage.offset)},
                              {str("length"), PyValue::ofInt(c.storage.length)}});
      storage.emplace_back(index, info);
    }
    sdm.emplace_back(str(key), dataclass(kMetaModule, "TensorStorageMetadata",
                                         {{str("properties"), properties(t.dtype)},
                                          {str("size"), torchSize(t.size)},
                                          {str("chunks"), PyValue::list(std::move(chunks))}}));
  }
  PyRef root = dataclass(kMetaModule, "Metadata",
                         {{str("state_dict_metadata"), PyValue::dict(std::move(sdm))},
                          {str("planner_data"), PyValue::none()},
                          {str("storage_data"), PyValue::dict(std::move(storage))},
                          {str("storage_meta"), PyValue::none()},
                          {str("version"), str("1.0.0")}});
  return io::writePickle(*root);
}

}  // namespace spmd::runtime
