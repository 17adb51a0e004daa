// Evaluations in child processes (autoshard/Isolate.h): results come back in
// job order, a job that aborts costs only its own result, and children
// started early are collected (or reaped) whatever the caller does meanwhile.
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>

#include "../TestCatch.h"
#include "autoshard/Isolate.h"

using namespace spmd;
using autoshard::StartedJobs;

namespace {

// A job whose cost says which it is; job `crash` aborts instead.
std::vector<StartedJobs::Job> jobs(size_t n, size_t crash) {
  std::vector<StartedJobs::Job> out;
  for (size_t j = 0; j < n; ++j)
    out.emplace_back([j, crash]() -> Expected<passes::LayoutCost> {
      if (j == crash) std::abort();
      passes::LayoutCost c;
      c.computeSeconds = 0.5 * static_cast<double>(j);
      c.peakBytes = static_cast<int64_t>(j) * 1000;
      c.axes.push_back({"tp", 1e-3, static_cast<int64_t>(j), {{"all_gather", static_cast<int64_t>(j)}}});
      return c;
    });
  return out;
}

void checkResults(const std::vector<Expected<passes::LayoutCost>>& r, size_t crash) {
  for (size_t j = 0; j < r.size(); ++j) {
    INFO("job " << j);
    if (j == crash) {
      REQUIRE_FALSE(r[j].hasValue());
      CHECK(r[j].status().message().find("the compiler stopped on an internal error") != std::string::npos);
      continue;
    }
    REQUIRE(r[j].hasValue());
    CHECK(r[j]->computeSeconds == 0.5 * static_cast<double>(j));
    CHECK(r[j]->peakBytes == static_cast<int64_t>(j) * 1000);
    REQUIRE(r[j]->axes.size() == 1);
    CHECK(r[j]->axes[0].byKind == std::vector<std::pair<std::string, int64_t>>{{"all_gather", j}});
  }
}

bool noChildren() {
  int status = 0;
  return ::waitpid(-1, &status, WNOHANG) < 0 && errno == ECHILD;
}

}  // namespace

TEST_CASE("jobs in children return in order, and one that aborts fails alone") {
  auto fallback = [](size_t) -> Expected<passes::LayoutCost> { return Status::error("no fork"); };
  checkResults(autoshard::runIsolatedAll(jobs(5, 2), fallback, 2), 2);
  {
    StartedJobs started(jobs(4, 1));
    double work = 0;  // the caller works on while they run
    for (int i = 0; i < 1000000; ++i) work += i * 1e-9;
    CHECK(work > 0);
    checkResults(started.collect(fallback), 1);
  }
  CHECK(noChildren());
  { StartedJobs dropped(jobs(3, 0)); }  // never collected: reaped
  CHECK(noChildren());
}
