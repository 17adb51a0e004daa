// Kernels of the MoE experts ops (python/spmdc_export/experts.py,
// sharding/rules/moe.cpp, docs/EXPERT_PARALLEL.md):
//
//   spmdc.moe_experts.default(x, indices, weights, w1, w2, w3)     -> each expert on its tokens, here
//   spmd.moe_experts(x, indices, weights, w1, w2, w3, "ep", 8)     -> counts, then tokens, all-to-all on
//                                                                     ep; local experts; results back
//   spmdc.moe_experts_backward.default / spmd.moe_experts_backward -> the gradients, the same way
//
// The forward ops take `replicas` (str[]?, default None): the mesh axes over
// which the tokens are replicated (tp inside the experts), so that one rank
// of each replica set counts tokens per expert. w1, w2, w3 may hold a slice
// of the FFN dim (expert TP): the results are then partial sums.
#pragma once

#include <string_view>

#include "runtime/LocalOps.h"

namespace spmd::runtime {

/// The kernel of a MoE experts target, or null when `target` is none.
const LocalOp* findMoeOp(std::string_view target);

}  // namespace spmd::runtime
