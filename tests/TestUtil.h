// Helpers every test folder shares: a scratch folder removed at scope exit.
//
//   spmd::testing::TempDir dir;           // /tmp/spmdc-test-XXXXXX/
//   std::ofstream(dir.file("x.bin")) << "abc";
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace spmd::testing {

/// A fresh directory under the system temp folder, removed with its
/// contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "spmdc-test-XXXXXX").string();
    path_ = ::mkdtemp(templ.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// The directory itself.
  const std::filesystem::path& path() const { return path_; }
  /// The path of `name` inside the directory (not created).
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  /// Names of the directory's entries, sorted.
  std::vector<std::string> list() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace spmd::testing
