// Running one evaluation in a child process, so that a layout which trips an
// internal invariant of the compiler (an abort) costs the search that one
// layout, not the user's whole compile.
//
//   parent: fork -> child compiles and models, writes the LayoutCost as text
//           to a pipe, _exits; parent reads it, waits, and turns a child
//           killed by a signal into an error naming the signal.
#include "autoshard/Isolate.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

namespace spmd::autoshard {
namespace {

std::string encode(const Expected<passes::LayoutCost>& r) {
  std::ostringstream o;
  o.precision(17);
  if (!r) {
    o << "E " << r.status().message();
    return o.str();
  }
  const passes::LayoutCost& c = *r;
  o << "C " << c.computeSeconds << ' ' << c.commSeconds << ' ' << c.paramBytes << ' ' << c.peakBytes << ' '
    << c.axes.size() << '\n';
  for (const auto& a : c.axes) {
    o << a.axis << ' ' << a.seconds << ' ' << a.collectives << ' ' << a.byKind.size();
    for (const auto& [k, n] : a.byKind) o << ' ' << k << ' ' << n;
    o << '\n';
  }
  return o.str();
}

Expected<passes::LayoutCost> decode(const std::string& text) {
  if (text.rfind("E ", 0) == 0) return Status::error(text.substr(2));
  std::istringstream in(text);
  std::string tag;
  passes::LayoutCost c;
  size_t axes = 0;
  in >> tag >> c.computeSeconds >> c.commSeconds >> c.paramBytes >> c.peakBytes >> axes;
  for (size_t i = 0; in && i < axes; ++i) {
    passes::AxisComm a;
    size_t kinds = 0;
    in >> a.axis >> a.seconds >> a.collectives >> kinds;
    for (size_t k = 0; in && k < kinds; ++k) {
      std::pair<std::string, int64_t> e;
      in >> e.first >> e.second;
      a.byKind.push_back(e);
    }
    c.axes.push_back(a);
  }
  if (tag != "C" || !in) return Status::error("internal: the evaluation's child wrote no cost");
  return c;
}

}  // namespace

Expected<passes::LayoutCost> runIsolated(const std::function<Expected<passes::LayoutCost>()>& evaluate,
                                         const std::function<Expected<passes::LayoutCost>()>& fallback) {
  int fds[2];
  if (::pipe(fds) != 0) return fallback();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return fallback();
  }
  if (pid == 0) {
    ::close(fds[0]);
    // The child dies quietly on an abort (its parent reports the layout as
    // skipped); SPMD_AUTO_TRACE keeps the internal error's message.
    ::signal(SIGABRT, SIG_DFL);
    ::signal(SIGSEGV, SIG_DFL);
    if (!std::getenv("SPMD_AUTO_TRACE"))
      if (int null = ::open("/dev/null", O_WRONLY); null >= 0) ::dup2(null, 2);
    std::string out = encode(evaluate());
    for (size_t done = 0; done < out.size();) {
      ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    return Status::error(std::string("the compiler stopped on an internal error (") +
                         ::strsignal(WTERMSIG(status)) + ")");
  return decode(text);
}

}  // namespace spmd::autoshard
