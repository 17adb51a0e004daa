// Helpers shared by the spmd_io tests: a scratch folder removed at scope exit.
//
//   TempDir dir;                                   // /tmp/spmd_io_test.<pid>.<n>/
//   writeBytes(dir.file("x.bin"), "abc");          // creates the file
#pragma once

#include "../TestUtil.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace spmd::io::testing {

using spmd::testing::TempDir;

/// Writes `bytes` to `path`, replacing it.
inline void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Reads `path` whole.
inline std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace spmd::io::testing
