// Kernels of the MoE experts ops (python/spmdc_export/experts.py,
// sharding/rules/moe.cpp, docs/EXPERT_PARALLEL.md):
//
//   spmdc.moe_experts.default(x, indices, weights, w1, w2, w3)     -> each expert on its tokens, here
//   spmd.moe_experts(x, indices, weights, w1, w2, w3, "ep", 8)     -> counts, then tokens, all-to-all on
//                                                                     ep; local experts; results back
//   spmdc.moe_experts_backward.default / spmd.moe_experts_backward -> the gradients, the same way
#pragma once

#include <string_view>

#include "runtime/LocalOps.h"

namespace spmd::runtime {

/// The kernel of a MoE experts target, or null when `target` is none.
const LocalOp* findMoeOp(std::string_view target);

}  // namespace spmd::runtime
