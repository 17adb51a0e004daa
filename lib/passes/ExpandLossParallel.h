// Loss parallelism: cross-entropy on vocab-sharded logits without gathering
// them (DTensor's loss_parallel, offline). See ExpandLossParallel.cpp and
// docs/LOSS_PARALLEL.md.
#pragma once

#include <string>
#include <vector>

#include "passes/Expander.h"

namespace spmd::passes {

namespace detail {

/// The expansion of the ops whose class dim the propagation left sharded:
/// `_log_softmax` and `_log_softmax_backward_data` (a max and a sum
/// all-reduce of [N, 1] per axis), `gather` with one index per row (a
/// masked pick, pending sum) and `scatter.value` / `scatter.src` with one
/// index per row (a masked write). Positions are compared by global index,
/// from each rank's chunk of the dim, so uneven chunks need no change here.
struct LossParallel {
  /// Expands `n` (operands already local in `args`, in the layouts of `ns`)
  /// when it is one of those ops with its dim sharded; false (nothing
  /// emitted) otherwise. Errors name the node.
  static Expected<bool> expand(Expander& e, const ir::Node& n, const sharding::NodeSharding& ns,
                               const std::vector<ir::NamedArgument>& args);
  /// The one-hot gradient's row sum (sharding/rules/LossPattern.h) with its
  /// dim sharded: the per-row factor times the written value, no all-reduce.
  static Expected<bool> rowSum(Expander& e, const ir::Node& n, const sharding::NodeSharding& ns);
  /// Emits the local ops of one such node (ExpandLossParallel.cpp).
  class Emitter;
};

}  // namespace detail

/// Report notes on the log-softmax of each cross-entropy in `source` whose
/// logits are produced sharded on their class dim: that it runs on the
/// shards (and the bytes of the gather it saves), or why the logits are
/// gathered instead (a spelling or layout the expansion does not handle).
std::vector<std::string> lossParallelNotes(const ir::ExportedProgram& source,
                                           const sharding::Propagation& prop, const sharding::Mesh& mesh);

}  // namespace spmd::passes
