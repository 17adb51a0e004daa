// Internal to spmd-run's launcher modes (Distributed.cpp: run a program;
// CalibrateRun.cpp: --calibrate): exit codes, the one-line error, the
// launch configuration and the scratch folder both start workers with.
//
//   ScratchDir scratch("spmd-run");
//   launch::LaunchConfig cfg = launchConfig(o, {"--worker", "--stats-dir", scratch.path});
//   auto result = launch::launchWorkers(cfg, out, err);
//   if (int code = launchFailure(result, err)) return code;
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "launch/Launcher.h"
#include "runtime/Comm.h"
#include "runtime/Distributed.h"

namespace spmd::runtime {

/// Exit code of a run that failed (a worker died, a collective timed out).
constexpr int kFailure = 1;
/// Exit code of bad input (a file, a flag, a mesh that does not fit).
constexpr int kBadInput = 2;

/// Prints "error: <message>" and returns `code`.
int fail(std::ostream& err, int code, const std::string& message);

/// This executable's path (workers are started as `spmd-run --worker ...`);
/// "spmd-run" where /proc/self/exe cannot be read.
std::string selfPath();

/// The launch of `o`'s workers: processes per node, nodes, node rank,
/// rendezvous and quiet from `o`; argv is selfPath() then `workerArgs`.
launch::LaunchConfig launchConfig(const DistributedOptions& o, std::vector<std::string> workerArgs);

/// 0 when every worker exited 0; otherwise prints the launcher's one-line
/// failure and returns kBadInput where the workers said bad input, else
/// kFailure.
int launchFailure(const Expected<launch::LaunchResult>& result, std::ostream& err);

/// A fresh folder under the temp directory named `<prefix>-<pid>`, removed
/// with everything in it when this goes out of scope.
struct ScratchDir {
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string path;
};

/// Where this worker's Gloo transport listens: GLOO_SOCKET_IFNAME, else
/// --bind-addr, else the address this machine reaches `masterAddr` from
/// (Distributed.cpp).
Status chooseBindAddress(const DistributedOptions& o, const std::string& masterAddr, CommOptions& comm);

}  // namespace spmd::runtime
