// reshard(): every layout change of the expansion goes through here.
//
//   %addmm_1 [P(sum)] wanted [R] on mesh 8 (x):
//   %addmm_1_all_reduce: f32[32, 64] = spmd.all_reduce(%addmm_1, "x", "sum")
//
// Strided shards (S(d, sf)) that change are gathered first and sliced last
// with their split factor; those that stay are left alone while the rest
// follows sharding::planReshard's cheapest plan (which knows no split
// factors):
//
//   %view_11 [S(0,sf=2), S(2)] wanted [S(0,sf=2), R] on a 2x4 mesh:
//   %view_11_all_gather = spmd.all_gather(%view_11, "a1", 2)   (a0 untouched)
//
// Nesting is sequential, in mesh order (as sharding::localShape and the
// runtime's input sharding): axis a splits what the earlier axes left. A
// strided shard on axis a whose dim a later axis b also splits therefore
// sees only the outer rows b left it, and its collectives use the split
// factor sf / n_b:
//
//   %view_12 [R, R, S(0)] wanted [R, S(0,sf=4), S(0)] on 2x2x2, dim 0 = 4 x 8:
//   %view_12_local_slice = spmd.local_slice(%view_12, "a1", 0, split_factor=2)
//
// and where n_b does not divide sf, axis b is gathered first and split again
// after.
#include <algorithm>
#include <optional>

#include "passes/Expander.h"
#include "sharding/Reshard.h"

