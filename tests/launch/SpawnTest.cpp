// Tests of the pieces under launchWorkers: program lookup, the worker
// environment, spawnWorker's errors and process group, signal names, and
// the Supervisor killing workers it never ran (a later rank failed to start).
//
//   spawnWorker("/", {"/"}, env)  ->  "cannot start worker: /: Permission denied"
#include "../TestCatch.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "LaunchTestUtil.h"
#include "launch/Spawn.h"
#include "launch/Supervisor.h"

namespace spmd::launch {
namespace {

using namespace testing;

TEST_CASE("resolveProgram keeps paths and searches PATH for names", "[launch][spawn]") {
  CHECK(*resolveProgram("./relative/prog") == "./relative/prog");
  TempDir dir;
  std::string tool = writeScript(dir, "spmd-launch-tool", "exit 0");
  ScopedEnv path("PATH", "/no/such/dir::" + dir.file(""));
  auto found = resolveProgram("spmd-launch-tool");
  REQUIRE(found);
  CHECK(std::filesystem::equivalent(*found, tool));
  CHECK(resolveProgram("spmd-launch-missing").status().message() ==
        "cannot start worker: spmd-launch-missing: No such file or directory");
}

TEST_CASE("workerEnvironment replaces and adds variables, keeps the rest", "[launch][spawn]") {
  ScopedEnv a("SPMD_LAUNCH_KEEP", "1");
  ScopedEnv b("RANK", "42");
  std::vector<std::string> env = workerEnvironment({{"RANK", "3"}, {"MASTER_PORT", "29500"}});
  auto count = [&](const std::string& entry) { return std::count(env.begin(), env.end(), entry); };
  CHECK(count("SPMD_LAUNCH_KEEP=1") == 1);
  CHECK(count("RANK=3") == 1);
  CHECK(count("RANK=42") == 0);
  CHECK(count("MASTER_PORT=29500") == 1);
}

TEST_CASE("spawnWorker reports an execve failure and leaves no child", "[launch][spawn]") {
  auto w = spawnWorker("/", {"/"}, workerEnvironment({}));
  REQUIRE_FALSE(w);
  CHECK(w.status().message() == "cannot start worker: /: Permission denied");
  CHECK(noChildrenLeft());
}

TEST_CASE("spawnWorker puts the worker in its own process group with stdin closed", "[launch][spawn]") {
  auto w = spawnWorker("/bin/sh", {"sh", "-c", "cut -d' ' -f5 /proc/$$/stat; cat; echo done >&2"},
                       workerEnvironment({}));
  REQUIRE(w);
  std::ostringstream out, err;
  Supervisor sup(std::chrono::milliseconds(100), false, out, err, -1, [] { return std::vector<int>(); });
  sup.add(0, *w);
  LaunchResult r = sup.run();
  CHECK(r.exitCode == 0);
  CHECK(out.str() == "[rank 0] " + std::to_string(w->pid) + "\n");  // pgid == pid; cat saw EOF at once
  CHECK(err.str() == "[rank 0] done\n");
}

TEST_CASE("a Supervisor that never ran kills and reaps its workers", "[launch][spawn]") {
  auto w = spawnWorker("/bin/sleep", {"sleep", "30"}, workerEnvironment({}));
  REQUIRE(w);
  pid_t pid = w->pid;
  {
    std::ostringstream out, err;
    Supervisor sup(std::chrono::milliseconds(100), false, out, err, -1, [] { return std::vector<int>(); });
    sup.add(0, *w);
  }
  CHECK(processGone(pid));
  CHECK(noChildrenLeft());
}

TEST_CASE("signalName names common signals and numbers the rest", "[launch][spawn]") {
  CHECK(signalName(SIGKILL) == "SIGKILL");
  CHECK(signalName(SIGSEGV) == "SIGSEGV");
  CHECK(signalName(SIGTERM) == "SIGTERM");
  CHECK(signalName(77) == "signal 77");
}

}  // namespace
}  // namespace spmd::launch
