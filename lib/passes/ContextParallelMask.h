// The causal mask recognizer of ring attention (docs/CONTEXT_PARALLEL.md,
// "Ring attention"): an additive mask the ring op's causal flag can say
// instead, so that its kernels skip the key/value blocks it masks whole.
//
// Recognized, over L = S (top-left aligned, torch's is_causal):
//   where(key - query <= 0, 0, -inf)           torch's SDPA decomposition
//   full(-inf).triu(1)                         and its decomposition
//   where(key - query >= 1, -inf, 0)
//   where(full(true) & (key <= query) & packed, 0, -inf)   [B, 1, L, S]
//     Hugging Face's causal mask (transformers' sdpa_mask, through the SDPA
//     decomposition), where `packed` is its packed-sequence check
//     eq(seq_id[b, q], seq_id[b, kv]) over seq_id = cumsum(diff(positions,
//     prepend=positions[:, :1] - 1) != 1): all true when the positions are
//     built in the graph as arange(n) (a position_ids input keeps the mask).
// key and query are aranges of S and L (through views, unsqueezes and
// `+ 0`) on the last and the second-to-last dim; -inf may be the mask
// dtype's lowest finite value (transformers' eager mask).
#pragma once

#include <cstdint>
#include <optional>

#include "ir/Graph.h"

namespace spmd::passes::detail {

/// The value of a scalar (int or float) argument; nullopt for anything else.
std::optional<double> scalarOf(const ir::Argument* a);

/// True when `m` (an additive mask broadcastable to [.., l, s], last two
/// dims exactly [l, s]) is one of the causal masks above, built in the
/// graph from constants: -inf where key > query, 0 elsewhere.
bool isCausalMask(const ir::Value* m, int64_t l, int64_t s);

}  // namespace spmd::passes::detail
