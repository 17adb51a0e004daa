// What ring attention sends, what it costs, and "rotate": "auto"
// (docs/CONTEXT_PARALLEL.md): the figures of one spmd.ring_attention node
// (runtime/RingAttentionOps.cpp) on its local shapes, for the report and
// the cost model, and the choice between the ring and the all-gather form
// by the modeled step time and peak memory of both compiled programs.
//
//   // spmd.ring_attention(q, k, v, ..., axis="cp") with k, v [2, 4, 32, 16] on cp 2
//   ringTraffic(node, mesh)->sends == 1;          // cp - 1 key/value exchanges
//   ringTraffic(node, mesh)->bytesPerRank == 32768; // (cp - 1) (|k| + |v|) float32
//   // its backward: 3 sends (cp - 1 of keys and values, cp of dK and dV), 98,304 B
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ir/Graph.h"
#include "passes/LayoutCost.h"
#include "passes/Pipeline.h"
#include "sharding/Placement.h"

namespace spmd::passes {

/// The point-to-point traffic of one ring-attention node, per rank.
struct RingTraffic {
  int64_t axis = -1;  ///< mesh axis index
  bool backward = false;
  /// Exchanges each rank posts (one send to the next rank, one receive from
  /// the previous): forward cp - 1 (keys and values), backward 2 cp - 1
  /// (cp - 1 of keys and values, cp of the travelling dK and dV).
  int64_t sends = 0;
  /// Bytes each rank sends: (cp - 1) x bytesPerSend, backward plus
  /// cp x gradBytesPerSend.
  int64_t bytesPerRank = 0;
  /// One exchange of keys and values, in their dtype: (|k| + |v|) x its
  /// element size (as torch's ring, which rotates K and V as they are).
  int64_t bytesPerSend = 0;
  /// Backward: one exchange of the travelling dK and dV, accumulated and
  /// sent in float32 (torch's convert_to_f32): (|k| + |v|) x 4.
  int64_t gradBytesPerSend = 0;
};

/// The traffic of `node` when it is spmd.ring_attention or
/// spmd.ring_attention_backward on an axis of `mesh` of size > 1; nothing
/// for any other node.
std::optional<RingTraffic> ringTraffic(const ir::Node& node, const sharding::Mesh& mesh);

/// FLOPs of a ring-attention node on the slowest rank: every key block
/// (cp of them) against the rank's queries; backward 2.5x the forward.
double ringFlops(const ir::Node& node, const sharding::Mesh& mesh);

/// Bytes the kernels of a ring-attention node move in local memory on the
/// slowest rank: per key block its [L/cp, S/cp] float32 scores, passed over
/// 10 times forward and 14 times backward, plus the operands and results.
double ringBytes(const ir::Node& node, const sharding::Mesh& mesh);

/// Seconds of the ring's exchanges left exposed by the block compute they
/// overlap: max(0, sends x alpha + bytesPerRank / bandwidth - compute).
double ringExposedSeconds(const RingTraffic& t, double computeSeconds, const sharding::LinkCost& link);

/// Compiles `archive` under a schema whose "context_parallel" asks for
/// "rotate": "auto": once with the ring and once with the all-gather form
/// (the archive's model re-read for the second), and keeps the program
/// that fits `options.memoryBudget` (when given) with the lower modeled
/// step time (modelLayout on the built-in profile); the all-gather form
/// when the ring cannot take the model's attentions. Adds a note saying
/// which was chosen and both figures. Errors: the model's file cannot be
/// re-read; neither form fits the budget (both peaks named), or the ring
/// cannot take the model and the all-gather form does not fit it.
Expected<CompileResult> compileAutoRotate(pt2::Archive& archive, const schema::PlacementSchema& schema,
                                          const CompileOptions& options);

}  // namespace spmd::passes