namespace spmd::passes::detail {
namespace {

std::vector<ir::NamedArgument> axisArg(const std::string& axis) { return {{"axis", stringArg(axis), false}}; }

/// The split factor that strided placement `p` on axis `a` of `spec` has on
/// the local tensor: later plain shards of the same dim split its outer
/// rows. 0 when they do not divide them (or a later shard is strided).
int64_t localSplitFactor(const ShardingSpec& spec, int64_t a, const Placement& p,
                         const sharding::Mesh& mesh) {
  int64_t later = 1;
  for (int64_t b = a + 1; b < mesh.numAxes(); ++b) {
    const Placement& q = spec.placements[static_cast<size_t>(b)];
    if (!q.isShard() || q.dim != p.dim) continue;
    if (q.isStrided()) return 0;
    later *= mesh.size(b);
  }
  return p.splitFactor % later == 0 ? p.splitFactor / later : 0;
}

/// Axes after `a` that shard `dim` in `spec`, last first.
std::vector<int64_t> laterShardsOf(const ShardingSpec& spec, int64_t a, int64_t dim) {
  std::vector<int64_t> out;
  for (auto b = static_cast<int64_t>(spec.placements.size()) - 1; b > a; --b) {
    const Placement& q = spec.placements[static_cast<size_t>(b)];
    if (q.isShard() && q.dim == dim) out.push_back(b);
  }
  return out;
}

}  // namespace

Expected<std::optional<Argument>> Expander::pieceSizeArg(const ir::Value& v, const ShardingSpec& spec,
                                                         int64_t axis, int64_t dim,
                                                         const ir::NodeMetadata& meta, int64_t sf) {
  const ir::Dim& whole = v.type().sizes[static_cast<size_t>(dim)];
  if (!whole.isStatic() && sf != 1) {
    if (isEvenSymbolic(whole, shardCount(spec, dim, mesh_) * sf)) return std::optional<Argument>();
    return Status::error("value '" + v.name() + "': dim " + whole.str() + " is a strided shard in " +
                         std::to_string(sf) + " rows that does not divide over mesh axis '" +
                         mesh_.axisNames()[static_cast<size_t>(axis)] +
                         "': uneven strided shards of symbolic dims are not supported; export with a "
                         "trace-time size that divides, or replicate that dim");
  }
  if (!whole.isStatic()) return symbolicPieceSizeArg(v, spec, axis, dim, meta);
  std::vector<int64_t> shape;  // other dims at their trace-time sizes: the piece is dim's alone
  for (const auto& d : v.type().sizes) shape.push_back(d.value());
  if (!sharding::checkShardable(shape, spec, mesh_).isOk()) return std::optional<Argument>();
  int64_t n = mesh_.size(axis);
  bool even = true, same = true;
  int64_t first = -1;
  for (int64_t r = 0; r < mesh_.numRanks(); ++r) {
    int64_t piece =
        sharding::pieceBefore(shape, spec, mesh_, mesh_.coords(r), axis)[static_cast<size_t>(dim)];
    even = even && piece % (n * sf) == 0;
    same = same && (first < 0 || piece == first);
    if (first < 0) first = piece;
  }
  if (even) return std::optional<Argument>();
  if (same) return std::optional<Argument>(Argument::integer(first));
  ShardingSpec earlier = spec;  // the piece: only the axes before `axis` split
  for (size_t a = static_cast<size_t>(axis); a < earlier.placements.size(); ++a)
    earlier.placements[a] = Placement::replicate();
  ir::Dim local = localDim(v.type().sizes[static_cast<size_t>(dim)], earlier, dim, mesh_);
  SPMD_ASSIGN_OR_RETURN(ir::Value * size,
                        rankLocalSize(shape[static_cast<size_t>(dim)], earlier, dim, local, meta));
  return std::optional<Argument>(Argument::symInt(size));
}

Expected<std::optional<Argument>> Expander::symbolicPieceSizeArg(const ir::Value& v, const ShardingSpec& spec,
                                                                 int64_t axis, int64_t dim,
                                                                 const ir::NodeMetadata& meta) {
  const ir::Dim& whole = v.type().sizes[static_cast<size_t>(dim)];
  if (isEvenSymbolic(whole, shardCount(spec, dim, mesh_))) return std::optional<Argument>();  // s // k
  SPMD_ASSIGN_OR_RETURN(ir::Value * global, globalSymbol(whole, "value '" + v.name() + "'", meta));
  ShardingSpec earlier = spec;  // the piece: only the axes before `axis` split
  for (size_t a = static_cast<size_t>(axis); a < earlier.placements.size(); ++a)
    earlier.placements[a] = Placement::replicate();
  if (shardCount(earlier, dim, mesh_) == 1) return std::optional<Argument>(Argument::symInt(global));
  ir::Dim local = localDim(whole, earlier, dim, mesh_);
  SPMD_ASSIGN_OR_RETURN(ir::Value * size, rankLocalSize(global, earlier, dim, local, meta));
  return std::optional<Argument>(Argument::symInt(size));
}

/// One reshard in progress: the value so far and its layout, changed one
/// emitted step at a time until the layout is the one wanted.
class Resharding {
 public:
  Resharding(Expander& e, const ir::Value& v, const ShardingSpec& want, const std::string& consumer,
             const std::string& sourceLine)
      : e_(e), mesh_(e.mesh_), v_(v), want_(want), consumer_(consumer), sourceLine_(sourceLine) {
    spec_ = e.prop_.values[static_cast<size_t>(v.id())];
    x_ = e.map_[static_cast<size_t>(v.id())];
    meta_.other["spmd_reason"] = consumer;
    elem_ = ir::elementSize(v.type().dtype);
    for (const auto& d : v.type().sizes) shape_.push_back(d.value());
    frozen_.assign(static_cast<size_t>(mesh_.numAxes()), false);
  }

  /// The value laid out as wanted, after the three steps of the file
  /// comment.
  Expected<ir::Value*> run() {
    SPMD_RETURN_IF_ERROR(gatherChangedStrided());
    SPMD_RETURN_IF_ERROR(followPlan());
    SPMD_RETURN_IF_ERROR(sliceRemaining());
    SPMD_CHECK(spec_.str() == want_.str());
    return x_;
  }

