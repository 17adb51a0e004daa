// The safetensors format: reading (memory-mapped, validated) and writing
// (atomic).
//
// Layout: 8-byte little-endian header length N, N bytes of JSON header, then
// the data section.
//
//   {"__metadata__": {"format": "pt"},
//    "input.0": {"dtype": "F32", "shape": [32, 64], "data_offsets": [0, 8192]}}
//
//   SPMD_ASSIGN_OR_RETURN(io::SafetensorsFile f, io::SafetensorsFile::open("inputs.safetensors"));
//   const io::SafetensorsEntry* e = f.find("input.0");   // dtype Float, shape {32, 64},
//                                                         // bytes 8192, data into the map
//   std::vector<io::TensorView> out = {{"output.0", ir::ScalarType::Float, {2}, buf, 8}};
//   SPMD_RETURN_IF_ERROR(io::writeSafetensors("out.safetensors", out, {{"format", "pt"}}));
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/MappedFile.h"
#include "ir/Types.h"
#include "support/Status.h"

namespace spmd::io {

/// One tensor of an open safetensors file; `data` points into the file's map
/// (no alignment is promised) and stays valid while the file is open.
struct SafetensorsEntry {
  std::string name;
  ir::ScalarType dtype = ir::ScalarType::Unknown;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  uint64_t bytes = 0;
};

/// A safetensors file, mapped read-only and fully validated at open().
class SafetensorsFile {
 public:
  /// Maps and validates `path`. Errors name the file (and tensor): file shorter than
  /// 8 bytes, header length beyond the file or above 100,000,000 bytes, header JSON that
  /// does not parse or is not an object, a non-object entry, unknown dtype, bad shape,
  /// data_offsets out of range, not matching numel * element size, or overlapping
  /// another tensor's, malformed "__metadata__".
  static Expected<SafetensorsFile> open(const std::string& path);

  /// The path given to open().
  const std::string& path() const { return file_.path(); }
  /// Tensor names, sorted.
  const std::vector<std::string>& names() const { return names_; }
  /// All tensors, sorted by name.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  /// The tensor called `name`, or null when there is none.
  const SafetensorsEntry* find(std::string_view name) const;
  /// The "__metadata__" strings (empty when the header has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The file's size in bytes.
  uint64_t size() const { return file_.size(); }
  /// The 8-byte header length and the JSON header: what names, dtypes,
  /// shapes and offsets of every tensor (a checksum of it fingerprints them).
  std::string_view headerBytes() const { return file_.view().substr(0, static_cast<size_t>(headerEnd_)); }

 private:
  MappedFile file_;
  std::vector<std::string> names_;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
  uint64_t headerEnd_ = 0;
};

/// A tensor to write: `bytes` contiguous little-endian bytes at `data`
/// (may be null when bytes == 0).
struct TensorView {
  std::string name;
  ir::ScalarType dtype = ir::ScalarType::Unknown;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  uint64_t bytes = 0;
};

/// Writes `tensors` (laid out in name order, header padded with spaces to a multiple
/// of 8) and `metadata` to `path`, atomically: the file appears whole or not at all
/// (written to "<path>.tmp.<pid>" and renamed; the temporary is removed on failure).
/// Errors: duplicate or reserved names, a dtype safetensors cannot hold, bytes not
/// matching numel * element size, and any I/O failure (naming the path).
Status writeSafetensors(const std::string& path, const std::vector<TensorView>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

}  // namespace spmd::io
