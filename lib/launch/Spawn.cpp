// spawnWorker: pipe2(O_CLOEXEC) x3 + fork + PR_SET_PDEATHSIG + setpgid + dup2
// + execve.
//
//   spawnWorker("/no/such", {"/no/such"}, env)
//     -> error "cannot start worker: /no/such: No such file or directory"
//
// The third pipe carries the child's errno when execve fails; it closes on
// a successful execve (O_CLOEXEC), so the parent reads either 4 bytes or EOF.
// Between fork and execve the child calls only async-signal-safe functions.
#include "launch/Spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace spmd::launch {
namespace {

/// Descriptors of the three pipes and /dev/null; closes whatever is left open.
struct SpawnFds {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int exec[2] = {-1, -1};
  int devNull = -1;
  SpawnFds() = default;
  SpawnFds(const SpawnFds&) = delete;
  SpawnFds& operator=(const SpawnFds&) = delete;
  ~SpawnFds() {
    for (int* fd : {&out[0], &out[1], &err[0], &err[1], &exec[0], &exec[1], &devNull}) closeFd(*fd);
  }
  static void closeFd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

std::vector<char*> cStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

/// Sends errno to the parent through the exec pipe and exits.
[[noreturn]] void childFailed(int execFd) {
  int e = errno;
  (void)!::write(execFd, &e, sizeof(e));
  ::_exit(127);
}

/// The child's side: never returns.
[[noreturn]] void execChild(const char* path, char* const* argv, char* const* envp, const SpawnFds& fds,
                            pid_t launcher, int inheritFd) {
  // First of all: die with the launcher (the signal survives execve). A
  // launcher that died before this line left us to another parent already.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) childFailed(fds.exec[1]);
  if (::getppid() != launcher) ::_exit(127);
  ::setpgid(0, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE, SIGQUIT, SIGHUP}) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (::dup2(fds.devNull, 0) < 0 || ::dup2(fds.out[1], 1) < 0 || ::dup2(fds.err[1], 2) < 0 ||
      (inheritFd >= 0 && ::fcntl(inheritFd, F_SETFD, 0) != 0))
    childFailed(fds.exec[1]);
  ::execve(path, argv, envp);
  childFailed(fds.exec[1]);
}

Status startError(const std::string& what, int err) {
  return Status::error("cannot start worker: " + what + ": " + std::strerror(err));
}

/// Reads the child's execve errno: 0 when it executed.
int readExecErrno(int fd) {
  int childErr = 0;
  ssize_t n;
  do {
    n = ::read(fd, &childErr, sizeof(childErr));
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof(childErr)) ? childErr : 0;
}

}  // namespace

Expected<std::string> resolveProgram(const std::string& program) {
  if (program.empty()) return Status::error("no worker program given; pass the program to run");
  if (program.find('/') != std::string::npos) return program;
  const char* pathVar = std::getenv("PATH");
  std::string dirs = pathVar != nullptr ? pathVar : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return startError(program, ENOENT);
}

std::vector<std::string> workerEnvironment(const std::vector<std::pair<std::string, std::string>>& vars) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [key, value] : vars) replaced = replaced || name == key;
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [key, value] : vars) env.push_back(std::string(key).append("=").append(value));
  return env;
}

Expected<SpawnedWorker> spawnWorker(const std::string& path, const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env, int inheritFd) {
  SpawnFds fds;
  if (::pipe2(fds.out, O_CLOEXEC) != 0 || ::pipe2(fds.err, O_CLOEXEC) != 0 ||
      ::pipe2(fds.exec, O_CLOEXEC) != 0)
    return startError("pipe", errno);
  fds.devNull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fds.devNull < 0) return startError("/dev/null", errno);
  std::vector<char*> argvC = cStrings(argv);
  std::vector<char*> envC = cStrings(env);

  // Signals stay blocked across fork so no handler of ours runs in the child.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t launcher = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) execChild(path.c_str(), argvC.data(), envC.data(), fds, launcher, inheritFd);
  int forkErr = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return startError("fork", forkErr);

  ::setpgid(pid, pid);  // also done by the child; whichever runs first wins
  SpawnFds::closeFd(fds.out[1]);
  SpawnFds::closeFd(fds.err[1]);
  SpawnFds::closeFd(fds.exec[1]);
  int childErr = readExecErrno(fds.exec[0]);
  if (childErr != 0) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return startError(path, childErr);
  }
  ::fcntl(fds.out[0], F_SETFL, ::fcntl(fds.out[0], F_GETFL) | O_NONBLOCK);
  ::fcntl(fds.err[0], F_SETFL, ::fcntl(fds.err[0], F_GETFL) | O_NONBLOCK);
  SpawnedWorker w;
  w.pid = pid;
  w.outFd = std::exchange(fds.out[0], -1);
  w.errFd = std::exchange(fds.err[0], -1);
  return w;
}

std::string signalName(int sig) {
  static constexpr std::array<std::pair<int, const char*>, 20> kNames = {{
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"},
      {SIGTTIN, "SIGTTIN"}, {SIGTTOU, "SIGTTOU"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
  }};
  for (const auto& [number, name] : kNames)
    if (number == sig) return name;
  return "signal " + std::to_string(sig);
}

}  // namespace spmd::launch