 private:
  /// Emits one op on the value so far: target, arguments after `self`, the
  /// layout after it, the new value's name suffix, the collective kind to
  /// record (null: none), the mesh axis and bytes per rank. An empty target
  /// only relabels the layout.
  Status step(const std::string& target, std::vector<ir::NamedArgument> args, const ShardingSpec& after,
              const std::string& suffix, const char* kind, int64_t axis, int64_t bytes) {
    // Every step on a size-1 axis is the identity (a gather or reduce over
    // one rank, a slice into one piece, the zeros of no other rank).
    if (target.empty() || mesh_.size(axis) == 1) {
      spec_ = after;
      return Status::ok();
    }
    args.insert(args.begin(), {"self", Argument::tensor(x_), false});
    if (target == ir::kLocalSlice && divisibleSlice(args, after))
      args.push_back({"divisible", Argument::boolean(true), true});
    SPMD_ASSIGN_OR_RETURN(x_, e_.emit(target, std::move(args), v_, after, v_.name() + "_" + suffix, meta_));
    if (kind)
      e_.records_.push_back({x_->name(), kind, mesh_.axisNames()[static_cast<size_t>(axis)], bytes, consumer_,
                             v_.name(), spec_.str(), after.str(), sourceLine_});
    spec_ = after;
    return Status::ok();
  }

  /// True when a local slice with `args` splits a symbolic dim the program
  /// splits as s // k: the slice then checks at run time that it divides
  /// (else the ranks' later collectives would disagree on sizes).
  bool divisibleSlice(const std::vector<ir::NamedArgument>& args, const ShardingSpec& after) const {
    int64_t d = 0;
    for (const auto& na : args)
      if (na.name == "dim" && !na.arg.ints.empty())
        d = sharding::normalizeDim(na.arg.ints[0], v_.type().rank());
    return d < v_.type().rank() &&
           isEvenSymbolic(v_.type().sizes[static_cast<size_t>(d)], shardCount(after, d, mesh_));
  }

  /// Emits one step of a planReshard plan, ending in layout `after`; `size`
  /// is the whole size of the dim an all-gather or all-to-all concatenates
  /// where the axis splits it unevenly.
  Status emitPlanStep(const sharding::ReshardStep& s, const ShardingSpec& after,
                      const std::optional<Argument>& size) {
    using K = sharding::CollectiveKind;
    std::vector<ir::NamedArgument> args = axisArg(mesh_.axisNames()[static_cast<size_t>(s.axis)]);
    const int64_t a = s.axis, bytes = s.bytesPerRank;
    switch (s.kind) {
      case K::AllGather:
        args.push_back({"dim", Argument::integer(s.dim), false});
        if (size) args.push_back({"size", *size, true});
        return step(std::string(ir::kAllGather), args, after, "all_gather", "all_gather", a, bytes);
      case K::AllReduce:
        args.push_back({"op", stringArg(std::string(sharding::reduceOpName(s.op))), false});
        return step(std::string(ir::kAllReduce), args, after, "all_reduce", "all_reduce", a, bytes);
      case K::ReduceScatter:
        args.push_back({"dim", Argument::integer(s.dim), false});
        args.push_back({"op", stringArg(std::string(sharding::reduceOpName(s.op))), false});
        return step(std::string(ir::kReduceScatter), args, after, "reduce_scatter", "reduce_scatter", a,
                    bytes);
      case K::AllToAll:
        args.push_back({"split_dim", Argument::integer(s.dim), false});
        args.push_back({"concat_dim", Argument::integer(s.dim2), false});
        if (size) args.push_back({"size", *size, true});
        return step(std::string(ir::kAllToAll), args, after, "all_to_all", "all_to_all", a, bytes);
      case K::LocalSlice:
        args.push_back({"dim", Argument::integer(s.dim), false});
        return step(std::string(ir::kLocalSlice), args, after, "local_slice", nullptr, a, 0);
      case K::ZeroPartial:
        return step(std::string(ir::kZeroPartial), args, after, "zero_partial", nullptr, a, 0);
      case K::MarkPartial:  // equal copies already reduce to the value: relabel only
        return step("", {}, after, "", nullptr, a, 0);
      case K::ScalePartial:
        return step("aten.mul.Tensor", {{"other", Argument::floating(s.scale), false}}, after, "scale",
                    nullptr, a, 0);
    }
    return Status::ok();
  }

