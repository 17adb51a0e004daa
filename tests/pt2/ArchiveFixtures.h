// Test helpers: rewrite a real .pt2 archive member by member to make
// corrupt variants (running a tool and reading files: ../TestUtil.h).
#pragma once

#include "../TestUtil.h"

#include <zip.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spmd::testing {

/// Copies `src` to `dst`, passing each member through `edit`, which may
/// change the member's bytes or return nullopt to drop it; `extra` members
/// are appended.
inline void rewriteArchive(
    const std::string& src, const std::string& dst,
    const std::function<std::optional<std::string>(const std::string&, std::string)>& edit,
    const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  int err = 0;
  zip_t* in = zip_open(src.c_str(), ZIP_RDONLY, &err);
  zip_t* out = zip_open(dst.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  std::vector<std::string> keep;  // buffers must outlive zip_close
  auto add = [&](const std::string& name, std::string bytes) {
    keep.push_back(std::move(bytes));
    zip_source_t* s = zip_source_buffer(out, keep.back().data(), keep.back().size(), 0);
    zip_file_add(out, name.c_str(), s, ZIP_FL_OVERWRITE);
  };
  keep.reserve(4096);
  zip_int64_t n = zip_get_num_entries(in, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    std::string name = zip_get_name(in, static_cast<zip_uint64_t>(i), 0);
    zip_stat_t st;
    zip_stat_index(in, static_cast<zip_uint64_t>(i), 0, &st);
    std::string bytes(st.size, '\0');
    zip_file_t* f = zip_fopen_index(in, static_cast<zip_uint64_t>(i), 0);
    zip_fread(f, bytes.data(), st.size);
    zip_fclose(f);
    auto edited = edit(name, std::move(bytes));
    if (edited) add(name, std::move(*edited));
  }
  for (const auto& [name, bytes] : extra) add(name, bytes);
  zip_close(out);
  zip_discard(in);
}

/// Replaces the first occurrence of `from` with `to` (no change if absent).
inline std::string replaceFirst(std::string s, const std::string& from, const std::string& to) {
  size_t pos = s.find(from);
  if (pos != std::string::npos) s.replace(pos, from.size(), to);
  return s;
}

}  // namespace spmd::testing
