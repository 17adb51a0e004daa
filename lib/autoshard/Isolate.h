// One layout evaluation in a child process (see Isolate.cpp).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "passes/LayoutCost.h"
#include "support/Status.h"

namespace spmd::autoshard {

/// Runs `evaluate` in a forked child (which may change its copy of this
/// process's memory freely) and returns its result; a child that dies on a
/// signal (an internal invariant's abort) gives an error "the compiler
/// stopped on an internal error (Aborted)". Runs `fallback` in this process
/// when fork or pipe fail. The caller must be single-threaded while it runs.
Expected<passes::LayoutCost> runIsolated(const std::function<Expected<passes::LayoutCost>()>& evaluate,
                                         const std::function<Expected<passes::LayoutCost>()>& fallback);

/// Jobs started each in its own child at once; the caller works on while
/// they run, then collects them. The caller must not fork or start threads
/// in between.
class StartedJobs {
 public:
  using Job = std::function<Expected<passes::LayoutCost>()>;
  /// Starts every job of `jobs` now.
  explicit StartedJobs(const std::vector<Job>& jobs);
  /// Reaps the children not collected (their results are dropped).
  ~StartedJobs();
  StartedJobs(const StartedJobs&) = delete;
  StartedJobs& operator=(const StartedJobs&) = delete;
  /// Waits for every child: results in job order (as runIsolated gives
  /// them); `fallback(j)` runs job j in this process when its fork failed.
  /// Once only.
  std::vector<Expected<passes::LayoutCost>> collect(
      const std::function<Expected<passes::LayoutCost>(size_t)>& fallback);

 private:
  std::vector<std::pair<int, int>> children_;  // (pid or -1, pipe's read end)
};

/// runIsolated for each job, `parallel` children at a time (results in job
/// order); `fallback(j)` runs job j in this process when its fork fails.
std::vector<Expected<passes::LayoutCost>> runIsolatedAll(
    const std::vector<std::function<Expected<passes::LayoutCost>()>>& jobs,
    const std::function<Expected<passes::LayoutCost>(size_t)>& fallback, size_t parallel);

}  // namespace spmd::autoshard
