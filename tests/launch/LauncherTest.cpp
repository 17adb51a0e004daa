// Tests of launchWorkers on healthy workers: the torchrun environment, rank
// numbering across nodes, the rendezvous port (held until rank 0 takes it
// over), line forwarding, quiet mode, grandchildren that keep a pipe open,
// and the errors raised before any worker starts.
//
//   worker: echo "$RANK $WORLD_SIZE"   -n 2  ->  out: "[rank 0] 0 2\n[rank 1] 1 2\n" (any order)
#include "../TestCatch.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <thread>

#include "LaunchTestUtil.h"
#include "launch/Launcher.h"
#include "launch/Ports.h"

namespace spmd::launch {
namespace {

using namespace testing;
using std::chrono::steady_clock;

TEST_CASE("launchWorkers gives each worker torchrun's environment", "[launch]") {
  TempDir dir;
  std::string w =
      writeScript(dir, "env.sh",
                  "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR "
                  "$MASTER_PORT $SPMD_LAUNCH_TEST_EXTRA\"");
  ScopedEnv stale("RANK", "99");  // the launcher's own RANK must not leak through
  ScopedEnv extra("SPMD_LAUNCH_TEST_EXTRA", "inherited");
  auto sock = listenForStore("127.0.0.1", 0);  // a port that was free just now
  REQUIRE(sock);
  int port = sock->port();
  sock->close();
  LaunchConfig cfg = configFor(w, 3);
  cfg.masterPort = port;
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  REQUIRE(r);
  CHECK(r->exitCode == 0);
  CHECK(r->failure.empty());
  CHECK(r->wallSeconds > 0);
  std::string p = std::to_string(port);
  CHECK(sortedLines(out.str()) == std::vector<std::string>{
                                      "[rank 0] 0 3 0 3 0 127.0.0.1 " + p + " inherited",
                                      "[rank 1] 1 3 1 3 0 127.0.0.1 " + p + " inherited",
                                      "[rank 2] 2 3 2 3 0 127.0.0.1 " + p + " inherited",
                                  });
  CHECK(err.str().empty());
  CHECK(noChildrenLeft());
}

TEST_CASE("launchWorkers numbers ranks by node", "[launch]") {
  TempDir dir;
  std::string w =
      writeScript(dir, "env.sh", "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK\"");
  LaunchConfig cfg = configFor(w, 2);
  cfg.nnodes = 3;
  cfg.nodeRank = 1;
  cfg.masterPort = 29999;  // other nodes are told the port; they do not bind it
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  REQUIRE(r);
  CHECK(r->exitCode == 0);
  CHECK(sortedLines(out.str()) == std::vector<std::string>{"[rank 2] 2 6 0 2 1", "[rank 3] 3 6 1 2 1"});
}

TEST_CASE("launchWorkers picks one free port for all workers when none is given", "[launch]") {
  TempDir dir;
  std::string w = writeScript(dir, "port.sh", "echo \"$MASTER_PORT\"");
  std::ostringstream out, err;
  auto r = launchWorkers(configFor(w, 2), out, err);
  REQUIRE(r);
  std::vector<std::string> lines = sortedLines(out.str());
  REQUIRE(lines.size() == 2);
  std::string port0 = lines[0].substr(std::string("[rank 0] ").size());
  std::string port1 = lines[1].substr(std::string("[rank 1] ").size());
  CHECK(port0 == port1);
  CHECK(std::stoi(port0) > 0);
  CHECK(std::stoi(port0) <= 65535);
  CHECK(err.str().empty());  // one node: no note about the port
}

TEST_CASE("launchWorkers keeps the port taken: rank 0 inherits the socket node 0 listens on",
          "[launch][ports]") {
  TempDir dir;
  std::string w = writeScript(dir, "fd.sh",
                              "fd=${SPMD_MASTER_LISTEN_FD:-none}\n"
                              "[ \"$fd\" = none ] || fd=$(readlink /proc/$$/fd/$fd | cut -d: -f1)\n"
                              "echo \"$fd\"\n"
                              "echo $MASTER_PORT > \"$1/port.$RANK\"\n"
                              "while [ ! -e \"$1/go\" ]; do sleep 0.01; done\n");
  LaunchConfig cfg = configFor(w, 2);
  cfg.workerArgv.push_back(dir.file(""));
  std::ostringstream out, err;
  std::optional<Expected<LaunchResult>> r;
  std::thread launcher([&] { r.emplace(launchWorkers(cfg, out, err)); });
  auto until = steady_clock::now() + std::chrono::seconds(10);
  std::optional<pid_t> port;  // both ranks are up (the launcher has closed its copy)
  while (!(readPid(dir.file("port.1")) && (port = readPid(dir.file("port.0")))) &&
         steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // Nobody else can bind the port, although no worker has bound anything.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port.value_or(0)));
  int bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int bindErr = errno;
  ::close(fd);
  std::ofstream(dir.file("go")) << "1";
  launcher.join();
  REQUIRE(port);
  CHECK(bound != 0);
  CHECK(bindErr == EADDRINUSE);
  REQUIRE(r);
  REQUIRE(*r);
  CHECK((*r)->exitCode == 0);
  CHECK(sortedLines(out.str()) == std::vector<std::string>{"[rank 0] socket", "[rank 1] none"});
}

TEST_CASE("launchWorkers on node 0 of several tells which port it picked", "[launch]") {
  TempDir dir;
  std::string w = writeScript(dir, "port.sh", "echo \"$MASTER_PORT\"");
  LaunchConfig cfg = configFor(w, 1);
  cfg.nnodes = 2;
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  REQUIRE(r);
  std::string port = out.str().substr(std::string("[rank 0] ").size());
  port.pop_back();  // the newline
  CHECK(err.str() ==
        "note: picked --master-port " + port + "; pass --master-port " + port + " to the other nodes\n");
}

TEST_CASE("launchWorkers forwards stdout and stderr as whole prefixed lines", "[launch][forward]") {
  TempDir dir;
  std::string w = writeScript(dir, "out.sh",
                              "echo one\n"
                              "printf 'two\\nthr'\n"
                              "printf 'ee' \n"
                              "echo oops >&2\n"
                              "printf 'no newline at the end' >&2");
  std::ostringstream out, err;
  auto r = launchWorkers(configFor(w, 1), out, err);
  REQUIRE(r);
  CHECK(r->exitCode == 0);
  CHECK(out.str() == "[rank 0] one\n[rank 0] two\n[rank 0] three\n");
  CHECK(err.str() == "[rank 0] oops\n[rank 0] no newline at the end\n");
}

TEST_CASE("launchWorkers never interleaves long lines and keeps each rank's order", "[launch][forward]") {
  TempDir dir;
  // 200 lines of ~3000 bytes per rank: awk's buffered writes split lines
  // across pipe reads.
  std::string w =
      writeScript(dir, "long.sh",
                  "awk -v r=\"$RANK\" 'BEGIN { s = sprintf(\"%3000s\", \"\"); gsub(/ /, \"x\", s);"
                  " for (i = 0; i < 200; i++) print r \":\" i \":\" s }'");
  std::ostringstream out, err;
  auto r = launchWorkers(configFor(w, 3), out, err);
  REQUIRE(r);
  REQUIRE(r->exitCode == 0);
  std::vector<int> next(3, 0);
  std::istringstream in(out.str());
  int count = 0;
  for (std::string line; std::getline(in, line); ++count) {
    REQUIRE(line.size() > 12);
    int rank = line[6] - '0';
    REQUIRE(rank >= 0);
    REQUIRE(rank < 3);
    std::string expected = "[rank " + std::to_string(rank) + "] " + std::to_string(rank) + ":" +
                           std::to_string(next[rank]++) + ":" + std::string(3000, 'x');
    REQUIRE(line == expected);
  }
  CHECK(count == 600);
  CHECK(next == std::vector<int>{200, 200, 200});
}

TEST_CASE("launchWorkers quiet forwards only stderr error lines", "[launch][forward]") {
  TempDir dir;
  std::string w =
      writeScript(dir, "quiet.sh", "echo progress\necho 'warning: slow' >&2\necho 'error: bad shape' >&2");
  LaunchConfig cfg = configFor(w, 1);
  cfg.quiet = true;
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  REQUIRE(r);
  CHECK(out.str().empty());
  CHECK(err.str() == "[rank 0] error: bad shape\n");
}

TEST_CASE("launchWorkers does not wait for a grandchild that holds the pipe", "[launch]") {
  TempDir dir;
  std::string w = writeScript(dir, "bg.sh", "sleep 30 &\necho $! > \"$1/bg.$RANK\"\necho started");
  LaunchConfig cfg = configFor(w, 2);
  cfg.workerArgv.push_back(dir.file(""));
  auto start = steady_clock::now();
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  REQUIRE(r);
  CHECK(secondsSince(start) < 3.0);
  CHECK(r->exitCode == 0);
  CHECK(sortedLines(out.str()) == std::vector<std::string>{"[rank 0] started", "[rank 1] started"});
  for (int rank : {0, 1}) {
    auto bg = readPid(dir.file("bg." + std::to_string(rank)));
    REQUIRE(bg);
    CHECK(processGoneSoon(*bg));  // nothing of the job outlives the launch
  }
}

TEST_CASE("launchWorkers finds the program in PATH", "[launch]") {
  LaunchConfig cfg;
  cfg.nprocPerNode = 2;
  cfg.workerArgv = {"sh", "-c", "echo \"hi $RANK\""};
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  REQUIRE(r);
  CHECK(sortedLines(out.str()) == std::vector<std::string>{"[rank 0] hi 0", "[rank 1] hi 1"});
}

TEST_CASE("launchWorkers reports a program that cannot be executed", "[launch][errors]") {
  TempDir dir;
  std::ostringstream out, err;
  LaunchConfig cfg = configFor("/no/such/prog", 2);
  auto missing = launchWorkers(cfg, out, err);
  REQUIRE_FALSE(missing);
  CHECK(missing.status().message() == "cannot start worker: /no/such/prog: No such file or directory");

  cfg.workerArgv = {"spmd-launch-test-no-such-program"};
  auto notInPath = launchWorkers(cfg, out, err);
  REQUIRE_FALSE(notInPath);
  CHECK(notInPath.status().message() ==
        "cannot start worker: spmd-launch-test-no-such-program: No such file or directory");

  std::string plain = writeScript(dir, "plain.sh", "echo hi");
  ::chmod(plain.c_str(), 0644);
  cfg.workerArgv = {plain};
  auto notExecutable = launchWorkers(cfg, out, err);
  REQUIRE_FALSE(notExecutable);
  CHECK(notExecutable.status().message() == "cannot start worker: " + plain + ": Permission denied");
  CHECK(out.str().empty());
  CHECK(noChildrenLeft());
}

TEST_CASE("launchWorkers rejects an invalid config with what to pass", "[launch][errors]") {
  std::ostringstream out, err;
  auto message = [&](LaunchConfig cfg) { return launchWorkers(cfg, out, err).status().message(); };
  LaunchConfig ok = configFor("/bin/true", 1);

  LaunchConfig c = ok;
  c.nprocPerNode = 0;
  CHECK(message(c) == "-n 0 is invalid; pass at least 1 worker");
  c = ok;
  c.nnodes = 2;
  c.nodeRank = 2;
  c.masterPort = 29500;
  CHECK(message(c) == "--node-rank 2 is out of range for --nnodes 2; pass 0..1");
  c = ok;
  c.nnodes = 2;
  c.nodeRank = 1;
  CHECK(message(c) == "--master-port is required on node rank 1; pass the port that node 0 uses");
  c = ok;
  c.masterPort = 70000;
  CHECK(message(c) == "--master-port 70000 is out of range; pass 1..65535 or omit it");
  c = ok;
  c.workerArgv.clear();
  CHECK(message(c) == "no worker program given; pass the program to run");
}

TEST_CASE("launchWorkers refuses a busy master port on node 0", "[launch][errors]") {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  int port = ntohs(addr.sin_port);

  LaunchConfig cfg = configFor("/bin/true", 2);
  cfg.masterPort = port;
  std::ostringstream out, err;
  auto r = launchWorkers(cfg, out, err);
  ::close(fd);
  REQUIRE_FALSE(r);
  CHECK(r.status().message() == "port " + std::to_string(port) +
                                    " is in use; pass another --master-port or omit it to pick a free one");
  CHECK(noChildrenLeft());
}

}  // namespace
}  // namespace spmd::launch
