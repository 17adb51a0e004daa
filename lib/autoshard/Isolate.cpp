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

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "support/Log.h"

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

namespace {

// Forks a child that runs `evaluate` and writes its encoded result to a
// pipe; -1 when fork or pipe fail. `fd` gets the pipe's read end.
pid_t spawn(const std::function<Expected<passes::LayoutCost>()>& evaluate, int& fd) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    ::close(fds[0]);
    // The child dies quietly on an abort (its parent reports the layout as
    // skipped); at log level debug its stderr stays, with the internal
    // error's message.
    ::signal(SIGABRT, SIG_DFL);
    ::signal(SIGSEGV, SIG_DFL);
    if (!logging::enabled(logging::Level::Debug))
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
  fd = fds[0];
  return pid;
}

// Reads the child's result to the end of its pipe and reaps it.
Expected<passes::LayoutCost> collectChild(pid_t pid, int fd) {
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    return Status::error(std::string("the compiler stopped on an internal error (") +
                         ::strsignal(WTERMSIG(status)) + ")");
  return decode(text);
}

}  // namespace

Expected<passes::LayoutCost> runIsolated(const std::function<Expected<passes::LayoutCost>()>& evaluate,
                                         const std::function<Expected<passes::LayoutCost>()>& fallback) {
  int fd = -1;
  pid_t pid = spawn(evaluate, fd);
  return pid < 0 ? fallback() : collectChild(pid, fd);
}

StartedJobs::StartedJobs(const std::vector<Job>& jobs) {
  for (const Job& job : jobs) {
    int fd = -1;
    pid_t pid = spawn(job, fd);
    children_.emplace_back(pid, fd);
  }
}

StartedJobs::~StartedJobs() {
  for (auto [pid, fd] : children_)
    if (pid >= 0) collectChild(pid, fd);
}

std::vector<Expected<passes::LayoutCost>> StartedJobs::collect(
    const std::function<Expected<passes::LayoutCost>(size_t)>& fallback) {
  // A child's result is small (well under a pipe's buffer): it never
  // waits for its parent, so reading the children in turn cannot stall.
  std::vector<Expected<passes::LayoutCost>> out;
  for (size_t j = 0; j < children_.size(); ++j) {
    auto [pid, fd] = children_[j];
    out.push_back(pid < 0 ? fallback(j) : collectChild(pid, fd));
  }
  children_.clear();
  return out;
}

std::vector<Expected<passes::LayoutCost>> runIsolatedAll(
    const std::vector<std::function<Expected<passes::LayoutCost>()>>& jobs,
    const std::function<Expected<passes::LayoutCost>(size_t)>& fallback, size_t parallel) {
  std::vector<Expected<passes::LayoutCost>> out;
  parallel = std::max<size_t>(parallel, 1);
  for (size_t start = 0; start < jobs.size(); start += parallel) {
    std::vector<StartedJobs::Job> batch(
        jobs.begin() + static_cast<std::ptrdiff_t>(start),
        jobs.begin() + static_cast<std::ptrdiff_t>(std::min(jobs.size(), start + parallel)));
    for (auto& r : StartedJobs(batch).collect([&](size_t j) { return fallback(start + j); }))
      out.push_back(std::move(r));
  }
  return out;
}

}  // namespace spmd::autoshard
