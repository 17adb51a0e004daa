// Helpers shared by the spmd_launch tests: scratch folders, worker scripts,
// process checks and environment guards.
//
//   TempDir dir;                                          // removed at scope exit
//   std::string w = writeScript(dir, "w.sh", "echo $RANK");  // #!/bin/sh, mode 755
//   LaunchConfig cfg = configFor(w, 2);                   // 2 workers, quick kill grace
//   pid_t p = readPid(dir.file("pid.1"));  CHECK(processGone(p));
#pragma once

#include "../TestUtil.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "launch/Launcher.h"

namespace spmd::launch::testing {

using spmd::testing::TempDir;

/// Writes "#!/bin/sh\n<body>" to dir/name with mode 0755 and returns its path.
inline std::string writeScript(const TempDir& dir, const std::string& name, const std::string& body) {
  std::string path = dir.file(name);
  std::ofstream(path, std::ios::trunc) << "#!/bin/sh\n" << body << "\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

/// A config that runs `script` as `n` workers with a short kill grace.
inline LaunchConfig configFor(const std::string& script, int n) {
  LaunchConfig cfg;
  cfg.nprocPerNode = n;
  cfg.workerArgv = {script};
  cfg.killGrace = std::chrono::milliseconds(300);
  return cfg;
}

/// The pid written to `path`, or nullopt when the file is missing or empty.
inline std::optional<pid_t> readPid(const std::string& path) {
  std::ifstream in(path);
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return std::nullopt;
  return static_cast<pid_t>(pid);
}

/// True when `pid` no longer runs: it does not exist, or it is a zombie
/// waiting for a parent (here PID 1 may never reap orphans).
inline bool processGone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  return paren == std::string::npos ||
         (paren + 2 < text.size() && (text[paren + 2] == 'Z' || text[paren + 2] == 'X'));
}

/// processGone(pid), allowing `within` for a parent to finish the job.
inline bool processGoneSoon(pid_t pid, std::chrono::milliseconds within = std::chrono::milliseconds(1000)) {
  auto until = std::chrono::steady_clock::now() + within;
  while (!processGone(pid)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

/// The lines of `text`, sorted (ranks print concurrently).
inline std::vector<std::string> sortedLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

/// Sets (or with nullopt, unsets) an environment variable; restores it on destruction.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

/// True when this process has no child at all, not even a zombie.
inline bool noChildrenLeft() {
  int status = 0;
  return ::waitpid(-1, &status, WNOHANG) < 0 && errno == ECHILD;
}

/// Seconds elapsed since `start`.
inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace spmd::launch::testing
