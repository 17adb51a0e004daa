// Ring attention for context parallelism ("rotate": "ring",
// docs/CONTEXT_PARALLEL.md): every attention of the graph becomes one op
// pair whose kernels (runtime/RingAttentionOps.cpp) rotate key/value
// blocks around the cp axis:
//
//   eager pattern (a train step's joint graph):
//     %bmm = bmm(%q3, %kt3); ... div 2.83; add %mask; _softmax; ...; %bmm_1 = bmm(%p3, %v3)
//     (backward: bmm(permute(%p3), %go3), bmm(permute(%q3), %ds3), bmm(%ds3, permute(%kt3)))
//   =>
//     %q4 = view(%q3, [B, H, L, D]); %k4 = permute(view(%kt3, [B, H, D, S]), [0, 1, 3, 2]); %v4 = ...
//     %ring, %ring_lse = spmdc.ring_attention.default(%q4, %k4, %v4, mask=%mask, scale=0.35)
//     %ring_bwd{,_1,_2} = spmdc.ring_attention_backward.default(view(%go3), %q4, %k4, %v4, ...)
//     (the old scores, softmax and their backward are erased)
//
//   fused ops: aten.scaled_dot_product_attention and the CPU flash op and
//   its backward map onto the pair one to one (is_causal -> causal).
//
// Then the queries, keys and values the ring ops read are pinned to
// S(length dim) on the axis (anchors), which asks for the ring's split.
#pragma once

#include <string>
#include <vector>

#include "ir/Graph.h"
#include "passes/Pipeline.h"
#include "schema/PlacementSchema.h"
#include "schema/Resolve.h"
#include "support/Status.h"

namespace spmd::passes {

/// How many attentions became ring ops (and how many of those were fused
/// ops). Errors (one line, naming the node): an attention the ring cannot
/// take (dropout, grouped-query heads in a fused op, queries and keys of
/// different lengths, a scores chain other than scalings and one additive
/// mask, a backward found only in part).
struct RingCount {
  int attentions = 0;
  int fused = 0;
};
Expected<RingCount> applyRingAttention(ir::ExportedProgram& program, const schema::PlacementSchema& schema,
                                       const schema::ResolvedPlacements& placements,
                                       const CompileOptions& options, int64_t axis);

namespace detail {
/// Helpers shared with ContextParallel.cpp.
ir::Value* tensorInput(const ir::Node& n, std::string_view name);
bool isSoftmax(const std::string& t);
bool isFused(const std::string& t);
bool isBackward(const std::string& t);
bool isViewLike(const std::string& t);
/// The first matmul reading the probabilities `probs` as its left operand.
ir::Node* valuesMatmul(ir::Value* probs);
}  // namespace detail

}  // namespace spmd::passes
