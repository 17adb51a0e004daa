// SignalPipe: the self-pipe trick. The handler only write()s the signal
// number (async-signal-safe); everything else happens in the poll loop.
//
//   install()  -> handlers for SIGCHLD/SIGINT/SIGTERM, non-blocking pipe
//   drain()    -> {SIGCHLD} after a child exited
#include "launch/SignalPipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

namespace spmd::launch {
namespace {

constexpr int kSignals[3] = {SIGCHLD, SIGINT, SIGTERM};
std::atomic<int> gWriteFd{-1};
std::atomic<bool> gActive{false};

void onSignal(int sig) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  int fd = gWriteFd.load();
  if (fd >= 0) (void)!::write(fd, &byte, 1);
  errno = saved;
}

}  // namespace

Expected<std::unique_ptr<SignalPipe>> SignalPipe::install() {
  if (gActive.exchange(true))
    return Status::error("workers are already being launched in this process; run one launch at a time");
  std::unique_ptr<SignalPipe> p(new SignalPipe());
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    return Status::error(std::string("cannot create the launcher's signal pipe: ") + std::strerror(errno));
  p->readFd_ = fds[0];
  p->writeFd_ = fds[1];
  gWriteFd.store(fds[1]);
  struct sigaction act {};
  act.sa_handler = onSignal;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (int i = 0; i < 3; ++i) {
    if (::sigaction(kSignals[i], &act, &p->previous_[i]) != 0)
      return Status::error(std::string("cannot install the launcher's signal handlers: ") +
                           std::strerror(errno));
    p->installed_[i] = true;
  }
  // A caller that blocks these signals would otherwise only notice exits
  // through the poll loop's backstop timeout.
  sigset_t ours;
  sigemptyset(&ours);
  for (int sig : kSignals) sigaddset(&ours, sig);
  p->maskChanged_ = ::pthread_sigmask(SIG_UNBLOCK, &ours, &p->previousMask_) == 0;
  return p;
}

SignalPipe::~SignalPipe() {
  if (maskChanged_) ::pthread_sigmask(SIG_SETMASK, &previousMask_, nullptr);
  for (int i = 0; i < 3; ++i)
    if (installed_[i]) ::sigaction(kSignals[i], &previous_[i], nullptr);
  gWriteFd.store(-1);
  if (readFd_ >= 0) ::close(readFd_);
  if (writeFd_ >= 0) ::close(writeFd_);
  gActive.store(false);
}

std::vector<int> SignalPipe::drain() {
  std::vector<int> sigs;
  unsigned char buf[64];
  while (true) {
    ssize_t n = ::read(readFd_, buf, sizeof(buf));
    if (n > 0) {
      sigs.insert(sigs.end(), buf, buf + n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return sigs;
  }
}

}  // namespace spmd::launch
