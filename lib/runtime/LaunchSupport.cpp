// Shared by spmd-run's launcher modes (see LaunchSupport.h).
#include "runtime/LaunchSupport.h"

#include <unistd.h>

#include <filesystem>

namespace spmd::runtime {

int fail(std::ostream& err, int code, const std::string& message) {
  err << "error: " << message << "\n";
  return code;
}

std::string selfPath() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("spmd-run") : p.string();
}

launch::LaunchConfig launchConfig(const DistributedOptions& o, std::vector<std::string> workerArgs) {
  launch::LaunchConfig cfg;
  cfg.nprocPerNode = o.nproc;
  cfg.nnodes = o.nnodes;
  cfg.nodeRank = o.nodeRank;
  cfg.masterAddr = o.masterAddr;
  cfg.masterPort = o.masterPort;
  cfg.quiet = o.quiet;
  cfg.workerArgv = {selfPath()};
  cfg.workerArgv.insert(cfg.workerArgv.end(), workerArgs.begin(), workerArgs.end());
  return cfg;
}

int launchFailure(const Expected<launch::LaunchResult>& result, std::ostream& err) {
  if (!result) return fail(err, kBadInput, result.status().message());
  if (result->exitCode == 0) return 0;
  return fail(err, result->exitCode == kBadInput ? kBadInput : kFailure, result->failure);
}

ScratchDir::ScratchDir(const std::string& prefix)
    : path((std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()))).string()) {
  std::filesystem::create_directories(path);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace spmd::runtime
