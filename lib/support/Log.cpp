// Logging on spdlog (header-only, with fmt header-only): one logger with
// one stderr sink that flushes every line; the level is ours, checked
// before a message is formatted.
//
//   configure("")       with SPMD_LOG_LEVEL=info  -> info
//   configure("debug")  with SPMD_LOG_LEVEL=info  -> debug (the flag wins)
//   configure("loud")   -> "--log-level loud: unknown log level; expected
//                           trace, debug, info, warn, error or off"
#include "support/Log.h"

#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <memory>

namespace spmd::logging {
namespace {

constexpr std::array<std::string_view, 6> kNames = {"trace", "debug", "info", "warn", "error", "off"};

std::atomic<Level>& current() {
  static std::atomic<Level> level{Level::Warn};
  return level;
}

// The pattern: the prefix (its '%' escaped), spdlog's level name, the text.
std::string patternFor(const std::string& prefix) {
  std::string out;
  for (char c : prefix) out += c == '%' ? "%%" : std::string(1, c);
  return out + "%l: %v";
}

spdlog::logger& logger() {
  static spdlog::logger* l = [] {
    auto* made = new spdlog::logger("spmd", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    made->set_level(spdlog::level::trace);  // filtered by enabled() first
    made->set_pattern(patternFor(""));
    return made;
  }();  // never destroyed: a log line may come from a static destructor
  return *l;
}

spdlog::level::level_enum toSpdlog(Level level) {
  switch (level) {
    case Level::Trace:
      return spdlog::level::trace;
    case Level::Debug:
      return spdlog::level::debug;
    case Level::Info:
      return spdlog::level::info;
    case Level::Warn:
      return spdlog::level::warn;
    case Level::Error:
      return spdlog::level::err;
    case Level::Off:
      break;
  }
  return spdlog::level::off;
}

}  // namespace

Expected<Level> parseLevel(std::string_view source, std::string_view text) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (text == kNames[i]) return static_cast<Level>(i);
  return Status::error(std::string(source) + std::string(text) +
                       ": unknown log level; expected trace, debug, info, warn, error or off");
}

std::string_view levelName(Level level) { return kNames[static_cast<size_t>(level)]; }

Status configure(std::string_view flag) {
  const char* env = std::getenv(kLevelVar);
  Expected<Level> l = Level::Warn;
  if (!flag.empty())
    l = parseLevel("--log-level ", flag);
  else if (env != nullptr && *env != '\0')
    l = parseLevel(std::string("environment variable ") + kLevelVar + "=", env);
  if (!l) return l.status();
  setLevel(*l);
  return Status::ok();
}

void setLevel(Level level) { current().store(level, std::memory_order_relaxed); }

Level level() { return current().load(std::memory_order_relaxed); }

bool enabled(Level l) { return l != Level::Off && l >= level(); }

void setPrefix(const std::string& prefix) { logger().set_pattern(patternFor(prefix)); }

void write(Level l, std::string_view message) {
  if (enabled(l)) logger().log(toSpdlog(l), "{}", message);
}

}  // namespace spmd::logging
