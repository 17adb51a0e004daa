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

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "launch/Launcher.h"
#include "launch/WorkerEnv.h"
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

/// This worker's connection to the rendezvous store (a c10d TCPStore at
/// MASTER_ADDR:MASTER_PORT, `timeoutSeconds` for every wait). Rank 0 also
/// serves it: on the socket the launcher handed over
/// (env.masterListenFd), else on a port it binds itself (torchrun). Error:
/// "rank R: rendezvous at A:P failed: <first line of the reason>".
Expected<c10::intrusive_ptr<c10d::Store>> openRendezvousStore(const launch::WorkerEnv& env,
                                                              int timeoutSeconds);

/// Tells the store this rank is done; rank 0 (whose process serves the
/// store) then waits up to `timeoutSeconds` for every rank to say so. A
/// rank that is gone is the launcher's to report: no error here.
void finishRendezvous(c10d::Store& store, const launch::WorkerEnv& env, int timeoutSeconds);

/// Where this worker's Gloo transport listens: GLOO_SOCKET_IFNAME, else
/// --bind-addr, else the address this machine reaches `masterAddr` from
/// (Distributed.cpp).
Status chooseBindAddress(const DistributedOptions& o, const std::string& masterAddr, CommOptions& comm);

}  // namespace spmd::runtime
