// A read-only memory map of a whole file.
//
//   SPMD_ASSIGN_OR_RETURN(io::MappedFile f, io::MappedFile::open("x.safetensors"));
//   uint64_t n = f.size();                    // the file's length in bytes
//   const uint8_t* p = f.data();              // valid while `f` lives
//   std::string_view all = f.view();          // the same bytes as a view
//
// An empty file maps to size 0 (data() is null). The mapping is released when
// the object is destroyed; moving transfers it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "support/Status.h"

namespace spmd::io {

/// Owns a read-only, private memory map of one file's full contents.
class MappedFile {
 public:
  /// Maps `path` whole. Errors name the path and the system's reason
  /// ("x.bin: cannot open: No such file or directory").
  static Expected<MappedFile> open(const std::string& path);

  /// An empty map (size 0, no path).
  MappedFile() = default;
  /// Takes over `other`'s mapping; `other` becomes empty.
  MappedFile(MappedFile&& other) noexcept;
  /// Releases the current mapping and takes over `other`'s.
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  /// Unmaps the file.
  ~MappedFile();

  /// The first byte of the file; null when the file is empty.
  const uint8_t* data() const { return data_; }
  /// The file's length in bytes.
  uint64_t size() const { return size_; }
  /// The file's bytes as a view.
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), static_cast<size_t>(size_)}; }
  /// The path given to open().
  const std::string& path() const { return path_; }

 private:
  void reset();

  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace spmd::io
