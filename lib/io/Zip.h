// Read-only access to a zip archive (a .pt2 file) over libzip.
//
//   SPMD_ASSIGN_OR_RETURN(auto zip, io::ZipArchive::open("model.pt2"));
//   for (const std::string& name : zip->names()) ...      // "model/models/model.json", ...
//   SPMD_ASSIGN_OR_RETURN(std::string json, zip->readString("model/models/model.json"));
//   std::vector<uint8_t> w(65536);
//   SPMD_RETURN_IF_ERROR(zip->readInto("model/data/weights/weight_0", w.data(), w.size()));
//
// Opening validates the whole central directory: every member's path stays
// inside the archive, no member is encrypted, and every declared size is
// possible for the archive's length (so size() may be trusted to allocate).
// Errors read "<path>: <what>" (e.g. "x.pt2: member ../evil escapes the
// archive"); a member that cannot be read as declared gives "x.pt2: member
// M: the archive is damaged (...)".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "support/Status.h"

struct zip;

namespace spmd::io {

/// An open, read-only zip archive. Reads may be issued from several threads;
/// they are serialized internally.
class ZipArchive {
 public:
  /// Opens `path`. Errors: cannot open, empty file, not a zip archive, a member whose
  /// path escapes the archive (absolute, or containing a ".." component), encrypted members,
  /// declared sizes beyond the archive (compressed size > file size, stored size !=
  /// compressed size, more than 1100 bytes per compressed byte, more than 1 TiB).
  static Expected<std::unique_ptr<ZipArchive>> open(const std::string& path);
  /// Closes the archive.
  ~ZipArchive();
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;

  /// The path given to open().
  const std::string& path() const { return path_; }
  /// Member names in archive order (directories excluded).
  const std::vector<std::string>& names() const { return names_; }
  /// True when member `name` exists.
  bool contains(std::string_view name) const;
  /// Uncompressed size of member `name` (error when absent).
  Expected<uint64_t> size(std::string_view name) const;
  /// Reads member `name` whole into `dst`, which holds exactly `size` bytes; error when the
  /// member's size differs ("member X has N bytes, expected M"), when absent, or on a read/CRC error.
  Status readInto(std::string_view name, void* dst, uint64_t size) const;
  /// Reads member `name` whole into a string; error above 1 GiB. The string's
  /// capacity holds `padding` zero bytes past its end (a parser that reads
  /// past the end, such as simdjson, can then take it without a copy).
  Expected<std::string> readString(std::string_view name, size_t padding = 0) const;

 private:
  /// Where a member sits in the archive.
  struct Member {
    uint64_t index = 0;
    uint64_t size = 0;
  };
  /// string_view-capable hash so lookups need no std::string.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  ZipArchive(std::string path, struct zip* archive);
  Status indexMembers(uint64_t archiveBytes);
  Expected<Member> find(std::string_view name) const;

  std::string path_;
  struct zip* zip_ = nullptr;
  std::vector<std::string> names_;
  std::unordered_map<std::string, Member, NameHash, std::equal_to<>> members_;
  mutable std::mutex mutex_;  // libzip handles are not thread-safe
};

}  // namespace spmd::io
