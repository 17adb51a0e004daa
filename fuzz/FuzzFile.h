// The fuzzer's bytes as a file, for readers that take a path.
//
//   const std::string& path = fuzzFile(data, size, ".pt2");
//   // /dev/shm/spmd_fuzz.<pid>.pt2 (or under /tmp), rewritten on each call
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace spmd::fuzz {

/// Removes a scratch file when the process exits normally.
struct ScratchRemover {
  std::string path;
  ~ScratchRemover() { std::remove(path.c_str()); }
};

/// Writes `size` bytes at `data` to this process's scratch file with
/// extension `ext` and returns its path; aborts when it cannot (that is a
/// broken machine, not a finding).
inline const std::string& fuzzFile(const uint8_t* data, size_t size, const char* ext) {
  static const std::string path = [ext] {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    return std::string(dir) + "/spmd_fuzz." + std::to_string(getpid()) + ext;
  }();
  static const ScratchRemover remover{path};
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

}  // namespace spmd::fuzz
