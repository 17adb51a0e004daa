// The worker side of the launch contract: torchrun's environment variables.
//
//   // spmd-run -n 4 ... started this process with RANK=2 WORLD_SIZE=4
//   // LOCAL_RANK=2 LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=41873
//   SPMD_ASSIGN_OR_RETURN(WorkerEnv env, workerEnvFromEnvironment());
//   env.rank == 2; env.worldSize == 4; env.masterPort == 41873;
//
// The same variables come from `torchrun --no-python`, so either launcher
// can drive the worker mode.
#pragma once

#include <string>

#include "support/Status.h"

namespace spmd::launch {

/// Where this worker sits in the job, as the launcher described it.
struct WorkerEnv {
  int rank = 0;            ///< RANK: 0 <= rank < worldSize
  int worldSize = 1;       ///< WORLD_SIZE: all workers on all nodes
  int localRank = 0;       ///< LOCAL_RANK: 0 <= localRank < localWorldSize
  int localWorldSize = 1;  ///< LOCAL_WORLD_SIZE: workers on this node
  std::string masterAddr;  ///< MASTER_ADDR: host of the rendezvous store
  int masterPort = 0;      ///< MASTER_PORT: 1..65535
  /// SPMD_MASTER_LISTEN_FD (rank 0 under spmd-run): a socket already
  /// listening on masterPort for the store to serve (TCPStoreOptions::
  /// masterListenFd); -1 when unset or empty (torchrun): rank 0 binds the port.
  int masterListenFd = -1;
};

/// The variable naming rank 0's inherited rendezvous socket.
inline constexpr const char* kMasterListenFdVar = "SPMD_MASTER_LISTEN_FD";

/// Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
/// MASTER_PORT and, when set, SPMD_MASTER_LISTEN_FD. A missing, non-numeric
/// or out-of-range variable is an error naming it and its value
/// ("environment variable RANK is not set; start workers with spmd-run or
/// torchrun"), as is SPMD_MASTER_LISTEN_FD on a rank other than 0.
Expected<WorkerEnv> workerEnvFromEnvironment();

/// Starts this process's log lines (support/Log.h) with "[rank R] ", so a
/// worker's log reads the same under spmd-run (whose launcher adds no second
/// prefix) and under torchrun.
void tagLogWithRank(int rank);

}  // namespace spmd::launch
