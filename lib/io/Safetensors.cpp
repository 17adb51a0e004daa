// Safetensors reading and writing.
//
//   writeSafetensors("t.safetensors", {{"b", ScalarType::Long, {2}, longs, 16},
//                                      {"a", ScalarType::Float, {}, &f, 4}});
//   // t.safetensors: [u64 N]
//   //   {"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},
//   //    "b":{"dtype":"I64","shape":[2],"data_offsets":[4,20]}}   + spaces to N % 8 == 0
//   //   [4 bytes of a][16 bytes of b]
//
// The reader checks every header field against the file before handing out a
// pointer, so a corrupt file is an error, never an out-of-bounds read.
#include "io/Safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "support/File.h"
#include "support/Strings.h"

namespace spmd::io {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

constexpr uint64_t kLengthBytes = 8;
/// The safetensors reference reader's own limit on the header.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

/// numel(shape) * elementSize; nullopt on overflow or negative sizes.
std::optional<uint64_t> byteSize(ir::ScalarType dtype, const std::vector<int64_t>& shape) {
  unsigned __int128 total = static_cast<uint64_t>(ir::elementSize(dtype));
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    total *= static_cast<uint64_t>(d);
    if (total > UINT64_MAX) return std::nullopt;
  }
  return static_cast<uint64_t>(total);
}

/// Validates one header entry against a data section of `dataSize` bytes at `base`.
Expected<SafetensorsEntry> parseEntry(const std::string& where, const std::string& name, const Json& value,
                                      const uint8_t* base, uint64_t dataSize) {
  const std::string at = where + ": tensor " + name;
  if (!value.is_object()) return Status::error(at + ": entry is not a JSON object");
  SafetensorsEntry e;
  e.name = name;
  auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string())
    return Status::error(at + ": missing or non-string \"dtype\"");
  const std::string& dtypeName = dtype->get_ref<const std::string&>();
  auto parsed = ir::scalarTypeFromSafetensorsName(dtypeName);
  if (!parsed || ir::elementSize(*parsed) <= 0)
    return Status::error(at + ": unknown dtype \"" + dtypeName + "\"");
  e.dtype = *parsed;

  auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array())
    return Status::error(at + ": missing or non-list \"shape\"");
  for (const Json& d : *shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return Status::error(at + ": \"shape\" must hold non-negative integers");
    e.shape.push_back(d.get<int64_t>());
  }

  auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    return Status::error(at + ": \"data_offsets\" must be two non-negative integers");
  uint64_t begin = (*offsets)[0].get<uint64_t>();
  uint64_t end = (*offsets)[1].get<uint64_t>();
  std::string span = "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
  if (begin > end || end > dataSize)
    return Status::error(at + ": " + span + " out of range (data section has " + std::to_string(dataSize) +
                         " bytes)");
  auto expected = byteSize(e.dtype, e.shape);
  if (!expected || *expected != end - begin)
    return Status::error(at + ": " + span + " hold " + std::to_string(end - begin) + " bytes, but " +
                         dtypeName + " " + formatShape(e.shape) + " needs " +
                         (expected ? std::to_string(*expected) : std::string("too many")));
  e.data = base + begin;
  e.bytes = end - begin;
  return e;
}

/// Errors when two tensors' bytes overlap; `base` is the data section.
Status checkDisjoint(const std::string& where, const std::vector<SafetensorsEntry>& entries,
                     const uint8_t* base) {
  std::vector<const SafetensorsEntry*> byOffset;
  for (const SafetensorsEntry& e : entries)
    if (e.bytes > 0) byOffset.push_back(&e);
  std::sort(byOffset.begin(), byOffset.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) { return a->data < b->data; });
  auto span = [&](const SafetensorsEntry* e) {
    uint64_t begin = static_cast<uint64_t>(static_cast<const uint8_t*>(e->data) - base);
    return "[" + std::to_string(begin) + ", " + std::to_string(begin + e->bytes) + "]";
  };
  for (size_t i = 1; i < byOffset.size(); ++i) {
    const SafetensorsEntry* a = byOffset[i - 1];
    const SafetensorsEntry* b = byOffset[i];
    if (static_cast<const uint8_t*>(a->data) + a->bytes > static_cast<const uint8_t*>(b->data))
      return Status::error(where + ": tensors " + a->name + " and " + b->name + " overlap (data_offsets " +
                           span(a) + " and " + span(b) + "); every tensor needs bytes of its own");
  }
  return Status::ok();
}

Status parseMetadata(const std::string& where, const Json& value, std::map<std::string, std::string>& out) {
  if (!value.is_object()) return Status::error(where + ": \"__metadata__\" is not a JSON object");
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!it.value().is_string())
      return Status::error(where + ": \"__metadata__\" value of \"" + it.key() + "\" is not a string");
    out[it.key()] = it.value().get<std::string>();
  }
  return Status::ok();
}

}  // namespace

