// Tests of workerEnvFromEnvironment: torchrun's variables, each missing or
// invalid one named in the error.
//
//   RANK=1 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=h MASTER_PORT=29500
//     -> {1, 4, 1, 2, "h", 29500}
#include "../TestCatch.h"

#include <memory>
#include <sstream>

#include "LaunchTestUtil.h"
#include "launch/Launcher.h"
#include "launch/WorkerEnv.h"

namespace spmd::launch {
namespace {

using testing::ScopedEnv;

/// Sets all six variables to valid values for the duration of a test.
struct ValidEnv {
  ScopedEnv rank{"RANK", "1"};
  ScopedEnv world{"WORLD_SIZE", "4"};
  ScopedEnv localRank{"LOCAL_RANK", "1"};
  ScopedEnv localWorld{"LOCAL_WORLD_SIZE", "2"};
  ScopedEnv addr{"MASTER_ADDR", "node0.cluster"};
  ScopedEnv port{"MASTER_PORT", "29500"};
};

std::string errorWith(const char* name, const std::optional<std::string>& value) {
  ValidEnv env;
  ScopedEnv override(name, value);
  auto w = workerEnvFromEnvironment();
  return w ? std::string("<no error>") : w.status().message();
}

TEST_CASE("workerEnvFromEnvironment reads torchrun's variables", "[launch][env]") {
  ValidEnv env;
  auto w = workerEnvFromEnvironment();
  REQUIRE(w);
  CHECK(w->rank == 1);
  CHECK(w->worldSize == 4);
  CHECK(w->localRank == 1);
  CHECK(w->localWorldSize == 2);
  CHECK(w->masterAddr == "node0.cluster");
  CHECK(w->masterPort == 29500);
}

TEST_CASE("workerEnvFromEnvironment names a missing variable", "[launch][env]") {
  for (const char* name :
       {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    INFO(name);
    CHECK(errorWith(name, std::nullopt) == std::string("environment variable ") + name +
                                               " is not set; start workers with spmd-run or torchrun");
  }
  CHECK(errorWith("MASTER_ADDR", "") ==
        "environment variable MASTER_ADDR is not set; start workers with spmd-run or torchrun");
}

TEST_CASE("workerEnvFromEnvironment names an invalid variable and its value", "[launch][env]") {
  CHECK(errorWith("RANK", "one") ==
        "environment variable RANK='one' is not a non-negative integer; start workers with spmd-run or "
        "torchrun");
  CHECK(errorWith("WORLD_SIZE", "4x") ==
        "environment variable WORLD_SIZE='4x' is not a non-negative integer; start workers with spmd-run or "
        "torchrun");
  CHECK(errorWith("LOCAL_RANK", "-1") ==
        "environment variable LOCAL_RANK='-1' is not a non-negative integer; start workers with spmd-run or "
        "torchrun");
  CHECK(errorWith("RANK", "4") ==
        "environment variable RANK=4 must be below WORLD_SIZE=4; start workers with spmd-run or torchrun");
  CHECK(errorWith("LOCAL_RANK", "2") ==
        "environment variable LOCAL_RANK=2 must be below LOCAL_WORLD_SIZE=2; start workers with spmd-run or "
        "torchrun");
  CHECK(errorWith("LOCAL_WORLD_SIZE", "8") ==
        "environment variable LOCAL_WORLD_SIZE=8 must not exceed WORLD_SIZE=4; start workers with spmd-run "
        "or torchrun");
  CHECK(errorWith("MASTER_PORT", "70000") ==
        "environment variable MASTER_PORT=70000 is out of range 1..65535; start workers with spmd-run or "
        "torchrun");
  CHECK(
      errorWith("MASTER_PORT", "0") ==
      "environment variable MASTER_PORT=0 is out of range 1..65535; start workers with spmd-run or torchrun");
}

TEST_CASE("workerEnvFromEnvironment reads rank 0's inherited store socket", "[launch][env]") {
  ValidEnv env;
  ScopedEnv rank0("RANK", "0");
  auto unset = workerEnvFromEnvironment();
  REQUIRE(unset);
  CHECK(unset->masterListenFd == -1);  // torchrun: rank 0 binds the port itself
  {
    ScopedEnv fd(kMasterListenFdVar, "");  // what the launcher gives the other ranks
    CHECK(workerEnvFromEnvironment()->masterListenFd == -1);
  }
  ScopedEnv fd(kMasterListenFdVar, "7");
  auto set = workerEnvFromEnvironment();
  REQUIRE(set);
  CHECK(set->masterListenFd == 7);
  ScopedEnv bad(kMasterListenFdVar, "seven");
  CHECK(workerEnvFromEnvironment().status().message() ==
        "environment variable SPMD_MASTER_LISTEN_FD='seven' is not a non-negative integer; start workers "
        "with spmd-run or torchrun");
}

TEST_CASE("workerEnvFromEnvironment refuses a store socket on another rank", "[launch][env]") {
  CHECK(errorWith(kMasterListenFdVar, "7") ==
        "environment variable SPMD_MASTER_LISTEN_FD is set on RANK=1; only rank 0 serves the store; start "
        "workers with spmd-run or torchrun");
}

TEST_CASE("workerEnvFromEnvironment reads what launchWorkers sets", "[launch][env]") {
  // Each worker prints its six variables; reading them back here must
  // give the worker's place in the job.
  testing::TempDir dir;
  std::string w = testing::writeScript(
      dir, "vars.sh", "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT\"");
  LaunchConfig cfg = testing::configFor(w, 2);
  cfg.nnodes = 2;
  cfg.nodeRank = 1;
  cfg.masterAddr = "10.0.0.7";
  cfg.masterPort = 29511;
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  REQUIRE(r);
  std::vector<std::string> lines = testing::sortedLines(out.str());
  REQUIRE(lines.size() == 2);
  for (int local = 0; local < 2; ++local) {
    std::istringstream in(lines[static_cast<size_t>(local)].substr(std::string("[rank 2] ").size()));
    std::string rank, world, localRank, localWorld, addr, port;
    in >> rank >> world >> localRank >> localWorld >> addr >> port;
    ScopedEnv a("RANK", rank), b("WORLD_SIZE", world), c("LOCAL_RANK", localRank),
        d("LOCAL_WORLD_SIZE", localWorld), e("MASTER_ADDR", addr), f("MASTER_PORT", port);
    auto env = workerEnvFromEnvironment();
    REQUIRE(env);
    CHECK(env->rank == 2 + local);
    CHECK(env->worldSize == 4);
    CHECK(env->localRank == local);
    CHECK(env->localWorldSize == 2);
    CHECK(env->masterAddr == "10.0.0.7");
    CHECK(env->masterPort == 29511);
  }
}

}  // namespace
}  // namespace spmd::launch
