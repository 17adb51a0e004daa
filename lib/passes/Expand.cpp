// SPMD expansion (see Expand.h for the worked example).
//
// Invariants: every value of the new graph has its local type; every
// operand a node reads is in the layout the propagation chose for it; a
// (value, layout) pair is materialized once (reshard results are cached),
// so a value needed replicated by many consumers is all-reduced once.
#include "passes/Expand.h"

#include "passes/Expander.h"

namespace spmd::passes {
namespace detail {

int64_t shardCount(const ShardingSpec& spec, int64_t dim, const sharding::Mesh& mesh) {
  int64_t k = 1;
  for (size_t a = 0; a < spec.placements.size(); ++a)
    if (spec.placements[a].isShard(dim)) k *= mesh.size(static_cast<int64_t>(a));
  return k;
}

ir::Dim divideDim(const ir::Dim& d, int64_t k) {
  if (k == 1) return d;
  if (d.isStatic()) return ir::Dim(d.value() / k);
  auto e = std::make_shared<ir::SymExpr>();
  e->kind = ir::SymExpr::Kind::FloorDiv;
  auto kk = std::make_shared<ir::SymExpr>();
  kk->kind = ir::SymExpr::Kind::Integer;
  kk->value = k;
  e->args = {d.expr(), kk};
  return ir::Dim(e, d.value() / k);
}

Argument stringArg(const std::string& s) {
  Argument a;
  a.kind = Argument::Kind::String;
  a.strings = {s};
  return a;
}

}  // namespace detail

ir::TensorType localType(const ir::TensorType& global, const sharding::ShardingSpec& spec,
                         const sharding::Mesh& mesh) {
  ir::TensorType t = global;
  bool changed = false;
  for (int64_t d = 0; d < global.rank(); ++d) {
    int64_t k = detail::shardCount(spec, d, mesh);
    if (k == 1) continue;
    t.sizes[static_cast<size_t>(d)] = detail::divideDim(global.sizes[static_cast<size_t>(d)], k);
    changed = true;
  }
  if (changed) t.strides.clear();  // the kernel decides the local layout
  return t;
}

Expected<program::Program> expand(const ExpandInput& in) {
  SPMD_CHECK(in.source && in.propagation);
  detail::Expander e(in);
  return e.run();
}

}  // namespace spmd::passes
