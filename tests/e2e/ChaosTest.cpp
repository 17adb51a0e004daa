// Chaos-tested training: 4 workers train mlp_train under fsdp, saving every
// step; one worker is SIGKILLed at a random moment. The launcher must stop
// within 15 s naming the rank, the last complete checkpoint must load, and
// resuming from it to the end must give the uninterrupted run's losses bit
// for bit. A worker stopped with SIGSTOP (a hang) must end the run with a
// clean error soon after --timeout.
//
// SPMD_CHAOS_RUNS (default 4) sets the number of kills, SPMD_CHAOS_SEED
// (default 20261201) the random moments and ranks.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "../pt2/ArchiveFixtures.h"
#include "E2eUtil.h"
#include "runtime/Checkpoint.h"

using namespace spmd;
using spmd::testing::compileTo;
using spmd::testing::modelDir;
using spmd::testing::readBytes;
using spmd::testing::runCommand;
using spmd::testing::TempDir;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kRun = SPMD_RUN_PATH;
constexpr int kSteps = 40;

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The loss log without its timings: "{"step": 0, "loss": 1.25" per line.
std::string lossesOf(const std::string& path) {
  std::istringstream in(readBytes(path));
  std::string line, out;
  while (std::getline(in, line)) out += line.substr(0, line.find(", \"step_ms\"")) + "\n";
  return out;
}

// Starts `command` (through sh, exec'd: the pid is the command's own).
pid_t start(const std::string& command) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// The exit status of `pid` once it ends, or nullopt (and it is killed)
// after `limit` seconds.
std::optional<int> waitFor(pid_t pid, double limit) {
  auto t0 = Clock::now();
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (secondsSince(t0) > limit) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status;
}

// The worker processes of launcher `launcher`, by RANK (from /proc).
std::map<int, pid_t> workersOf(pid_t launcher) {
  std::map<int, pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = readBytes(e.path() / "stat");
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(stat.substr(paren + 2));
    std::string state;
    long ppid = 0;
    if (!(fields >> state >> ppid) || ppid != launcher) continue;
    std::string env = readBytes(e.path() / "environ");
    size_t at = env.find(std::string("\0RANK=", 6));
    if (at != std::string::npos) out[std::atoi(env.c_str() + at + 6)] = std::stoi(name);
  }
  return out;
}

// Waits until `log` has a line (training runs) or `pid` is gone.
void waitForTraining(const std::string& log, pid_t pid) {
  auto t0 = Clock::now();
  while (secondsSince(t0) < 60 && ::kill(pid, 0) == 0 && (!fs::exists(log) || fs::file_size(log) == 0))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

}  // namespace

