// IR -> IR text: the form `spmdc opt` prints and parseProgram
// (FromText.h) reads back, one line per symbol, tie, input, node and output:
//
//   input %w: f32[16, 16]{requires_grad} parameter w
//   %mm: f32[s0, 16] = aten.mm.default(self=%x, mat2=%w)  # model.py:3
//   output %mm user_output
//
// ToText.cpp describes the form in full.
#pragma once

#include <string>

#include "ir/Graph.h"

namespace spmd::serialize {

/// How much of a node the IR text spells.
struct PrintOptions {
  /// Also the node's whole metadata (stack trace, module stack, torch_fn,
  /// the rest) in braces after the call; without it, only the source line.
  bool debugInfo = false;
};

/// Prints the program one line per symbol, tie, input, node and output;
/// identical across runs for the same program, and read back by
/// parseProgram (FromText.h) to a program that prints the same.
std::string printProgram(const ir::ExportedProgram& program, const PrintOptions& options = {});
/// Prints one argument as in the IR text ("%x", "[1, 0]", "-inf",
/// "sym_ints([2, 3])" where the payload alone would read as another kind).
std::string printArgument(const ir::Argument& a);
/// Prints one node line (without trailing newline): results, target, every
/// argument by name, and the source line as a trailing comment.
std::string printNode(const ir::Node& node, const PrintOptions& options = {});

}  // namespace spmd::serialize
