// Diagnostic logging: one line per message on stderr, filtered by a
// process-wide level (default: warn). The tools set it from --log-level,
// else from SPMD_LOG_LEVEL; spmd-run passes it on to its workers.
//
//   SPMD_RETURN_IF_ERROR(logging::configure(flag));     // "", "debug", ...
//   logging::debug("auto: evaluating ", key);           // "debug: auto: evaluating ..."
//   logging::setPrefix("[rank 3] ");                    // "[rank 3] debug: ..."
//
// User-facing errors are not log lines: they stay "error: <what>" printed
// by the tools. Arguments are streamed (operator<<) only when the level is
// enabled; doubles print as %g does.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

#include "support/Status.h"

namespace spmd::logging {

/// Severity, least to most severe; Off logs nothing.
enum class Level { Trace, Debug, Info, Warn, Error, Off };

/// The environment variable that sets the level when no flag does.
inline constexpr const char* kLevelVar = "SPMD_LOG_LEVEL";

/// Parses "trace", "debug", "info", "warn", "error" or "off". The error
/// reads `source`, the text, and the levels: with source "--log-level ",
/// "--log-level loud: unknown log level; expected trace, debug, info, warn,
/// error or off".
Expected<Level> parseLevel(std::string_view source, std::string_view text);

/// The name parseLevel reads for `level` ("warn").
std::string_view levelName(Level level);

/// Sets the level from `flag` (the --log-level value; empty: not given),
/// else from SPMD_LOG_LEVEL when set and non-empty, else warn. A bad value
/// is an error naming the flag ("--log-level loud: ...") or the variable
/// ("environment variable SPMD_LOG_LEVEL=loud: ...") and leaves the level
/// unchanged.
Status configure(std::string_view flag);

/// Sets the process-wide level.
void setLevel(Level level);
/// The process-wide level.
Level level();
/// True when a message of `level` would be written.
bool enabled(Level level);

/// Text written before every line, e.g. a worker's "[rank 3] "; "" at first.
void setPrefix(const std::string& prefix);

/// Writes "<prefix><level name>: <message>" and a newline to stderr, in one
/// piece, when `level` is enabled.
void write(Level level, std::string_view message);

/// Streams `args` into one line at `level` when it is enabled.
template <class... Args>
void logAt(Level level, const Args&... args) {
  if (!enabled(level)) return;
  std::ostringstream s;
  (s << ... << args);
  write(level, s.str());
}

/// logAt() at one level: `logging::debug("x = ", x)`.
template <Level L>
struct LogAt {
  template <class... Args>
  void operator()(const Args&... args) const {
    logAt(L, args...);
  }
};
inline constexpr LogAt<Level::Trace> trace;
inline constexpr LogAt<Level::Debug> debug;
inline constexpr LogAt<Level::Info> info;
inline constexpr LogAt<Level::Warn> warn;
inline constexpr LogAt<Level::Error> error;

}  // namespace spmd::logging
