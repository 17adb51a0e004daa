// Starting one worker process (internal to spmd_launch).
//
//   SPMD_ASSIGN_OR_RETURN(std::string exe, resolveProgram("python3"));  // "/usr/bin/python3"
//   auto env = workerEnvironment({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
//   SPMD_ASSIGN_OR_RETURN(SpawnedWorker w, spawnWorker(exe, {"python3", "-V"}, env));
//   // w.pid leads its own process group; w.outFd / w.errFd are the
//   // non-blocking read ends of its stdout and stderr; stdin is /dev/null.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "support/Status.h"

namespace spmd::launch {

/// A started worker. The caller owns the two descriptors and must reap `pid`.
struct SpawnedWorker {
  pid_t pid = -1;  ///< also the id of the worker's own process group
  int outFd = -1;  ///< read end of the worker's stdout (O_NONBLOCK)
  int errFd = -1;  ///< read end of the worker's stderr (O_NONBLOCK)
};

/// `program` itself when it contains a '/', else the first executable
/// file named so in $PATH. Error: "cannot start worker: <name>: No such
/// file or directory".
Expected<std::string> resolveProgram(const std::string& program);

/// This process's environment with each name in `vars` replaced by (or
/// added as) "name=value", as "name=value" strings.
std::vector<std::string> workerEnvironment(const std::vector<std::pair<std::string, std::string>>& vars);

/// Forks and executes `path` with `argv` and `env`, in a new process group,
/// with default signal handling and an empty signal mask. The worker dies
/// with this process however it dies (SIGKILL, the OOM killer): it gets
/// SIGKILL when the calling thread exits, which must therefore outlive it.
/// `inheritFd` (>= 3, or -1 for none) stays open in the worker under its
/// number; every other descriptor of ours is closed. When execution fails
/// the child is reaped and the error reads "cannot start worker: <path>:
/// <reason>".
Expected<SpawnedWorker> spawnWorker(const std::string& path, const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env, int inheritFd = -1);

/// "SIGKILL" for 9, "signal 77" for numbers without a common name.
std::string signalName(int sig);

}  // namespace spmd::launch
