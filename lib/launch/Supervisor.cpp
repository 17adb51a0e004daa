// Supervisor: one poll() loop over the signal pipe and every worker pipe.
//
//   loop: reap exited workers (waitpid WNOHANG, our pids only)
//         first failure        -> SIGTERM every worker's process group
//         kill deadline passed -> SIGKILL them
//         pipes of reaped workers past kPipeGrace -> flush and close
//         all reaped, all pipes closed -> SIGKILL leftover group members, done
//         poll until output, a signal, or the next deadline
#include "launch/Supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace spmd::launch {
namespace {

// A worker's last error line without what the failure message already says:
// "error: rank 3: node x failed" -> "node x failed" (for rank 3).
std::string withoutRankPrefix(std::string line, int rank) {
  for (const std::string& prefix : {std::string("error: "), "rank " + std::to_string(rank) + ": "})
    if (line.rfind(prefix, 0) == 0) line.erase(0, prefix.size());
  return line;
}

bool failedStatus(int status) {
  return status < 0 || WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
}

}  // namespace

Supervisor::Supervisor(std::chrono::milliseconds killGrace, bool quiet, std::ostream& out, std::ostream& err,
                       int signalFd, std::function<std::vector<int>()> drainSignals)
    : killGrace_(killGrace),
      quiet_(quiet),
      out_(out),
      err_(err),
      signalFd_(signalFd),
      drainSignals_(std::move(drainSignals)) {}

