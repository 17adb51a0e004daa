// The redistribution planner: every change of layout goes through here.
//
//   Mesh mesh = *Mesh::create({2, 4}, {"dp", "tp"});
//   ShardingSpec from{{Placement::partial(), Placement::shard(0)}};   // [P(sum), S(0)]
//   ShardingSpec to{{Placement::shard(1), Placement::replicate()}};   // [S(1), R]
//   ReshardPlan plan = *planReshard({64, 32}, 4, from, to, mesh, CostModel());
//   plan.str() ==   // reduce-scatter first: the all-gather then moves less
//     "reduce_scatter(axis=0, op=sum, dim=1) [P(sum), S(0)] -> [S(1), S(0)]\n"
//     "all_gather(axis=1, dim=0) [S(1), S(0)] -> [S(1), R]"
//
// Meaning of a spec (DTensor's, made precise for nesting): the tensor is laid
// out along mesh axis 0 first, then each piece along axis 1, and so on. Axes
// that shard the same dim split it in axis order; partial axes reduce in the
// reverse order (the last partial axis first), which only matters when their
// ops do not commute (sum/avg vs max vs min).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sharding/CostModel.h"
#include "sharding/Placement.h"
#include "support/Status.h"

namespace spmd::sharding {

/// One collective or local step along one mesh axis. Its group is every set
/// of ranks whose mesh coordinates differ only along `axis`, ordered by that
/// coordinate.
struct ReshardStep {
  /// What to do (see CollectiveKind).
  CollectiveKind kind = CollectiveKind::AllGather;
  /// The mesh axis the step's groups span.
  int64_t axis = 0;
  /// Placement along `axis` before and after the step.
  Placement from, to;
  /// AllGather: the dim concatenated; ReduceScatter and LocalSlice: the dim
  /// split; AllToAll: the dim split and sent out (the new shard dim); else -1.
  int64_t dim = -1;
  /// AllToAll: the dim received pieces are concatenated along (the old shard
  /// dim); else -1.
  int64_t dim2 = -1;
  /// AllReduce, ReduceScatter: the reduction (Avg = sum, then divide by the
  /// group size). ZeroPartial, MarkPartial, ScalePartial: the op of the
  /// partial produced.
  ReduceOp op = ReduceOp::Sum;
  /// ScalePartial: the factor every rank multiplies its tensor by (group size
  /// for P(sum) -> P(avg), its inverse for P(avg) -> P(sum)); else 1.
  double scale = 1.0;
  /// Bytes each rank sends (CostModel::bytesMoved); 0 for local steps.
  int64_t bytesPerRank = 0;
  /// Estimated seconds (CostModel::cost).
  double cost = 0.0;
  /// The whole spec before and after the step (shard dims normalized).
  ShardingSpec before, after;
  /// One rank's tensor shape before and after the step.
  std::vector<int64_t> localShapeBefore, localShapeAfter;

  /// "all_gather(axis=1, dim=0) [S(0), S(0)] -> [S(0), R]".
  std::string str() const;
};

/// A sequence of steps that turns one layout into another, in order.
struct ReshardPlan {
  /// The steps, executed one after the other on every rank.
  std::vector<ReshardStep> steps;
  /// The sum of the steps' costs, in seconds.
  double cost = 0.0;

  /// True when nothing needs to be done.
  bool empty() const { return steps.empty(); }
  /// One step per line (ReshardStep::str()); "" for an empty plan.
  std::string str() const;
};

/// The cheapest plan (by `cost`) turning a tensor of `globalShape` with
/// elements of `elementBytes` laid out as `from` into the layout `to` on
/// `mesh`. Transitions per axis: S->R all-gather, P->R all-reduce, P->S
/// reduce-scatter, S(i)->S(j) all-to-all, R->S local slice, R->P(sum) zeros
/// on all axis coordinates but 0, R->P(avg|max|min) relabel, P(sum)<->P(avg)
/// local scale; S->P and other P->P go through R. Shard dims may be negative.
/// Error when a spec does not fit the mesh or tensor, or a strided shard
/// does not divide evenly (checkShardable): the message names dim, size and
/// axis. Plain shards may split unevenly (torch.chunk); steps then move the
/// largest rank's bytes (collectives pad to the chunk). Identical specs give
/// an empty plan with cost 0. A partial on an axis whose link is reduceFirst
/// (and that `to` does not keep partial) is reduced before any step on
/// another axis, unless no plan can do that.
Expected<ReshardPlan> planReshard(const std::vector<int64_t>& globalShape, int64_t elementBytes,
                                  const ShardingSpec& from, const ShardingSpec& to, const Mesh& mesh,
                                  const CostModel& cost = CostModel());

}  // namespace spmd::sharding
