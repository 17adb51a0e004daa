// Reads the IR text form (ToText.cpp) back into a program:
//
//   auto p = parseProgram(printProgram(original), "mlp.ir");
//   printProgram(*p) == printProgram(original)     // for every program
//
// Blank lines and lines starting with `//` (lit's RUN and CHECK lines) are
// skipped. A node line's trailing `# file.py:37` comment is its source
// line; a `{stack_trace="...", ...}` block after the call (printed with
// PrintOptions::debugInfo) restores the whole metadata.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "ir/Graph.h"
#include "support/Status.h"

namespace spmd::serialize {

/// Parses a whole program. Errors read "<source>:<line>: <what>" and name
/// the value, node or token at fault.
Expected<ir::ExportedProgram> parseProgram(std::string_view text, std::string_view source = "<text>");

/// Parses a size as Dim::str() prints it ("64", "8*s52", "max(s0, 2)");
/// `hints` gives the symbols' trace-time values for the dim's hint.
Expected<ir::Dim> parseDim(std::string_view text, const std::map<std::string, int64_t>& hints = {});

}  // namespace spmd::serialize
