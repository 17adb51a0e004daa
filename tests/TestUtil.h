// Helpers every test folder shares: a scratch folder removed at scope exit,
// whole-file reads and writes, and a tool run as a process.
//
//   spmd::testing::TempDir dir;           // /tmp/spmdc-test-XXXXXX/
//   writeBytes(dir.file("x.bin"), "abc");
//   RunResult r = runCommand(tool + " --version");   // r.exitCode, r.stdoutText
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
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

/// The whole file as bytes ("" when it cannot be read).
inline std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Replaces the file with `bytes`.
inline void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// What a command run through the shell left: its exit code (-1 when a
/// signal ended it) and its stdout and stderr.
struct RunResult {
  int exitCode = -1;
  std::string stdoutText;
  std::string stderrText;
};

/// Runs `command` through the shell, capturing stdout and stderr.
inline RunResult runCommand(const std::string& command) {
  TempDir dir;
  std::string errFile = dir.file("stderr");
  RunResult r;
  FILE* p = popen((command + " 2>" + errFile).c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.stdoutText.append(buf, n);
  int status = pclose(p);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.stderrText = readBytes(errFile);
  return r;
}

}  // namespace spmd::testing