TEST_CASE(
    "chaos: a worker SIGKILLed at a random moment; resuming from latest matches the losses bit for bit") {
  const int runs = envInt("SPMD_CHAOS_RUNS", 4);
  std::mt19937 rng(static_cast<unsigned>(envInt("SPMD_CHAOS_SEED", 20261201)));
  TempDir dir;
  passes::OptimizerOptions adamw;
  adamw.kind = "adamw";
  compileTo("mlp_train", "fsdp", {4}, dir.file("p.spmd"), adamw);
  std::string base =
      kRun + " -n 4 -q " + dir.file("p.spmd") + " --inputs " + modelDir("mlp_train") + "/inputs.safetensors";
  auto whole =
      runCommand(base + " --steps " + std::to_string(kSteps) + " --loss-log " + dir.file("whole.jsonl"));
  INFO(whole.stderrText);
  REQUIRE(whole.exitCode == 0);
  const std::string want = lossesOf(dir.file("whole.jsonl"));
  REQUIRE(std::count(want.begin(), want.end(), '\n') == kSteps);
  int killed = 0;
  for (int i = 0; i < runs; ++i) {
    std::string ckpt = dir.file("ckpt" + std::to_string(i)), log = dir.file("log" + std::to_string(i));
    std::string err = dir.file("err" + std::to_string(i));
    std::string save = " --save " + ckpt + " --save-every 1 --loss-log " + log;
    pid_t launcher = start(base + " --steps " + std::to_string(kSteps) + save + " 2>" + err);
    waitForTraining(log, launcher);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<>(0, 1500)(rng)));
    std::map<int, pid_t> workers = workersOf(launcher);
    int rank = std::uniform_int_distribution<>(0, 3)(rng);
    bool hit = workers.count(rank) && ::kill(workers[rank], SIGKILL) == 0;
    auto t0 = Clock::now();
    std::optional<int> status = waitFor(launcher, 30);
    double seconds = secondsSince(t0);
    INFO("run " << i << ": killed rank " << rank << (hit ? "" : " (missed: the run had ended)") << "; stderr "
                << readBytes(err));
    REQUIRE(status.has_value());
    if (hit && !(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)) {
      ++killed;
      CHECK(seconds < 15);
      CHECK_THAT(readBytes(err), Catch::Contains("rank " + std::to_string(rank) + " was killed by signal 9"));
    }
    // The last complete checkpoint loads; resuming from it to the end gives
    // the uninterrupted losses.
    int64_t done = 0;
    if (fs::exists(ckpt + "/latest")) {
      auto index = runtime::readCheckpointIndex(ckpt);
      REQUIRE(index.hasValue());
      done = index->step;
      Status full = runtime::consolidateCheckpoint(ckpt, dir.file("full.safetensors"));
      CHECK(full.isOk());
    }
    INFO("resuming from step " << done);
    if (done < kSteps) {
      auto rest = runCommand(base + " --steps " + std::to_string(kSteps - done) + save +
                             (done > 0 ? " --resume " + ckpt : ""));
      INFO(rest.stderrText);
      REQUIRE(rest.exitCode == 0);
    }
    CHECK(lossesOf(log) == want);
  }
  WARN(killed << " of " << runs << " runs killed mid-training and resumed bit-exactly");
  CHECK(killed * 2 >= runs);  // most kills land while training runs
}

TEST_CASE("chaos: a worker stopped with SIGSTOP (a hang) ends the run with a clean error after --timeout") {
  TempDir dir;
  passes::OptimizerOptions adamw;
  adamw.kind = "adamw";
  compileTo("mlp_train", "fsdp", {4}, dir.file("p.spmd"), adamw);
  std::mt19937 rng(static_cast<unsigned>(envInt("SPMD_CHAOS_SEED", 20261201)));
  const int timeout = 5;
  std::string log = dir.file("log"), err = dir.file("err");
  pid_t launcher = start(kRun + " -n 4 -q " + dir.file("p.spmd") + " --inputs " + modelDir("mlp_train") +
                         "/inputs.safetensors --steps 1000000 --timeout " + std::to_string(timeout) +
                         " --loss-log " + log + " 2>" + err);
  waitForTraining(log, launcher);
  std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<>(0, 500)(rng)));
  std::map<int, pid_t> workers = workersOf(launcher);
  int rank = std::uniform_int_distribution<>(0, 3)(rng);
  REQUIRE(workers.count(rank));
  REQUIRE(::kill(workers[rank], SIGSTOP) == 0);
  auto t0 = Clock::now();
  std::optional<int> status = waitFor(launcher, 60);
  double seconds = secondsSince(t0);
  std::string text = readBytes(err);
  INFO("stopped rank " << rank << " after " << seconds << " s; stderr " << text);
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 1);
  CHECK(seconds < timeout + 5);
  // The launcher's own line (last) names the first failure and the stopped rank.
  std::string last = text.substr(text.rfind('\n', text.size() - 2) + 1);
  CHECK_THAT(last, Catch::StartsWith("error: rank "));
  CHECK_THAT(last, Catch::Contains("(rank " + std::to_string(rank) + " was stopped by SIGSTOP"));
  CHECK_FALSE(fs::exists("/proc/" + std::to_string(workers[rank])));  // killed, not left stopped
}
