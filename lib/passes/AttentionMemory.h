// What ATen's fused CPU attention kernels allocate beside their operands and
// results while they run (torch 2.14.1, FlashAttentionKernel.cpp), for the
// memory estimate (passes::liveRanges):
//
//   forward   threads x (q_split x kv_split + 2 q_split + q_split x head)
//             floats, plus for bf16 a q_split x kv_split bf16 block per
//             thread and three query-sized copies;
//   backward  threads x 2 q_split x kv_split floats (bf16/f16: as many
//             more in the dtype), a q_split float row sum per busy thread,
//             and a contiguous copy of grad_out unless grad_out is the
//             [b, s, h, d] memory layout seen as [b, h, s, d].
//
// q_split is 32, 64 or 256 query rows (sequence < 192, < 768, longer) and
// kv_split min(512, keys), as the kernel picks them.
#pragma once

#include <cstdint>

#include "ir/Graph.h"

namespace spmd::passes {

/// Scratch bytes `n` allocates while it runs when it is
/// aten._scaled_dot_product_flash_attention_for_cpu or its backward and the
/// worker runs `threads` intra-op threads; 0 for any other node.
int64_t attentionScratchBytes(const ir::Node& n, int threads);

/// The intra-op threads each of `ranks` workers on one node runs under
/// spmd-run: OMP_NUM_THREADS when set (spmd-run passes it on), else this
/// machine's cores shared among the ranks, as spmd-run shares them; never
/// more than the cores (LibTorch caps its threads there).
int intraOpThreads(int64_t ranks);

}  // namespace spmd::passes
