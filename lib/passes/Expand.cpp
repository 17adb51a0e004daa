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

std::string coordSymbol(const std::string& axisName) { return "__coord_" + axisName; }

ir::Dim localDim(const ir::Dim& global, const ShardingSpec& spec, int64_t dim, const sharding::Mesh& mesh) {
  int64_t k = shardCount(spec, dim, mesh);
  if (k == 1 || isEvenSymbolic(global, k)) return divideDim(global, k);
  // Static: even splits stay static; the first uneven one (and every one
  // after it) is the torch.chunk size at this rank's coordinate:
  // min(c, max(0, size - c * coord)) with c = ceil(size / n). Symbolic
  // (a trace-time size that does not divide): that formula over the symbol
  // at every split.
  using K = ir::SymExpr::Kind;
  std::shared_ptr<const ir::SymExpr> e = global.isStatic() ? nullptr : global.expr();
  int64_t size = global.value();
  for (size_t a = 0; a < spec.placements.size(); ++a) {
    const Placement& p = spec.placements[a];
    if (!p.isShard(dim)) continue;
    int64_t n = mesh.size(static_cast<int64_t>(a)), sf = p.splitFactor;
    if (!e && size % (n * sf) == 0) {
      size /= n;
      continue;
    }
    if (sf != 1 && (e || size % sf != 0)) return divideDim(global, k);  // refused later (checkShardable)
    // A strided shard: sf rows of size / sf, each split as torch.chunk.
    auto cur = e ? e : ir::symInteger(size / sf);
    auto c = e ? ir::symOp(K::CeilDiv, {e, ir::symInteger(n)}) : ir::symInteger((size / sf + n - 1) / n);
    auto taken = ir::symOp(K::Mul, {ir::symInteger(-1), c, ir::symSymbol(coordSymbol(mesh.axisNames()[a]))});
    e = ir::symOp(K::Min, {c, ir::symOp(K::Max, {ir::symInteger(0), ir::symOp(K::Add, {cur, taken})})});
    if (sf != 1) e = ir::symOp(K::Mul, {ir::symInteger(sf), e});
  }
  if (!e) return ir::Dim(size);
  std::vector<int64_t> shape(static_cast<size_t>(dim + 1), 1);
  shape[static_cast<size_t>(dim)] = global.value();
  ShardingSpec only = spec;  // the hint: rank 0's size
  for (auto& p : only.placements)
    if (p.isShard() && p.dim != dim) p = Placement::replicate();
  if (!sharding::checkShardable(shape, only, mesh).isOk()) return divideDim(global, k);  // refused later
  std::vector<int64_t> origin(static_cast<size_t>(mesh.numAxes()), 0);
  return ir::Dim(e, sharding::localShape(shape, only, mesh, origin)[static_cast<size_t>(dim)]);
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
    t.sizes[static_cast<size_t>(d)] = detail::localDim(global.sizes[static_cast<size_t>(d)], spec, d, mesh);
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
