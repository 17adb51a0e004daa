// Shared by spmd-run's launcher modes (see LaunchSupport.h).
#include "runtime/LaunchSupport.h"

#include "support/FirstLine.h"

#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

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

Expected<c10::intrusive_ptr<c10d::Store>> openRendezvousStore(const launch::WorkerEnv& env,
                                                              int timeoutSeconds) {
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(env.masterPort);
    so.isServer = env.rank == 0;
    so.numWorkers = static_cast<size_t>(env.worldSize);
    so.timeout = std::chrono::seconds(timeoutSeconds);
    if (env.rank == 0 && env.masterListenFd >= 0) so.masterListenFd = env.masterListenFd;
    return c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::TCPStore>(env.masterAddr, so));
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error("rank " + std::to_string(env.rank) + ": rendezvous at " + env.masterAddr + ":" +
                         std::to_string(env.masterPort) + " failed: " + firstLine(what));
  }
}

void finishRendezvous(c10d::Store& store, const launch::WorkerEnv& env, int timeoutSeconds) {
  try {
    if (store.add("spmd/finished", 1) == env.worldSize) store.set("spmd/all_done", std::vector<uint8_t>{1});
    if (env.rank == 0) store.wait({"spmd/all_done"}, std::chrono::seconds(timeoutSeconds));
  } catch (const std::exception&) {
    // Another rank is gone; the launcher reports it.
  }
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
