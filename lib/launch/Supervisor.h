// Watches started workers until all are gone (internal to spmd_launch).
//
//   Supervisor sup(opts, std::cout, std::cerr, signals->fd(), [&] { return signals->drain(); });
//   SPMD_RETURN_IF_ERROR(sup.add(0, spawnWorker(...)));   // once per worker
//   LaunchResult r = sup.run();   // r.failure == "rank 1 exited with code 3: boom"
//
// Invariants of run(): every worker is reaped before it returns; a pipe is
// read until EOF, or until kPipeGrace after its worker was reaped (a
// grandchild may hold it open); after the first failure or launcher signal,
// later worker deaths are consequences and are not reported.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <vector>

#include "launch/Launcher.h"
#include "launch/LineForwarder.h"
#include "launch/Spawn.h"

namespace spmd::launch {

/// Supervises a set of workers: forwarding, failure detection, shutdown.
class Supervisor {
 public:
  using Clock = std::chrono::steady_clock;
  /// How long a pipe is still read after its worker was reaped.
  static constexpr std::chrono::milliseconds kPipeGrace{500};

  /// `signalFd` becomes readable when `drainSignals` has signals to return.
  Supervisor(std::chrono::milliseconds killGrace, bool quiet, std::ostream& out, std::ostream& err,
             int signalFd, std::function<std::vector<int>()> drainSignals);
  /// Kills (SIGKILL) and reaps any worker still running, closes every pipe.
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  /// Takes ownership of a started worker with global rank `rank`.
  void add(int rank, const SpawnedWorker& worker);
  /// Waits for all workers (see the invariants above); wallSeconds is left 0.
  LaunchResult run();

 private:
  struct Channel {
    int fd = -1;
    std::unique_ptr<LineForwarder> forwarder;
    std::ostream* sink = nullptr;
  };
  struct Worker {
    int rank = 0;
    pid_t pid = -1;
    bool running = true;
    int status = 0;
    int stoppedBy = 0;  // the signal that stopped it (SIGSTOP, ...) while it is stopped
    Clock::time_point reapedAt;
    Channel out, err;
  };

  void reapExited();
  void onSignal(int sig);
  void beginStop(int sig);
  void signalAll(int sig);
  void expireChannels(Clock::time_point now);
  void waitForEvents(Clock::time_point now);
  int pollTimeoutMs(Clock::time_point now) const;
  void readChannel(Channel& ch);
  void closeChannel(Channel& ch);
  bool done() const;
  LaunchResult result() const;

  std::chrono::milliseconds killGrace_;
  bool quiet_;
  std::ostream& out_;
  std::ostream& err_;
  int signalFd_;
  std::function<std::vector<int>()> drainSignals_;
  std::vector<Worker> workers_;
  int failed_ = -1;          // index into workers_ of the first failure
  int interruptSignal_ = 0;  // first SIGINT/SIGTERM the launcher got
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point killAt_;
};

}  // namespace spmd::launch
