// Kernels of the ring-attention ops (passes/ContextParallel.cpp,
// sharding/rules/ring_attention.cpp, docs/CONTEXT_PARALLEL.md):
//
//   spmdc.ring_attention.default(q, k, v, scale, causal[, mask])  -> (out, lse), one rank: plain attention
//   spmd.ring_attention(q, k, v, scale, causal, "cp"[, mask])     -> (out, lse), keys and values rotate
//                                                                    around the cp ring
//   spmdc.ring_attention_backward.default / spmd.ring_attention_backward
//     (grad_out, q, k, v, out, lse, scale, causal[, axis][, mask]) -> (dq, dk, dv), the matching ring
//
// q [B, H, L, D], k [B, H, S, D], v [B, H, S, Dv], mask additive (or bool)
// and broadcastable to [B, H, L, S]; lse [B, H, L] float32.
#pragma once

#include <string_view>

#include "runtime/LocalOps.h"

namespace spmd::runtime {

/// The kernel of a ring-attention target, or null when `target` is none.
const LocalOp* findRingAttentionOp(std::string_view target);

}  // namespace spmd::runtime
