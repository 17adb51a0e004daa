// Runs one SPMD job's workers on this node, torchrun style.
//
//   LaunchConfig cfg;
//   cfg.nprocPerNode = 4;                                   // spmd-run -n 4
//   cfg.workerArgv = {"/opt/spmd/bin/spmd-run", "--worker", "model.spmd"};
//   SPMD_ASSIGN_OR_RETURN(LaunchResult r, launchWorkers(cfg, std::cout, std::cerr));
//   // every worker line arrives as "[rank 2] loss 0.25"
//   if (r.exitCode != 0) std::cerr << "error: " << r.failure << "\n";
//   // e.g. "rank 2 exited with code 1: error: out of memory"
//   return r.exitCode;
//
// Workers get RANK = nodeRank * nprocPerNode + localRank, WORLD_SIZE =
// nnodes * nprocPerNode, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (the node
// rank), MASTER_ADDR and MASTER_PORT on top of the launcher's environment.
// On node 0 the launcher listens on MASTER_PORT itself and rank 0 inherits
// that socket (SPMD_MASTER_LISTEN_FD) for its rendezvous store, so the port
// is never free for another process to take in between.
// The first worker that fails stops the rest: SIGTERM to each worker's
// process group, SIGKILL after killGrace. Nothing is left running when
// launchWorkers returns, and a launcher that is killed (even by SIGKILL)
// takes its workers with it.
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "launch/Ports.h"
#include "launch/WorkerEnv.h"
#include "support/Status.h"

namespace spmd::launch {

/// What to start and how to supervise it.
struct LaunchConfig {
  int nprocPerNode = 1;                  ///< -n: workers on this node (>= 1)
  int nnodes = 1;                        ///< --nnodes (>= 1)
  int nodeRank = 0;                      ///< --node-rank: 0 <= nodeRank < nnodes
  std::string masterAddr = "127.0.0.1";  ///< --master-addr: host of rank 0's store
  int masterPort = 0;                    ///< --master-port; 0 picks a free one (node 0 only)
  std::vector<std::string> workerArgv;   ///< the program (a path, or a name in $PATH), then its arguments
  std::chrono::milliseconds killGrace{3000};  ///< SIGTERM -> SIGKILL delay when stopping workers
  bool quiet = false;                         ///< forward only stderr lines starting "error:", no stdout
};

/// How the job ended.
struct LaunchResult {
  /// 0 when every worker exited 0; else the failed worker's exit code, 1
  /// when it died by a signal, 128 + N when the launcher got signal N.
  int exitCode = 0;
  /// "" on success; else one line naming the first failure: "rank 3 was
  /// killed by signal 9 (SIGKILL)", "rank 2 exited with code 1: <its last
  /// stderr line>", "interrupted by SIGINT; stopped all workers".
  std::string failure;
  /// Seconds from the call to the return.
  double wallSeconds = 0;
};

/// Starts cfg.nprocPerNode workers, forwards their stdout to `out` and
/// stderr to `err` line by line as "[rank R] <line>", and waits for them.
/// A worker failing, or SIGINT/SIGTERM reaching the launcher (forwarded to
/// the workers; a second one kills them at once), stops all workers; it is
/// reported in the result, not as an error. Errors: an invalid config, an
/// unresolvable --master-addr or a busy --master-port on node 0, or a
/// program that cannot be executed
/// ("cannot start worker: <path>: No such file or directory"); workers
/// already started are then killed. One launch at a time per process: it
/// owns the SIGCHLD/SIGINT/SIGTERM handlers while it runs. The workers die
/// when the calling thread does (see spawnWorker).
Expected<LaunchResult> launchWorkers(const LaunchConfig& cfg, std::ostream& out, std::ostream& err);

}  // namespace spmd::launch
