// The collective ops of SPMD graphs. They live in the "spmd." namespace and
// take their mesh axis by name:
//
//   %g: f32[32, 64] = spmd.all_gather(%x, "tp", 0)          # concat shards along dim 0
//   %r: f32[32, 64] = spmd.all_reduce(%y, "tp", "sum")      # op: sum | avg | max | min
//   %s: f32[8, 64]  = spmd.reduce_scatter(%y, "tp", 0, "sum")
//   %a: f32[32, 16] = spmd.all_to_all(%y, "tp", 1, 0)       # split dim 1, concat dim 0
//   %l: f32[8, 64]  = spmd.local_slice(%x, "tp", 0)         # this rank's chunk of dim 0
//   %p: f32[32, 64] = spmd.zero_partial(%x, "tp")           # R -> P(sum): zeros except axis rank 0
//   %w: f32[32, 64] = spmd.wait(%r)                         # completes an async collective
//
// A collective issued asynchronously carries async=true and is followed by
// an spmd.wait on its result; consumers read the wait's result.
#pragma once

#include <string_view>

namespace spmd::ir {

inline constexpr std::string_view kAllGather = "spmd.all_gather";
inline constexpr std::string_view kAllReduce = "spmd.all_reduce";
inline constexpr std::string_view kReduceScatter = "spmd.reduce_scatter";
inline constexpr std::string_view kAllToAll = "spmd.all_to_all";
inline constexpr std::string_view kLocalSlice = "spmd.local_slice";
inline constexpr std::string_view kZeroPartial = "spmd.zero_partial";
inline constexpr std::string_view kWait = "spmd.wait";
/// Embedding lookup into a table whose rows (the vocabulary) are sharded:
/// rows this rank holds are looked up, others give zeros (a pending sum).
///   %e: f32[2, 16, 64] = spmd.vocab_embedding(%w, %tokens, "[S(0)]", 256)
inline constexpr std::string_view kVocabEmbedding = "spmd.vocab_embedding";

/// This rank's size of dim `dim` of a tensor whose global size there is
/// `size`, laid out as `spec` (uneven shards: torch.chunk at the rank's
/// mesh coordinates); a SymInt.
///   %local_size = spmd.local_size(5, "[S(0)]", 0)    # 2, 2, 1, 0 on ranks 0..3
inline constexpr std::string_view kLocalSize = "spmd.local_size";

/// The run-time value of a symbol of the exported program, bound from the
/// global inputs (a batch size the ranks split unevenly: its local sizes do
/// not give it back); a SymInt.
///   %s52 = spmd.global_symbol("s52")    # 3 on every rank for a batch of 3
inline constexpr std::string_view kGlobalSymbol = "spmd.global_symbol";

/// True for targets in the spmd namespace.
inline bool isSpmdOp(std::string_view target) { return target.substr(0, 5) == "spmd."; }
/// True for the four communicating collectives (not local_slice, zero_partial, wait).
inline bool isCommunicating(std::string_view target) {
  return target == kAllGather || target == kAllReduce || target == kReduceScatter || target == kAllToAll;
}

}  // namespace spmd::ir
