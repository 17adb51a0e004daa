// `spmdc diff`: a readable structural diff of two compiled programs.
//
//   mesh: 8 (x) -> 2x4 (dp, tp)
//   input %x: [S(0)] -> [S(0), R]
//   output 0 (%all_reduce user_output): [R] -> [S(0)]
//   - %all_reduce: f32[32, 256] = spmd.all_reduce(%addmm_1, "x", "sum")
//   + %all_gather: f32[32, 256] = spmd.all_gather(%addmm_1, "x", 0)
//   ~ %relu:
//       - %relu: f32[32, 256] = aten.relu.default(%all_reduce)
//       + %relu: f32[32, 256] = aten.relu.default(%all_gather)
//   collective all_gather: 0 -> 1
//   collective all_reduce: 1 -> 0
//   weight fc1.weight: [S(0)] -> [S(1)]
//
// Nodes are matched by name; inputs by signature name, outputs by position,
// weights by FQN. Sections come in the order above; each list follows
// program order (collectives: sorted by kind), so the text is stable.
#pragma once

#include <string>

#include "program/Program.h"

namespace spmd::program {

/// The outcome of diffPrograms.
struct DiffResult {
  /// True when no difference was found (then `text` is empty).
  bool same = true;
  /// One line per difference (see the example above), newline-terminated.
  std::string text;
};

/// Compares `a` (before) with `b` (after): mesh, input/output placements
/// and presence, nodes added/removed/changed (by printed line), collective
/// counts per kind, weights added/removed and weight specs.
DiffResult diffPrograms(const Program& a, const Program& b);

}  // namespace spmd::program
