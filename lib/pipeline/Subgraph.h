// A graph made of some of another graph's nodes: the values they read from
// outside become its inputs, the values asked for its outputs.
//
//   graph: %a = mm(%x, %w); %b = relu(%a); %c = add(%b, %y)
//   extractSubgraph(graph, {relu, add}, {%c})
//     -> inputs (a, y), outputs (c): %b = relu(%a); %c = add(%b, %y)
#pragma once

#include <string>
#include <vector>

#include "ir/Graph.h"
#include "support/Status.h"

namespace spmd::pipeline {

/// A subgraph and the names (in the source graph) of its inputs and outputs.
struct Subgraph {
  ir::Graph graph;
  /// Names of the values read from outside, in order of first read.
  std::vector<std::string> inputs;
  /// Names of the outputs, as asked.
  std::vector<std::string> outputs;
};

/// Copies `nodes` (in the order given, which must respect their data flow)
/// into a new graph whose inputs are the values they read but do not define
/// (names and types kept) and whose outputs are `outputs` (values defined by
/// `nodes`, or else passed through from an input).
Expected<Subgraph> extractSubgraph(const std::vector<const ir::Node*>& nodes,
                                   const std::vector<const ir::Value*>& outputs);

}  // namespace spmd::pipeline
