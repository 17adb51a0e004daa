// launchWorkers: check the config, settle the port, start the workers, and
// hand them to the Supervisor.
//
//   nprocPerNode=2, nnodes=3, nodeRank=1  -> workers RANK 2 and 3 (LOCAL_RANK
//   0 and 1), WORLD_SIZE 6, LOCAL_WORLD_SIZE 2, GROUP_RANK 1
#include "launch/Launcher.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include "launch/SignalPipe.h"
#include "launch/Spawn.h"
#include "launch/Supervisor.h"
#include "support/Log.h"

namespace spmd::launch {
namespace {

using Clock = std::chrono::steady_clock;

Status validateConfig(const LaunchConfig& cfg) {
  auto str = [](int v) { return std::to_string(v); };
  if (cfg.nprocPerNode < 1)
    return Status::error("-n " + str(cfg.nprocPerNode) + " is invalid; pass at least 1 worker");
  if (cfg.nnodes < 1) return Status::error("--nnodes " + str(cfg.nnodes) + " is invalid; pass at least 1");
  if (cfg.nodeRank < 0 || cfg.nodeRank >= cfg.nnodes)
    return Status::error("--node-rank " + str(cfg.nodeRank) + " is out of range for --nnodes " +
                         str(cfg.nnodes) + "; pass 0.." + str(cfg.nnodes - 1));
  if (cfg.masterPort < 0 || cfg.masterPort > 65535)
    return Status::error("--master-port " + str(cfg.masterPort) +
                         " is out of range; pass 1..65535 or omit it");
  if (cfg.masterPort == 0 && cfg.nodeRank != 0)
    return Status::error("--master-port is required on node rank " + str(cfg.nodeRank) +
                         "; pass the port that node 0 uses");
  if (cfg.masterAddr.empty()) return Status::error("--master-addr is empty; pass the address of node 0");
  if (cfg.workerArgv.empty() || cfg.workerArgv[0].empty())
    return Status::error("no worker program given; pass the program to run");
  if (cfg.killGrace.count() < 0) return Status::error("the kill grace period is negative; pass 0 or more");
  return Status::ok();
}

/// The rendezvous port. Node 0 listens on it (a free one when none was
/// given) until rank 0 takes the socket over; other nodes were told it.
Expected<StoreSocket> settlePort(const LaunchConfig& cfg, std::ostream& err) {
  if (cfg.nodeRank != 0) return StoreSocket(-1, cfg.masterPort);
  SPMD_ASSIGN_OR_RETURN(StoreSocket sock, listenForStore(cfg.masterAddr, cfg.masterPort));
  if (cfg.masterPort == 0 && cfg.nnodes > 1)
    err << "note: picked --master-port " << sock.port() << "; pass --master-port " << sock.port()
        << " to the other nodes\n";
  return sock;
}

}  // namespace

Expected<LaunchResult> launchWorkers(const LaunchConfig& cfg, std::ostream& out, std::ostream& err) {
  Clock::time_point start = Clock::now();
  SPMD_RETURN_IF_ERROR(validateConfig(cfg));
  SPMD_ASSIGN_OR_RETURN(StoreSocket store, settlePort(cfg, err));
  SPMD_ASSIGN_OR_RETURN(std::string program, resolveProgram(cfg.workerArgv[0]));
  SPMD_ASSIGN_OR_RETURN(std::unique_ptr<SignalPipe> signals, SignalPipe::install());

  SignalPipe* sp = signals.get();
  Supervisor supervisor(cfg.killGrace, cfg.quiet, out, err, sp->fd(), [sp] { return sp->drain(); });
  int worldSize = cfg.nnodes * cfg.nprocPerNode;
  // Like torchrun: unless the user set it, the workers of a node share its
  // cores instead of each spinning up one intra-op thread per core.
  std::vector<std::pair<std::string, std::string>> shared;
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    unsigned cores = std::max(1U, std::thread::hardware_concurrency());
    shared.emplace_back("OMP_NUM_THREADS", std::to_string(std::max(1U, cores / cfg.nprocPerNode)));
  }
  // The workers log at this process's level (its --log-level or SPMD_LOG_LEVEL).
  shared.emplace_back(logging::kLevelVar, logging::levelName(logging::level()));
  for (int local = 0; local < cfg.nprocPerNode; ++local) {
    int rank = cfg.nodeRank * cfg.nprocPerNode + local;
    std::vector<std::pair<std::string, std::string>> vars = {
        {"RANK", std::to_string(rank)},
        {"WORLD_SIZE", std::to_string(worldSize)},
        {"LOCAL_RANK", std::to_string(local)},
        {"LOCAL_WORLD_SIZE", std::to_string(cfg.nprocPerNode)},
        {"GROUP_RANK", std::to_string(cfg.nodeRank)},
        {"MASTER_ADDR", cfg.masterAddr},
        {"MASTER_PORT", std::to_string(store.port())},
        // Rank 0's store serves the socket we listen on: the port is never free in between.
        {kMasterListenFdVar, rank == 0 ? std::to_string(store.fd()) : ""},
    };
    vars.insert(vars.end(), shared.begin(), shared.end());
    std::vector<std::string> env = workerEnvironment(vars);
    // On error the supervisor's destructor kills the workers already started.
    SPMD_ASSIGN_OR_RETURN(SpawnedWorker worker,
                          spawnWorker(program, cfg.workerArgv, env, rank == 0 ? store.fd() : -1));
    supervisor.add(rank, worker);
    if (rank == 0) store.close();  // rank 0 holds the port now; it frees it when it exits
  }
  LaunchResult result = supervisor.run();
  result.wallSeconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace spmd::launch