Supervisor::~Supervisor() {
  for (Worker& w : workers_) {
    if (w.running) {
      ::kill(-w.pid, SIGKILL);
      while (::waitpid(w.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      w.running = false;
    }
    if (w.out.fd >= 0) ::close(w.out.fd);
    if (w.err.fd >= 0) ::close(w.err.fd);
  }
}

void Supervisor::add(int rank, const SpawnedWorker& worker) {
  Worker& w = workers_.emplace_back();
  w.rank = rank;
  w.pid = worker.pid;
  using Filter = LineForwarder::Filter;
  w.out = {worker.outFd, std::make_unique<LineForwarder>(rank, &out_, quiet_ ? Filter::None : Filter::All),
           &out_};
  w.err = {worker.errFd,
           std::make_unique<LineForwarder>(rank, &err_, quiet_ ? Filter::ErrorsOnly : Filter::All), &err_};
}

LaunchResult Supervisor::run() {
  while (true) {
    reapExited();
    if (!stopping_ && failed_ >= 0) beginStop(SIGTERM);
    Clock::time_point now = Clock::now();
    if (stopping_ && !killed_ && now >= killAt_) {
      signalAll(SIGKILL);
      killed_ = true;
    }
    expireChannels(now);
    if (done()) break;
    waitForEvents(now);
  }
  // Grandchildren left in a worker's process group would outlive the job.
  for (const Worker& w : workers_) ::kill(-w.pid, SIGKILL);
  return result();
}

void Supervisor::reapExited() {
  Clock::time_point now = Clock::now();
  bool firstFailureNow = failed_ < 0;
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = workers_[i];
    if (!w.running) continue;
    int status = 0;
    pid_t r = ::waitpid(w.pid, &status, WNOHANG | WUNTRACED | WCONTINUED);
    if (r == 0 || (r < 0 && errno == EINTR)) continue;
    if (r == w.pid && (WIFSTOPPED(status) || WIFCONTINUED(status))) {
      // A stopped worker hangs the others until their collectives time out;
      // the failure names it.
      if (WIFSTOPPED(status)) w.stoppedBy = WSTOPSIG(status);
      if (WIFCONTINUED(status) && !stopping_) w.stoppedBy = 0;  // not our own SIGCONT
      continue;
    }
    w.running = false;
    w.status = r == w.pid ? status : -1;  // -1: reaped elsewhere, outcome unknown
    w.reapedAt = now;
    if (stopping_ || !failedStatus(w.status)) continue;
    // Of failures seen at once, a death by signal is the cause, the others'
    // errors ("connection closed by peer") its consequences.
    bool signaled = w.status >= 0 && WIFSIGNALED(w.status);
    const Worker* first = failed_ < 0 ? nullptr : &workers_[static_cast<size_t>(failed_)];
    if (!first || (firstFailureNow && signaled && !(first->status >= 0 && WIFSIGNALED(first->status))))
      failed_ = static_cast<int>(i);
  }
}

void Supervisor::onSignal(int sig) {
  if (sig != SIGINT && sig != SIGTERM) return;
  if (!stopping_) {
    interruptSignal_ = sig;
    beginStop(sig);
  } else if (!killed_) {
    signalAll(SIGKILL);  // asked again while stopping: do not wait out the grace period
    killed_ = true;
  }
}

void Supervisor::beginStop(int sig) {
  stopping_ = true;
  killAt_ = Clock::now() + killGrace_;
  signalAll(sig);
}

void Supervisor::signalAll(int sig) {
  // Reaped workers too: their process group may still hold grandchildren.
  for (const Worker& w : workers_) {
    ::kill(-w.pid, sig);
    if (w.stoppedBy != 0) ::kill(-w.pid, SIGCONT);  // a stopped worker acts on SIGTERM only when continued
  }
}

void Supervisor::expireChannels(Clock::time_point now) {
  for (Worker& w : workers_) {
    if (w.running || now < w.reapedAt + kPipeGrace) continue;
    for (Channel* ch : {&w.out, &w.err}) {
      if (ch->fd < 0) continue;
      readChannel(*ch);  // whatever is already buffered still comes out
      closeChannel(*ch);
    }
  }
}

bool Supervisor::done() const {
  return std::all_of(workers_.begin(), workers_.end(),
                     [](const Worker& w) { return !w.running && w.out.fd < 0 && w.err.fd < 0; });
}

int Supervisor::pollTimeoutMs(Clock::time_point now) const {
  Clock::time_point next = now + std::chrono::seconds(1);  // a backstop; signals wake us sooner
  if (stopping_ && !killed_) next = std::min(next, killAt_);
  for (const Worker& w : workers_)
    if (!w.running && (w.out.fd >= 0 || w.err.fd >= 0)) next = std::min(next, w.reapedAt + kPipeGrace);
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
  return static_cast<int>(std::max<long long>(ms, 0));
}

void Supervisor::waitForEvents(Clock::time_point now) {
  std::vector<pollfd> fds{{signalFd_, POLLIN, 0}};
  std::vector<Channel*> channels{nullptr};
  for (Worker& w : workers_)
    for (Channel* ch : {&w.out, &w.err})
      if (ch->fd >= 0) {
        fds.push_back({ch->fd, POLLIN, 0});
        channels.push_back(ch);
      }
  if (::poll(fds.data(), fds.size(), pollTimeoutMs(now)) <= 0) return;  // timeout or EINTR
  if (fds[0].revents != 0)
    for (int sig : drainSignals_()) onSignal(sig);
  for (size_t i = 1; i < fds.size(); ++i)
    if (fds[i].revents != 0) readChannel(*channels[i]);
}

void Supervisor::readChannel(Channel& ch) {
  char buf[65536];
  // A bounded number of reads keeps one chatty worker from starving the loop.
  for (int round = 0; round < 16 && ch.fd >= 0; ++round) {
    ssize_t n = ::read(ch.fd, buf, sizeof(buf));
    if (n > 0) {
      ch.forwarder->feed(std::string_view(buf, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) closeChannel(ch);
    break;
  }
  ch.sink->flush();
}

void Supervisor::closeChannel(Channel& ch) {
  ch.forwarder->finish();
  ch.sink->flush();
  ::close(ch.fd);
  ch.fd = -1;
}

LaunchResult Supervisor::result() const {
  LaunchResult r;
  if (failed_ >= 0) {
    const Worker& w = workers_[static_cast<size_t>(failed_)];
    std::string cause;
    if (w.status < 0) {
      cause = "ended but its exit status was lost (another part of this process reaped it)";
      r.exitCode = 1;
    } else if (WIFSIGNALED(w.status)) {
      int sig = WTERMSIG(w.status);
      cause = "was killed by signal " + std::to_string(sig) + " (" + signalName(sig) + ")";
      r.exitCode = 1;
    } else {
      r.exitCode = WEXITSTATUS(w.status);
      cause = "exited with code " + std::to_string(r.exitCode);
    }
    r.failure = "rank " + std::to_string(w.rank) + " " + cause;
    if (!w.err.forwarder->lastLine().empty())
      r.failure += ": " + withoutRankPrefix(w.err.forwarder->lastLine(), w.rank);
    for (const Worker& s : workers_)
      if (s.stoppedBy != 0)
        r.failure += " (rank " + std::to_string(s.rank) + " was stopped by " + signalName(s.stoppedBy) +
                     ": a stopped rank makes the others time out)";
  } else if (interruptSignal_ != 0) {
    r.exitCode = 128 + interruptSignal_;
    r.failure = "interrupted by " + signalName(interruptSignal_) + "; stopped all workers";
  }
  return r;
}

}  // namespace spmd::launch