  /// Rank 0's bytes of the value laid out as `s`: the largest, which
  /// collectives pad to.
  int64_t localBytes(const ShardingSpec& s) const {
    int64_t n = elem_;
    if (v_.type().isStatic() && sharding::isUneven(shape_, s, mesh_) &&
        sharding::checkShardable(shape_, s, mesh_).isOk()) {
      for (int64_t d : sharding::localShape(shape_, s, mesh_,
                                            std::vector<int64_t>(static_cast<size_t>(mesh_.numAxes()), 0)))
        n *= d;
      return n;
    }
    for (int64_t d = 0; d < static_cast<int64_t>(shape_.size()); ++d)
      n *= shape_[static_cast<size_t>(d)] / shardCount(s, d, mesh_);
    return n;
  }

  /// The split factor a gather or slice of `p` on axis `a` uses on the
  /// local tensor; first gathers the later shards of its dim where they
  /// must go (a plain shard's, or a strided one's that do not divide its
  /// rows).
  Expected<int64_t> localFactor(int64_t a, const Placement& p) {
    int64_t sf = p.isStrided() ? localSplitFactor(spec_, a, p, mesh_) : 1;
    if (sf == 0 || (!p.isStrided() && !laterShardsOf(spec_, a, p.dim).empty())) {
      for (int64_t b : laterShardsOf(spec_, a, p.dim)) SPMD_RETURN_IF_ERROR(gatherAxis(b));
      sf = p.splitFactor;
    }
    return sf;
  }

  /// Gathers the shard on axis `a`.
  Status gatherAxis(int64_t a) {
    const Placement p = spec_.placements[static_cast<size_t>(a)];
    SPMD_ASSIGN_OR_RETURN(int64_t sf, localFactor(a, p));
    ShardingSpec after = spec_;
    after.placements[static_cast<size_t>(a)] = Placement::replicate();
    auto args = axisArg(mesh_.axisNames()[static_cast<size_t>(a)]);
    args.push_back({"dim", Argument::integer(p.dim), false});
    if (sf != 1) args.push_back({"split_factor", Argument::integer(sf), true});
    SPMD_ASSIGN_OR_RETURN(auto size, e_.pieceSizeArg(v_, spec_, a, p.dim, meta_, sf));
    if (size) args.push_back({"size", *size, true});
    int64_t bytes = sharding::CostModel::bytesMoved(sharding::CollectiveKind::AllGather, mesh_.size(a),
                                                    localBytes(spec_), localBytes(after));
    return step(std::string(ir::kAllGather), std::move(args), after, "all_gather", "all_gather", a, bytes);
  }

  /// Slices placement `p` out of the replicated axis `a` (the caller splits
  /// the later shards localFactor gathered again).
  Status sliceAxis(int64_t a, const Placement& p) {
    SPMD_ASSIGN_OR_RETURN(int64_t sf, localFactor(a, p));
    ShardingSpec after = spec_;
    after.placements[static_cast<size_t>(a)] = p;
    auto args = axisArg(mesh_.axisNames()[static_cast<size_t>(a)]);
    args.push_back({"dim", Argument::integer(p.dim), false});
    if (sf != 1) args.push_back({"split_factor", Argument::integer(sf), true});
    return step(std::string(ir::kLocalSlice), std::move(args), after, "local_slice", nullptr, a, 0);
  }

  /// 1. Strided shards that must change are gathered first. Those the
  /// target keeps are frozen: the planner sees them as plain S(d) on both
  /// ends (so it keeps other axes' steps on d valid around them) and must
  /// leave their axes alone.
  Status gatherChangedStrided() {
    for (int64_t a = 0; a < mesh_.numAxes(); ++a) {
      const Placement& p = spec_.placements[static_cast<size_t>(a)];
      if (!p.isStrided()) continue;
      if (p == want_.placements[static_cast<size_t>(a)])
        frozen_[static_cast<size_t>(a)] = true;
      else
        SPMD_RETURN_IF_ERROR(gatherAxis(a));
    }
    return Status::ok();
  }