Expected<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  SPMD_ASSIGN_OR_RETURN(f.file_, MappedFile::open(path));
  const uint64_t size = f.file_.size();
  if (size < kLengthBytes)
    return Status::error(path + ": file has " + std::to_string(size) +
                         " bytes, too short for the 8-byte header length");
  const uint8_t* p = f.file_.data();
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i) headerLen = (headerLen << 8) | p[i];
  if (headerLen > size - kLengthBytes)
    return Status::error(path + ": header length " + std::to_string(headerLen) + " exceeds the file (" +
                         std::to_string(size - kLengthBytes) + " bytes follow the length)");
  if (headerLen > kMaxHeaderBytes)
    return Status::error(path + ": header length " + std::to_string(headerLen) + " is more than " +
                         std::to_string(kMaxHeaderBytes) + " bytes; the file is damaged or not safetensors");
  Json header;
  try {
    const char* text = reinterpret_cast<const char*>(p + kLengthBytes);
    header = Json::parse(text, text + headerLen);
  } catch (const std::exception& e) {
    return Status::error(path + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) return Status::error(path + ": header is not a JSON object");

  f.headerEnd_ = kLengthBytes + headerLen;
  const uint8_t* base = p + kLengthBytes + headerLen;
  const uint64_t dataSize = size - kLengthBytes - headerLen;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == kMetadataKey) {
      SPMD_RETURN_IF_ERROR(parseMetadata(path, it.value(), f.metadata_));
      continue;
    }
    SPMD_ASSIGN_OR_RETURN(SafetensorsEntry e, parseEntry(path, it.key(), it.value(), base, dataSize));
    f.entries_.push_back(std::move(e));
  }
  SPMD_RETURN_IF_ERROR(checkDisjoint(path, f.entries_, base));
  std::sort(f.entries_.begin(), f.entries_.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.name < b.name; });
  for (const SafetensorsEntry& e : f.entries_) f.names_.push_back(e.name);
  return f;
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const SafetensorsEntry& e, std::string_view n) { return e.name < n; });
  return it != entries_.end() && it->name == name ? &*it : nullptr;
}

// ---------------------------------------------------------------------------
// Writing

namespace {

Status checkTensor(const std::string& path, const TensorView& t) {
  const std::string at = path + ": tensor " + t.name;
  if (t.name == kMetadataKey) return Status::error(at + ": the name is reserved");
  std::string_view dtypeName = ir::scalarTypeSafetensorsName(t.dtype);
  if (dtypeName.empty() || ir::elementSize(t.dtype) <= 0)
    return Status::error(at + ": dtype " + std::string(ir::scalarTypeName(t.dtype)) +
                         " has no safetensors equivalent");
  auto expected = byteSize(t.dtype, t.shape);
  if (!expected) return Status::error(at + ": shape " + formatShape(t.shape) + " is negative or too large");
  if (*expected != t.bytes)
    return Status::error(at + ": has " + std::to_string(t.bytes) + " bytes, but " + std::string(dtypeName) +
                         " " + formatShape(t.shape) + " needs " + std::to_string(*expected));
  if (t.data == nullptr && t.bytes > 0) return Status::error(at + ": data is null");
  return Status::ok();
}

/// The padded header for `order` (indices into `tensors`, sorted by name).
Expected<std::string> buildHeader(const std::string& path, const std::vector<TensorView>& tensors,
                                  const std::vector<size_t>& order,
                                  const std::map<std::string, std::string>& metadata) {
  try {
    OrderedJson header = OrderedJson::object();
    if (!metadata.empty()) header[kMetadataKey] = metadata;
    uint64_t offset = 0;
    for (size_t i : order) {
      const TensorView& t = tensors[i];
      header[t.name] = {{"dtype", std::string(ir::scalarTypeSafetensorsName(t.dtype))},
                        {"shape", t.shape},
                        {"data_offsets", {offset, offset + t.bytes}}};
      offset += t.bytes;
    }
    std::string text = header.dump();
    text.append((kLengthBytes - text.size() % kLengthBytes) % kLengthBytes, ' ');
    return text;
  } catch (const std::exception& e) {
    return Status::error(path + ": cannot build the header: " + e.what());
  }
}

}  // namespace

Status writeSafetensors(const std::string& path, const std::vector<TensorView>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors[a].name < tensors[b].name; });
  for (size_t k = 0; k < order.size(); ++k) {
    SPMD_RETURN_IF_ERROR(checkTensor(path, tensors[order[k]]));
    if (k > 0 && tensors[order[k]].name == tensors[order[k - 1]].name)
      return Status::error(path + ": tensor " + tensors[order[k]].name + " appears more than once");
  }
  SPMD_ASSIGN_OR_RETURN(std::string header, buildHeader(path, tensors, order, metadata));

  uint8_t length[kLengthBytes];
  for (uint64_t i = 0, n = header.size(); i < kLengthBytes; ++i, n >>= 8) length[i] = n & 0xff;
  AtomicFile file(path);
  Status st = file.open();
  if (st.isOk()) st = file.write(length, kLengthBytes);
  if (st.isOk()) st = file.write(header.data(), header.size());
  for (size_t k = 0; k < order.size() && st.isOk(); ++k)
    st = file.write(tensors[order[k]].data, tensors[order[k]].bytes);
  if (st.isOk()) st = file.commit();
  return st.withContext(path);
}

}  // namespace spmd::io
