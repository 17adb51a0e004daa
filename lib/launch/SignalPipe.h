// Turns SIGCHLD, SIGINT and SIGTERM into bytes on a pipe (internal to
// spmd_launch), so one poll() loop can wait for output, exits and signals.
//
//   SPMD_ASSIGN_OR_RETURN(auto signals, SignalPipe::install());
//   pollfd p{signals->fd(), POLLIN, 0};
//   ::poll(&p, 1, -1);
//   for (int sig : signals->drain()) { ... }   // e.g. {SIGCHLD, SIGINT}
//   signals.reset();                           // previous handlers are back
//
// One SignalPipe exists per process at a time (the handlers are global).
#pragma once

#include <signal.h>

#include <memory>
#include <vector>

#include "support/Status.h"

namespace spmd::launch {

/// Owns handlers for SIGCHLD, SIGINT and SIGTERM (unblocked in the calling
/// thread) while it lives.
class SignalPipe {
 public:
  /// Installs the handlers. Error when another SignalPipe is alive.
  static Expected<std::unique_ptr<SignalPipe>> install();
  /// Restores the handlers and the signal mask that were there before.
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  /// Readable when a signal arrived since the last drain().
  int fd() const { return readFd_; }
  /// The signals that arrived since the last call, oldest first.
  std::vector<int> drain();

 private:
  SignalPipe() = default;

  int readFd_ = -1;
  int writeFd_ = -1;
  struct sigaction previous_[3] = {};
  bool installed_[3] = {};
  sigset_t previousMask_{};
  bool maskChanged_ = false;
};

}  // namespace spmd::launch