  /// The cheapest plan to the target with the frozen strided shards plain
  /// and the other strided targets replicated (step 3 slices them).
  Expected<sharding::ReshardPlan> planFor() const {
    ShardingSpec from = spec_, to = want_;
    for (size_t a = 0; a < to.placements.size(); ++a) {
      if (frozen_[a])
        from.placements[a] = to.placements[a] = Placement::shard(want_.placements[a].dim);
      else if (to.placements[a].isStrided())
        to.placements[a] = Placement::replicate();
    }
    return sharding::planReshard(shape_, elem_, from, to, mesh_, e_.in_.cost);
  }

  /// 2. Follows that plan; a plan that would touch a frozen axis gathers
  /// the frozen shards first and plans again.
  Status followPlan() {
    auto plan = planFor();
    if (plan && std::any_of(plan->steps.begin(), plan->steps.end(), [&](const sharding::ReshardStep& s) {
          return frozen_[static_cast<size_t>(s.axis)];
        })) {
      for (int64_t a = 0; a < mesh_.numAxes(); ++a)
        if (frozen_[static_cast<size_t>(a)]) SPMD_RETURN_IF_ERROR(gatherAxis(a));
      std::fill(frozen_.begin(), frozen_.end(), false);
      plan = planFor();
    }
    if (!plan) return plan.status().withContext("value '" + v_.name() + "' needed by " + consumer_);
    using K = sharding::CollectiveKind;
    for (const sharding::ReshardStep& s : plan->steps) {
      ShardingSpec after = s.after;  // with the frozen strided shards put back
      for (size_t a = 0; a < after.placements.size(); ++a)
        if (frozen_[a]) after.placements[a] = want_.placements[a];
      std::optional<Argument> size;
      if (s.kind == K::AllGather || s.kind == K::AllToAll) {
        SPMD_ASSIGN_OR_RETURN(
            size, e_.pieceSizeArg(v_, spec_, s.axis, s.kind == K::AllGather ? s.dim : s.dim2, meta_));
      }
      SPMD_RETURN_IF_ERROR(emitPlanStep(s, after, size));
    }
    return Status::ok();
  }

  /// 3. What the plan left replicated (strided targets, and shards gathered
  /// to slice them) is sliced, in mesh order.
  Status sliceRemaining() {
    for (int64_t a = 0; a < mesh_.numAxes(); ++a) {
      const Placement& p = want_.placements[static_cast<size_t>(a)];
      if (spec_.placements[static_cast<size_t>(a)] == p) continue;
      SPMD_CHECK(spec_.placements[static_cast<size_t>(a)].isReplicate());
      SPMD_RETURN_IF_ERROR(sliceAxis(a, p));
    }
    return Status::ok();
  }

  Expander& e_;
  const sharding::Mesh& mesh_;
  const ir::Value& v_;
  const ShardingSpec& want_;
  const std::string& consumer_;
  const std::string& sourceLine_;
  ShardingSpec spec_;           ///< the layout of x_
  ir::Value* x_ = nullptr;      ///< the value so far
  ir::NodeMetadata meta_;       ///< every emitted node's: spmd_reason
  int64_t elem_ = 0;            ///< bytes per element
  std::vector<int64_t> shape_;  ///< global sizes (trace-time hints for symbols)
  std::vector<bool> frozen_;    ///< axes whose strided shard stays as it is
};

Expected<ir::Value*> Expander::reshard(const ir::Value& v, const ShardingSpec& want,
                                       const std::string& consumer, const std::string& sourceLine) {
  const ShardingSpec& cur = prop_.values[static_cast<size_t>(v.id())];
  ir::Value* x = map_[static_cast<size_t>(v.id())];
  SPMD_CHECK(x != nullptr);
  if (cur == want) return x;
  auto key = std::make_pair(v.id(), want.str());
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  if (v.type().isStatic()) {  // an uneven split of strided runs is no layout
    std::vector<int64_t> global;
    for (const auto& d : v.type().sizes) global.push_back(d.value());
    Status ok = sharding::checkShardable(global, want, mesh_);
    if (!ok.isOk())
      return ok.withContext("value '" + v.name() + "' needed by " + consumer + " as " + want.str());
  }
  SPMD_ASSIGN_OR_RETURN(x, Resharding(*this, v, want, consumer, sourceLine).run());
  cache_.emplace(key, x);
  return x;
}

}  // namespace spmd::passes::detail
