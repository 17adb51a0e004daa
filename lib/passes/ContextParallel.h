// Context parallelism (long-context training; torchtitan's context_parallel,
// see docs/CONTEXT_PARALLEL.md): the sequence is sharded over one mesh axis
// from the user inputs on, and each attention keeps its queries sharded
// while its keys and values are all-gathered ("rotate": "allgather", the
// default, below) or rotate around the axis ("rotate": "ring":
// ContextParallelRing.h). Before propagation the all-gather form
//
//   * sets every user input whose dim 1 is the attention's length to S(1)
//     on the axis (the other user inputs to R there),
//   * gives each causal fused attention an explicit additive mask of global
//     positions (full(-inf).triu(1), replicated; propagation slices its
//     query rows with the queries) in place of is_causal, and
//   * pins each attention's queries to S(query dim) on the axis and its keys
//     and values (before the head expand and the scaling) to R there, and
//     in a train step the gradients of those keys and values to the
//     sequence shard they had (so that their sums over query shards are
//     reduce-scattered),
//
// and propagation does the rest: projections, norms, MLPs and the loss run
// on 1/cp of the sequence, an all-gather precedes each attention's keys
// and values, and their gradients (sums over the query shards) are
// reduce-scattered back in the backward.
//
//   %k = aten.add.Tensor(...)                       (cp = 2, [2, 4, 64, 16])
//   =>
//   %k_cp  = aten.alias.default(%k)  {spmd_layout: "[R]"}     # all-gather
//   %q_cp  = aten.alias.default(%q)  {spmd_layout: "[S(1)]"}  # [8, 64, 16]
//   %scores = aten.bmm.default(%q_cp, ...%k_cp...)            # [8, 32, 64] per rank
#pragma once

#include <vector>

#include "ir/Graph.h"
#include "passes/Pipeline.h"
#include "schema/PlacementSchema.h"
#include "schema/Resolve.h"
#include "support/Status.h"

namespace spmd::passes {

/// One attention of a graph, found from its forward ops.
struct AttentionSite {
  /// The fused op, or the matmul of queries and keys (eager pattern).
  ir::Node* node = nullptr;
  bool fused = false;
  /// The attention's queries as the op reads them, and their length dim.
  ir::Value* query = nullptr;
  int64_t queryDim = 0;
  /// Keys and values, traced back through views, expands, transposes and
  /// scalings to the value before them (what is gathered).
  ir::Value* key = nullptr;
  ir::Value* value = nullptr;
  /// A train step's gradients of `key` and `value` (same shapes), traced
  /// forward from the backward's matmul or fused op; null when not found.
  ir::Value* keyGrad = nullptr;
  ir::Value* valueGrad = nullptr;
  /// The keys' length.
  ir::Dim length;
};

/// The attentions of `g`: fused scaled-dot-product ops, and softmaxes over
/// the last dim between a matmul of queries and keys (through a mask add,
/// a scaling, views) and a matmul with the values. Forward ops only.
std::vector<AttentionSite> findAttention(const ir::Graph& g);

/// When `schema` asks for context parallelism: the input layouts, causal
/// masks and anchors above, and a note saying what it did. Errors name the
/// schema pointer: an axis the mesh lacks, no attention found, a sequence
/// that does not divide over the axis, a causal fused attention whose op
/// takes no mask.
Status applyContextParallel(ir::ExportedProgram& program, const schema::PlacementSchema& schema,
                            schema::ResolvedPlacements& placements, const CompileOptions& options);

}  // namespace spmd::passes
