// Logging: levels from --log-level and SPMD_LOG_LEVEL (the flag wins),
// errors naming the flag or the variable, and the lines written to stderr.
//
//   configure("loud") -> "--log-level loud: unknown log level; expected ..."
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "../TestCatch.h"
#include "support/Log.h"

namespace spmd::logging {
namespace {

const std::string kLevels = "expected trace, debug, info, warn, error or off";

// Sets SPMD_LOG_LEVEL (unset for nullptr) for one scope; the level too is
// put back after.
class EnvLevel {
 public:
  explicit EnvLevel(const char* value) : saved_(level()) {
    if (value)
      ::setenv(kLevelVar, value, 1);
    else
      ::unsetenv(kLevelVar);
  }
  ~EnvLevel() {
    ::unsetenv(kLevelVar);
    setLevel(saved_);
  }

 private:
  Level saved_;
};

// What `write` sends to file descriptor 2.
template <class F>
std::string stderrOf(F write) {
  char path[] = "/tmp/spmd-log-test-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  std::fflush(stderr);
  int saved = ::dup(2);
  ::dup2(fd, 2);
  write();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path);
  return text.str();
}

}  // namespace

TEST_CASE("every level name parses, and prints back as it was spelled") {
  for (const char* name : {"trace", "debug", "info", "warn", "error", "off"}) {
    INFO(name);
    auto l = parseLevel("--log-level ", name);
    REQUIRE(l.hasValue());
    CHECK(levelName(*l) == name);
  }
}

TEST_CASE("a bad level is an error naming the flag or the variable, and the levels") {
  auto l = parseLevel("--log-level ", "loud");
  REQUIRE_FALSE(l.hasValue());
  CHECK(l.status().message() == "--log-level loud: unknown log level; " + kLevels);
  CHECK_FALSE(parseLevel("--log-level ", "DEBUG").hasValue());
  CHECK_FALSE(parseLevel("--log-level ", "").hasValue());

  EnvLevel env("verbose");
  setLevel(Level::Info);
  Status st = configure("");
  REQUIRE_FALSE(st.isOk());
  CHECK(st.message() == "environment variable SPMD_LOG_LEVEL=verbose: unknown log level; " + kLevels);
  CHECK(level() == Level::Info);  // unchanged
  Status flag = configure("loud");
  REQUIRE_FALSE(flag.isOk());
  CHECK(flag.message() == "--log-level loud: unknown log level; " + kLevels);
}

TEST_CASE("the flag wins over SPMD_LOG_LEVEL, which wins over the default, warn") {
  {
    EnvLevel env(nullptr);
    REQUIRE(configure("").isOk());
    CHECK(level() == Level::Warn);
  }
  {
    EnvLevel env("");
    REQUIRE(configure("").isOk());
    CHECK(level() == Level::Warn);
  }
  {
    EnvLevel env("info");
    REQUIRE(configure("").isOk());
    CHECK(level() == Level::Info);
    REQUIRE(configure("trace").isOk());
    CHECK(level() == Level::Trace);
  }
  {
    EnvLevel env("verbose");  // a bad variable is not read when the flag is given
    REQUIRE(configure("error").isOk());
    CHECK(level() == Level::Error);
  }
}

TEST_CASE("a level enables itself and the more severe ones; off enables none") {
  EnvLevel restore(nullptr);
  setLevel(Level::Info);
  CHECK_FALSE(enabled(Level::Debug));
  CHECK(enabled(Level::Info));
  CHECK(enabled(Level::Error));
  setLevel(Level::Off);
  CHECK_FALSE(enabled(Level::Error));
  CHECK_FALSE(enabled(Level::Off));
}

TEST_CASE("a line reads prefix, level, message; below the level nothing is written") {
  EnvLevel restore(nullptr);
  setLevel(Level::Debug);
  CHECK(stderrOf([] { debug("auto: evaluating ", 3, " layouts, ", 0.5, " ms"); }) ==
        "debug: auto: evaluating 3 layouts, 0.5 ms\n");
  CHECK(stderrOf([] { trace("not shown"); }).empty());
  setPrefix("[rank 3] ");
  CHECK(stderrOf([] { warn("100% slow"); }) == "[rank 3] warning: 100% slow\n");
  setPrefix("50% ");  // a '%' in the prefix is text, not a pattern flag
  CHECK(stderrOf([] { info("x"); }) == "50% info: x\n");
  setPrefix("");
  setLevel(Level::Off);
  CHECK(stderrOf([] { error("nothing"); }).empty());
}

}  // namespace spmd::logging
