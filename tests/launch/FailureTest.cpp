// Tests of launchWorkers when something goes wrong: a worker exits non-zero
// or dies by a signal (the others are stopped, nothing is left behind), a
// worker ignores SIGTERM (SIGKILL after the grace), the launcher itself is
// interrupted (forwarded; a second signal kills at once), the launcher is
// killed by SIGKILL (its workers die with it).
//
//   rank 1: exit 3, ranks 0 and 2: sleep 30
//     -> exitCode 3, failure "rank 1 exited with code 3: boom", in well under a second
#include "../TestCatch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "LaunchTestUtil.h"
#include "launch/Launcher.h"

namespace spmd::launch {
namespace {

using namespace testing;
using std::chrono::steady_clock;

/// Waits (in the worker) until each rank's "$1/bg.<rank>" file exists.
std::string waitForBg(std::initializer_list<int> ranks) {
  std::string cond;
  for (int r : ranks)
    cond += std::string(cond.empty() ? "" : " || ") + "[ ! -s \"$1/bg." + std::to_string(r) + "\" ]";
  return "while " + cond + "; do sleep 0.01; done\n";
}

/// A worker body that records its pid and a background sleep's pid, then waits.
const char* kSleeper = "echo $$ > \"$1/pid.$RANK\"\nsleep 30 &\necho $! > \"$1/bg.$RANK\"\nwait\n";

void checkAllGone(const TempDir& dir, std::initializer_list<int> ranks) {
  for (int r : ranks) {
    for (const char* kind : {"pid.", "bg."}) {
      auto pid = readPid(dir.file(kind + std::to_string(r)));
      REQUIRE(pid);
      CHECK(processGoneSoon(*pid));
    }
  }
}

TEST_CASE("a worker exiting non-zero stops the others within seconds", "[launch][failure]") {
  TempDir dir;
  std::string w =
      writeScript(dir, "fail.sh",
                  "if [ \"$RANK\" = 1 ]; then\n" + waitForBg({0, 2}) +
                      "echo 'working' >&2\necho 'error: rank 1: boom' >&2\nexit 3\nfi\n" + kSleeper);
  LaunchConfig cfg = configFor(w, 3);
  cfg.killGrace = std::chrono::milliseconds(3000);  // SIGTERM alone must be enough
  cfg.workerArgv.push_back(dir.file(""));
  auto start = steady_clock::now();
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  REQUIRE(r);
  CHECK(secondsSince(start) < 2.5);
  CHECK(r->exitCode == 3);
  // The rank is said once, not three times.
  CHECK(r->failure == "rank 1 exited with code 3: boom");
  CHECK(err.str() == "[rank 1] working\n[rank 1] error: rank 1: boom\n");
  checkAllGone(dir, {0, 2});
  CHECK(noChildrenLeft());
}

TEST_CASE("a worker killed by a signal is named with the signal", "[launch][failure]") {
  TempDir dir;
  std::string w = writeScript(
      dir, "kill.sh", "if [ \"$RANK\" = 0 ]; then\n" + waitForBg({1}) + "kill -9 $$\nfi\n" + kSleeper);
  LaunchConfig cfg = configFor(w, 2);
  cfg.workerArgv.push_back(dir.file(""));
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  REQUIRE(r);
  CHECK(r->exitCode == 1);
  CHECK(r->failure == "rank 0 was killed by signal 9 (SIGKILL)");
  CHECK(r->wallSeconds < 2.5);
  checkAllGone(dir, {1});
  CHECK(noChildrenLeft());
}

TEST_CASE("a worker that ignores SIGTERM is killed after the grace period", "[launch][failure]") {
  TempDir dir;
  std::string w = writeScript(dir, "stubborn.sh",
                              "if [ \"$RANK\" = 1 ]; then\n" + waitForBg({0}) +
                                  "exit 1\nfi\n"
                                  "trap '' TERM\n" +
                                  kSleeper);
  LaunchConfig cfg = configFor(w, 2);
  cfg.killGrace = std::chrono::milliseconds(400);
  cfg.workerArgv.push_back(dir.file(""));
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  REQUIRE(r);
  CHECK(r->exitCode == 1);
  CHECK(r->failure == "rank 1 exited with code 1");
  CHECK(r->wallSeconds >= 0.4);
  CHECK(r->wallSeconds < 2.5);
  checkAllGone(dir, {0});
  CHECK(noChildrenLeft());
}

TEST_CASE("a stopped worker (a hang) is named when the others fail, and is killed", "[launch][failure]") {
  // Rank 0 stops itself (SIGSTOP); rank 1 then fails as a collective
  // timeout would. The stopped rank gets SIGCONT with the SIGTERM, so the
  // grace period is not waited out.
  TempDir dir;
  std::string w =
      writeScript(dir, "hang.sh",
                  "if [ \"$RANK\" = 1 ]; then\n" + waitForBg({0}) +
                      "sleep 0.3\necho 'error: rank 1: timed out' >&2\nexit 1\nfi\n"
                      "echo $$ > \"$1/pid.0\"\nsleep 30 &\necho $! > \"$1/bg.0\"\nkill -STOP $$\nwait\n");
  LaunchConfig cfg = configFor(w, 2);
  cfg.killGrace = std::chrono::milliseconds(5000);
  cfg.workerArgv.push_back(dir.file(""));
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  REQUIRE(r);
  CHECK(r->exitCode == 1);
  CHECK(
      r->failure ==
      "rank 1 exited with code 1: timed out (rank 0 was stopped by SIGSTOP: a stopped rank makes the others "
      "time out)");
  CHECK(r->wallSeconds < 2.5);
  checkAllGone(dir, {0});
  CHECK(noChildrenLeft());
}

TEST_CASE("all workers exiting 0 is success", "[launch]") {
  TempDir dir;
  std::string w = writeScript(dir, "ok.sh", "[ \"$RANK\" = 2 ] && sleep 0.2\nexit 0");
  std::ostringstream out, err;
  auto r = launchWorkers(configFor(w, 3), out, err);
  REQUIRE(r);
  CHECK(r->exitCode == 0);
  CHECK(r->failure.empty());
  CHECK(r->wallSeconds >= 0.2);
  CHECK(noChildrenLeft());
}

/// The handler installed for `sig` right now.
void (*currentHandler(int sig))(int) {
  struct sigaction now {};
  ::sigaction(sig, nullptr, &now);
  return now.sa_handler;
}

TEST_CASE("SIGINT to the launcher is forwarded and stops every worker", "[launch][signal]") {
  TempDir dir;
  std::string w = writeScript(dir, "int.sh",
                              "echo $$ > \"$1/pid.$RANK\"\nsleep 30 &\necho $! > \"$1/bg.$RANK\"\n"
                              "if [ \"$RANK\" = 0 ]; then\n" +
                                  waitForBg({1}) + "kill -INT $PPID\nfi\nwait\n");
  LaunchConfig cfg = configFor(w, 2);
  cfg.workerArgv.push_back(dir.file(""));
  auto before = currentHandler(SIGINT);
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  REQUIRE(r);
  CHECK(r->exitCode == 130);
  CHECK(r->failure == "interrupted by SIGINT; stopped all workers");
  CHECK(r->wallSeconds < 2.5);
  CHECK(currentHandler(SIGINT) == before);
  checkAllGone(dir, {0, 1});  // background sleeps ignore SIGINT: SIGKILL after the grace
  CHECK(noChildrenLeft());
}

TEST_CASE("SIGTERM to the launcher gives exit code 143", "[launch][signal]") {
  TempDir dir;
  std::string w =
      writeScript(dir, "term.sh", std::string("[ \"$RANK\" = 0 ] && kill -TERM $PPID\n") + kSleeper);
  LaunchConfig cfg = configFor(w, 2);
  cfg.workerArgv.push_back(dir.file(""));
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  REQUIRE(r);
  CHECK(r->exitCode == 143);
  CHECK(r->failure == "interrupted by SIGTERM; stopped all workers");
  CHECK(noChildrenLeft());
}

TEST_CASE("a second signal to the launcher kills without waiting for the grace", "[launch][signal]") {
  TempDir dir;
  std::string w = writeScript(dir, "twice.sh",
                              "trap '' INT TERM\necho $$ > \"$1/pid.0\"\nsleep 30 &\necho $! > \"$1/bg.0\"\n"
                              "kill -INT $PPID\nsleep 0.1\nkill -INT $PPID\nwait\n");
  LaunchConfig cfg = configFor(w, 1);
  cfg.killGrace = std::chrono::milliseconds(20000);
  cfg.workerArgv.push_back(dir.file(""));
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  REQUIRE(r);
  CHECK(r->exitCode == 130);
  CHECK(r->wallSeconds < 2.5);
  checkAllGone(dir, {0});
  CHECK(noChildrenLeft());
}

TEST_CASE("a launcher killed by SIGKILL takes its workers with it", "[launch][failure]") {
  TempDir dir;
  // exec: the worker itself sleeps, so only the parent-death signal can end it early.
  std::string w = writeScript(dir, "orphan.sh", "echo $$ > \"$1/pid.$RANK\"\nexec sleep 30\n");
  LaunchConfig cfg = configFor(w, 2);
  cfg.workerArgv.push_back(dir.file(""));
  pid_t launcher = ::fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    std::ostringstream out, err;
    auto r = launchWorkers(cfg, out, err);
    ::_exit(r ? r->exitCode : 99);
  }
  std::vector<pid_t> workers;
  auto until = steady_clock::now() + std::chrono::seconds(10);
  while (workers.size() < 2 && steady_clock::now() < until) {
    workers.clear();
    for (int r : {0, 1})
      if (auto pid = readPid(dir.file("pid." + std::to_string(r)))) workers.push_back(*pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(launcher, SIGKILL);
  ::waitpid(launcher, nullptr, 0);
  REQUIRE(workers.size() == 2);
  for (pid_t pid : workers) {
    INFO("worker " << pid);
    bool gone = processGoneSoon(pid, std::chrono::milliseconds(2000));
    CHECK(gone);
    if (!gone) ::kill(pid, SIGKILL);  // never leave one behind
  }
}

}  // namespace
}  // namespace spmd::launch
