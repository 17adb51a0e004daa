// Executor tests write their graphs as IR text (docs/IR text form, the one
// `spmdc opt` prints):
//
//   ir::ExportedProgram p = programFromText(R"(
//     input %x: f32[2, 3] user_input
//     %relu: f32[2, 3] = aten.relu.default(self=%x)
//     output %relu user_output
//   )");
#pragma once

#include <string_view>

#include "../TestCatch.h"
#include "ir/Graph.h"
#include "serialize/FromText.h"

namespace spmd::runtime::test {

/// Parses `text` as a program; a parse error fails the test with its line.
inline ir::ExportedProgram programFromText(std::string_view text) {
  Expected<ir::ExportedProgram> p = serialize::parseProgram(text, "test.ir");
  if (!p) FAIL(p.status().message());
  return std::move(p).value();
}

}  // namespace spmd::runtime::test
