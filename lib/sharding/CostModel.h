// The alpha-beta cost of the collectives a reshard issues.
//
//   CostModel cm;                                    // 10 us, 100 GB/s per axis
//   cm.setAxisLink(0, {25e-6, 25e9});                // axis 0 crosses nodes
//   // all-gather over 4 ranks of 1 MiB shards (4 MiB gathered):
//   CostModel::bytesMoved(CollectiveKind::AllGather, 4, 1 << 20, 4 << 20)  // 3 MiB
//   cm.cost(CollectiveKind::AllGather, 1, 4, 1 << 20, 4 << 20)  // 10e-6 + 3 MiB / 100e9
//
// A collective on a group of n ranks costs alpha + bytesMoved / bandwidth,
// where (alpha, bandwidth) belong to the mesh axis it runs on and bytesMoved
// is what each rank sends in the ring algorithm (B = the larger of one rank's
// local tensor before and after):
//   all-gather      (n-1)/n * B        (B = gathered local tensor)
//   reduce-scatter  (n-1)/n * B        (B = local tensor before scattering)
//   all-reduce    2*(n-1)/n * B
//   all-to-all      (n-1)/n * B        (B = one rank's local tensor; the
//                                       same as (n-1)/n * full / n)
// Local steps (slice, zeroing, scaling, relabelling) move nothing and cost
// bytesTouched / localBandwidth with no alpha: nearly free, never negative.
// Any step on an axis of size 1 moves nothing and costs 0.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "sharding/Placement.h"
#include "support/Status.h"

namespace spmd::sharding {

/// One step of a redistribution along one mesh axis.
enum class CollectiveKind : uint8_t {
  AllGather,      ///< S(d) -> R: concatenate the group's shards along d.
  AllReduce,      ///< P(op) -> R: reduce the group's tensors (avg: sum / n).
  ReduceScatter,  ///< P(op) -> S(d): reduce, then keep this rank's chunk of d.
  AllToAll,       ///< S(i) -> S(j): split along j, exchange, concatenate along i.
  LocalSlice,     ///< R -> S(d): keep this rank's chunk of d; no communication.
  ZeroPartial,    ///< R -> P(sum): axis coordinate 0 keeps the value, others zero.
  MarkPartial,    ///< R -> P(avg|max|min): data unchanged (equal copies reduce to it).
  ScalePartial,   ///< P(sum) <-> P(avg): multiply the local tensor by a constant.
};

/// "all_gather", "all_reduce", "reduce_scatter", "all_to_all", "local_slice",
/// "zero_partial", "mark_partial", "scale_partial".
std::string_view collectiveKindName(CollectiveKind kind);

/// True for the kinds that need no communication.
bool isLocalStep(CollectiveKind kind);

/// Latency and bandwidth of the links of one mesh axis.
struct LinkCost {
  /// Fixed cost of one collective, in seconds.
  double alphaSeconds = 10e-6;
  /// Bytes per second each rank can send.
  double bytesPerSecond = 100e9;
  /// A partial on this axis is reduced before any step on another axis
  /// (a pipeline's microbatch axis: its all-reduce is the gradient
  /// accumulation, and a step before it would run once per microbatch).
  bool reduceFirst = false;
};

/// Alpha-beta cost of collectives, with one LinkCost per mesh axis.
class CostModel {
 public:
  /// Bandwidth of local memory traffic (slicing, zeroing), bytes per second.
  static constexpr double kDefaultLocalBytesPerSecond = 1e12;

  /// Every axis uses `defaultLink` until setAxisLink overrides it.
  explicit CostModel(LinkCost defaultLink = {}, double localBytesPerSecond = kDefaultLocalBytesPerSecond);

  /// Gives mesh axis `axis` (>= 0) its own link.
  void setAxisLink(int64_t axis, LinkCost link);
  /// Gives the mesh axis named `name` its own link; error when `mesh` has no
  /// such axis.
  Status setAxisLink(const Mesh& mesh, std::string_view name, LinkCost link);
  /// The link of mesh axis `axis` (its override, else the default).
  const LinkCost& axisLink(int64_t axis) const;

  /// Bytes each rank sends for `kind` on a group of `groupSize` ranks whose
  /// local tensor is `bytesIn` before and `bytesOut` after (see the top).
  static int64_t bytesMoved(CollectiveKind kind, int64_t groupSize, int64_t bytesIn, int64_t bytesOut);

  /// Seconds that step takes on mesh axis `axis`; >= 0, and 0 when
  /// groupSize is 1.
  double cost(CollectiveKind kind, int64_t axis, int64_t groupSize, int64_t bytesIn, int64_t bytesOut) const;

 private:
  LinkCost default_;
  double localBytesPerSecond_;
  std::vector<std::pair<bool, LinkCost>> axes_;  // (overridden, link) per axis
};

}  // namespace spmd::sharding
