// reshard(): every layout change of the expansion goes through here.
//
//   %addmm_1 [P(sum)] wanted [R] on mesh 8 (x):
//   %addmm_1_all_reduce: f32[32, 64] = spmd.all_reduce(%addmm_1, "x", "sum")
//
// Strided shards (S(d, sf)) are gathered first and sliced last with their
// split factor; the rest follows sharding::planReshard's cheapest plan.
#include "passes/Expander.h"
#include "sharding/Reshard.h"

namespace spmd::passes::detail {
namespace {

std::vector<ir::NamedArgument> collectiveArgs(ir::Value* x, const std::string& axis) {
  return {{"self", Argument::tensor(x), false}, {"axis", stringArg(axis), false}};
}

}  // namespace

Expected<ir::Value*> Expander::reshard(const ir::Value& v, const ShardingSpec& want,
                                       const std::string& consumer, const std::string& sourceLine) {
  const ShardingSpec& cur = prop_.values[static_cast<size_t>(v.id())];
  ir::Value* x = map_[static_cast<size_t>(v.id())];
  SPMD_CHECK(x != nullptr);
  if (cur == want) return x;
  auto key = std::make_pair(v.id(), want.str());
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;

  ShardingSpec spec = cur;
  ir::NodeMetadata meta;
  meta.other["spmd_reason"] = consumer;
  auto step = [&](const std::string& target, std::vector<ir::NamedArgument> args, const ShardingSpec& after,
                  const std::string& suffix, const char* kind, int64_t axis, int64_t bytes) -> Status {
    SPMD_ASSIGN_OR_RETURN(x, emit(target, std::move(args), v, after, v.name() + "_" + suffix, meta));
    if (kind)
      records_.push_back({x->name(), kind, mesh_.axisNames()[static_cast<size_t>(axis)], bytes, consumer,
                          v.name(), spec.str(), after.str(), sourceLine});
    spec = after;
    return Status::ok();
  };
  int64_t elem = ir::elementSize(v.type().dtype);
  std::vector<int64_t> shape;
  for (const auto& d : v.type().sizes) shape.push_back(d.value());
  auto localBytes = [&](const ShardingSpec& s) {
    int64_t n = elem;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      n *= shape[static_cast<size_t>(d)] / shardCount(s, d, mesh_);
    return n;
  };

  // 1. Strided shards that must change are gathered first.
  for (int64_t a = 0; a < mesh_.numAxes(); ++a) {
    const Placement& p = spec.placements[static_cast<size_t>(a)];
    if (!p.isStrided() || p == want.placements[static_cast<size_t>(a)]) continue;
    ShardingSpec after = spec;
    after.placements[static_cast<size_t>(a)] = Placement::replicate();
    auto args = collectiveArgs(x, mesh_.axisNames()[static_cast<size_t>(a)]);
    args.push_back({"dim", Argument::integer(p.dim), false});
    args.push_back({"split_factor", Argument::integer(p.splitFactor), true});
    int64_t bytes = sharding::CostModel::bytesMoved(sharding::CollectiveKind::AllGather, mesh_.size(a),
                                                    localBytes(spec), localBytes(after));
    SPMD_RETURN_IF_ERROR(
        step(std::string(ir::kAllGather), std::move(args), after, "all_gather", "all_gather", a, bytes));
  }
  // 2. The cheapest plan to the target with strided targets replicated.
  ShardingSpec plain = want;
  for (auto& p : plain.placements)
    if (p.isStrided()) p = Placement::replicate();
  auto plan = sharding::planReshard(shape, elem, spec, plain, mesh_, in_.cost);
  if (!plan) return plan.status().withContext("value '" + v.name() + "' needed by " + consumer);
  for (const sharding::ReshardStep& s : plan->steps) {
    const std::string& axis = mesh_.axisNames()[static_cast<size_t>(s.axis)];
    auto args = collectiveArgs(x, axis);
    using K = sharding::CollectiveKind;
    switch (s.kind) {
      case K::AllGather:
        args.push_back({"dim", Argument::integer(s.dim), false});
        SPMD_RETURN_IF_ERROR(step(std::string(ir::kAllGather), args, s.after, "all_gather", "all_gather",
                                  s.axis, s.bytesPerRank));
        break;
      case K::AllReduce:
        args.push_back({"op", stringArg(std::string(sharding::reduceOpName(s.op))), false});
        SPMD_RETURN_IF_ERROR(step(std::string(ir::kAllReduce), args, s.after, "all_reduce", "all_reduce",
                                  s.axis, s.bytesPerRank));
        break;
      case K::ReduceScatter:
        args.push_back({"dim", Argument::integer(s.dim), false});
        args.push_back({"op", stringArg(std::string(sharding::reduceOpName(s.op))), false});
        SPMD_RETURN_IF_ERROR(step(std::string(ir::kReduceScatter), args, s.after, "reduce_scatter",
                                  "reduce_scatter", s.axis, s.bytesPerRank));
        break;
      case K::AllToAll:
        args.push_back({"split_dim", Argument::integer(s.dim), false});
        args.push_back({"concat_dim", Argument::integer(s.dim2), false});
        SPMD_RETURN_IF_ERROR(step(std::string(ir::kAllToAll), args, s.after, "all_to_all", "all_to_all",
                                  s.axis, s.bytesPerRank));
        break;
      case K::LocalSlice:
        args.push_back({"dim", Argument::integer(s.dim), false});
        SPMD_RETURN_IF_ERROR(
            step(std::string(ir::kLocalSlice), args, s.after, "local_slice", nullptr, s.axis, 0));
        break;
      case K::ZeroPartial:
        SPMD_RETURN_IF_ERROR(
            step(std::string(ir::kZeroPartial), args, s.after, "zero_partial", nullptr, s.axis, 0));
        break;
      case K::MarkPartial:
        spec = s.after;  // equal copies already reduce to the value: relabel only
        break;
      case K::ScalePartial:
        SPMD_RETURN_IF_ERROR(
            step("aten.mul.Tensor",
                 {{"self", Argument::tensor(x), false}, {"other", Argument::floating(s.scale), false}},
                 s.after, "scale", nullptr, s.axis, 0));
        break;
    }
  }
  // 3. Strided targets are sliced from the replicated value.
  for (int64_t a = 0; a < mesh_.numAxes(); ++a) {
    const Placement& p = want.placements[static_cast<size_t>(a)];
    if (!p.isStrided() || spec.placements[static_cast<size_t>(a)] == p) continue;
    ShardingSpec after = spec;
    after.placements[static_cast<size_t>(a)] = p;
    auto args = collectiveArgs(x, mesh_.axisNames()[static_cast<size_t>(a)]);
    args.push_back({"dim", Argument::integer(p.dim), false});
    args.push_back({"split_factor", Argument::integer(p.splitFactor), true});
    SPMD_RETURN_IF_ERROR(
        step(std::string(ir::kLocalSlice), std::move(args), after, "local_slice", nullptr, a, 0));
  }
  SPMD_CHECK(spec.str() == want.str());
  cache_.emplace(key, x);
  return x;
}

}  // namespace spmd::passes::detail
