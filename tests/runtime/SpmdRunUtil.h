// The spmd-run binary of this build run as a process, for the tests whose
// CMake target defines SPMD_RUN_BINARY (its path).
//
//   RunResult r = spmdRun("--version");   // r.exitCode, r.stdoutText, r.stderrText
#pragma once

#include <string>

#include "../TestUtil.h"

namespace spmd::testing {

/// Runs spmd-run with `args` (already shell-quoted where needed); `env`:
/// assignments put before the command (e.g. "CUDA_VISIBLE_DEVICES=").
inline RunResult spmdRun(const std::string& args, const std::string& env = "") {
  return runCommand((env.empty() ? "" : "env " + env + " ") + "'" SPMD_RUN_BINARY "' " + args);
}

}  // namespace spmd::testing
