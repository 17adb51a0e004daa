// Repeated layers folded away, so that the quick model prices a 32-layer
// model like a 2-layer one plus its boundary.
//
//   llama_deep_train: parameters model.layers.<k>.{attn_norm, wq, ..., w3}.weight,
//   k = 0..31; the forward repeats every 109 nodes, the backward every -166
//   (layer k+1's backward comes before layer k's):
//     foldLayers(program, 2)  -> the train step of the same model with layers
//                                0 and 1: layers 2..31 removed, the final norm
//                                reads layer 1's output, layer 1's backward
//                                reads the gradient the head's backward made
//   cost(32) = cost(2) + 30 * (cost(3) - cost(2))   (QuickModel)
//
// A stack is found from the stored inputs' FQNs: `<prefix>.<k>.<rest>` for
// k = 0..L-1, every k with the same rests. Each use of a layer's parameter
// lies a fixed number of nodes (the period) after the same use in the layer
// before; each period is one part of the program (forward, backward). The
// layer windows of a part repeat node for node (target, constant arguments,
// result types), and every operand of a node in layer k+1 is the twin of the
// node's operand in layer k, the same value from outside the stack, or (at
// either end of the chain) the value the chain enters or leaves by. Anything
// else, and the program is not folded. The first layer may differ (it may
// compute what all layers reuse, like the sizes of a dynamic batch): then
// layers 1..L-1 are the stack, and layer 0 is kept as part of the rest.
#pragma once

#include <optional>
#include <string>

#include "ir/Graph.h"
#include "support/Status.h"

namespace spmd::autoshard {

/// What foldLayers() removed.
struct FoldedStack {
  std::string prefix;  ///< "model.layers"
  int layers = 0;      ///< in the program before
  int kept = 0;        ///< the first `kept` layers remain
};

/// Keeps only the first `keep` (>= 1) layers of the largest stack of
/// identical layers in `program` (a forward or a train step, before the
/// optimizer is appended): the nodes, gradient outputs and stored inputs of
/// layers keep..L-1 are removed and the chain is rewired around them. Errors
/// (the program is then unchanged): no stored inputs form a stack of more
/// than keep + 1 layers, or its layers do not repeat as the file comment
/// says.
Expected<FoldedStack> foldLayers(ir::ExportedProgram& program, int keep);

/// The prefix of the largest stack of layers in `program`'s stored inputs
/// (`<prefix>.<k>.<rest>` as above: "model.layers"), whether or not the
/// layers repeat node for node; nullopt when none.
std::optional<std::string> layerStackPrefix(const ir::ExportedProgram& program);

}  // namespace spmd::autoshard
