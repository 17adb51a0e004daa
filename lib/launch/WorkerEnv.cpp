// workerEnvFromEnvironment: getenv + strict integer parsing + range checks.
//
//   RANK=4 WORLD_SIZE=4 ...  -> error "environment variable RANK=4 must be
//                               below WORLD_SIZE=4; ..."
//   RANK=x                   -> error "environment variable RANK='x' is not a
//                               non-negative integer; ..."
#include "launch/WorkerEnv.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "launch/LineForwarder.h"
#include "support/Log.h"

namespace spmd::launch {
namespace {

constexpr const char* kHowToStart = "; start workers with spmd-run or torchrun";

Expected<std::string> readVar(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0')
    return Status::error(std::string("environment variable ") + name + " is not set" + kHowToStart);
  return std::string(v);
}

Expected<int> readInt(const char* name) {
  SPMD_ASSIGN_OR_RETURN(std::string text, readVar(name));
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < 0)
    return Status::error(std::string("environment variable ") + name + "='" + text +
                         "' is not a non-negative integer" + kHowToStart);
  return value;
}

Status checkBelow(const char* name, int value, const char* limitName, int limit) {
  if (value < limit) return Status::ok();
  return Status::error(std::string("environment variable ") + name + "=" + std::to_string(value) +
                       " must be below " + limitName + "=" + std::to_string(limit) + kHowToStart);
}

}  // namespace

Expected<WorkerEnv> workerEnvFromEnvironment() {
  WorkerEnv env;
  SPMD_ASSIGN_OR_RETURN(env.rank, readInt("RANK"));
  SPMD_ASSIGN_OR_RETURN(env.worldSize, readInt("WORLD_SIZE"));
  SPMD_ASSIGN_OR_RETURN(env.localRank, readInt("LOCAL_RANK"));
  SPMD_ASSIGN_OR_RETURN(env.localWorldSize, readInt("LOCAL_WORLD_SIZE"));
  SPMD_ASSIGN_OR_RETURN(env.masterAddr, readVar("MASTER_ADDR"));
  SPMD_ASSIGN_OR_RETURN(env.masterPort, readInt("MASTER_PORT"));
  SPMD_RETURN_IF_ERROR(checkBelow("RANK", env.rank, "WORLD_SIZE", env.worldSize));
  SPMD_RETURN_IF_ERROR(checkBelow("LOCAL_RANK", env.localRank, "LOCAL_WORLD_SIZE", env.localWorldSize));
  if (env.localWorldSize > env.worldSize)
    return Status::error("environment variable LOCAL_WORLD_SIZE=" + std::to_string(env.localWorldSize) +
                         " must not exceed WORLD_SIZE=" + std::to_string(env.worldSize) + kHowToStart);
  if (env.masterPort < 1 || env.masterPort > 65535)
    return Status::error("environment variable MASTER_PORT=" + std::to_string(env.masterPort) +
                         " is out of range 1..65535" + kHowToStart);
  if (const char* fd = std::getenv(kMasterListenFdVar); fd != nullptr && *fd != '\0') {
    SPMD_ASSIGN_OR_RETURN(env.masterListenFd, readInt(kMasterListenFdVar));
    if (env.rank != 0)
      return Status::error(std::string("environment variable ") + kMasterListenFdVar + " is set on RANK=" +
                           std::to_string(env.rank) + "; only rank 0 serves the store" + kHowToStart);
  }
  return env;
}

void tagLogWithRank(int rank) { logging::setPrefix(rankPrefix(rank)); }

}  // namespace spmd::launch
